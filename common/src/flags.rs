//! Parsing of flag values shared by the zonemesh binaries, with errors that name the flag.

use std::time::Duration;

/// Parses a duration such as `250ms`, `10s`, `5m` or `1h` (a bare number is seconds).
pub fn parse_duration(value: &str) -> Result<Duration, String> {
    let value = value.trim();
    let split = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{value:?} is not a duration (use 250ms, 10s, 5m or 1h)"))?;
    let seconds = match unit {
        "ms" => number / 1000.0,
        "" | "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => {
            return Err(format!(
                "{value:?}: unknown unit {unit:?} (use ms, s, m or h)"
            ));
        }
    };
    if !seconds.is_finite() || !(0.0..=365.0 * 86_400.0).contains(&seconds) {
        return Err(format!("{value:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Parses a rate in bit/s such as `100M`, `2.5G`, `800k` or `0` (a bare number is bit/s; the
/// suffixes are decimal, as network rates are).
pub fn parse_bps(value: &str) -> Result<f64, String> {
    let value = value.trim();
    let (number, scale) = match value.chars().last() {
        Some('k' | 'K') => (&value[..value.len() - 1], 1e3),
        Some('M') => (&value[..value.len() - 1], 1e6),
        Some('G') => (&value[..value.len() - 1], 1e9),
        Some('T') => (&value[..value.len() - 1], 1e12),
        _ => (value, 1.0),
    };
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{value:?} is not a rate (use 100M, 2.5G, 800k or 0, in bit/s)"))?;
    let bps = n * scale;
    if !bps.is_finite() || bps < 0.0 {
        return Err(format!("{value:?} is out of range"));
    }
    Ok(bps)
}

/// The exit status for bad configuration (EX_USAGE from sysexits.h).
pub const EXIT_USAGE: i32 = 64;

/// Log output format of a binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Parses the command line; a usage error exits with [`EXIT_USAGE`] (clap's own choice, 2, is
/// not what operators of the other zonemesh binaries expect), `--help` and `--version` with 0.
pub fn parse_or_exit<T: clap::Parser>() -> T {
    match T::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let _ = e.print();
            std::process::exit(EXIT_USAGE);
        }
    }
}

/// Prints `program: message` and exits with [`EXIT_USAGE`].
pub fn usage_error(program: &str, message: &str) -> ! {
    eprintln!("{program}: {message}");
    std::process::exit(EXIT_USAGE);
}

/// Logs to stderr in `format`, filtered by `filter` (tracing `EnvFilter` syntax, the `--log`
/// flag), coloured only on a terminal without `NO_COLOR`; a bad filter is a usage error.
pub fn init_logging(program: &str, format: LogFormat, filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|e| usage_error(program, &format!("--log: {e}")));
    // Colour only for a person at a terminal: files and `kubectl logs` get plain text.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        for bad in ["", "s", "10x", "-1s", "1e400s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rates_parse_with_decimal_suffixes() {
        assert_eq!(parse_bps("100M").unwrap(), 100e6);
        assert_eq!(parse_bps("2.5G").unwrap(), 2.5e9);
        assert_eq!(parse_bps("0").unwrap(), 0.0);
        for bad in ["", "M", "-1M", "fast", "1e400"] {
            assert!(parse_bps(bad).is_err(), "{bad:?}");
        }
    }
}
