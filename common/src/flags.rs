//! Parsing of flag values shared by the zonemesh binaries, with errors that name the flag.

use std::time::Duration;

/// Why a flag's value is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Neither a number of seconds nor a duration humantime reads.
    #[error(
        "{value:?} is not a duration ({reason}; use e.g. 250ms, 10s, 1.5s, 5m, 1h30m, or a number of seconds)"
    )]
    Invalid {
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Longer than a year (or too large to hold).
    #[error("{value:?} is out of range (at most 365 days)")]
    OutOfRange {
        /// The value given.
        value: String,
    },
}

/// The longest duration a flag takes.
const MAX_DURATION: Duration = Duration::from_secs(365 * 86_400);

/// Parses a flag's duration: what `humantime` reads (`250ms`, `1.5s`, `5m`, `1h 30m`, `2days`),
/// or a bare number of seconds (`10`, `1.5`), which humantime refuses but zonemesh's flags have
/// always taken. At most 365 days.
///
/// (The front end is ours because humantime has no bare-seconds form and no ceiling; it also
/// reads `.5s` as `0.5s`, as the flags did before humantime, which wants a digit first.)
pub fn parse_duration(value: &str) -> Result<Duration, DurationError> {
    let trimmed = value.trim();
    let invalid = |reason: String| DurationError::Invalid {
        value: value.to_owned(),
        reason,
    };
    let bare = !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let duration = if bare {
        let seconds: f64 = trimmed
            .parse()
            .map_err(|_| invalid("not a number".into()))?;
        Duration::try_from_secs_f64(seconds).map_err(|_| DurationError::OutOfRange {
            value: value.to_owned(),
        })?
    } else {
        let leading = if trimmed.starts_with('.') { "0" } else { "" };
        humantime::parse_duration(&format!("{leading}{trimmed}"))
            .map_err(|e| invalid(e.to_string()))?
    };
    if duration > MAX_DURATION {
        return Err(DurationError::OutOfRange {
            value: value.to_owned(),
        });
    }
    Ok(duration)
}

/// Why a flag's value is not a rate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateError {
    /// Not a number with an optional decimal suffix.
    #[error("{0:?} is not a rate (use 100M, 2.5G, 800k or 0, in bit/s)")]
    Invalid(String),
    /// Negative, or too large to hold.
    #[error("{0:?} is out of range")]
    OutOfRange(String),
}

/// Parses a rate in bit/s such as `100M`, `2.5G`, `800k` or `0` (a bare number is bit/s; the
/// suffixes are decimal, as network rates are).
pub fn parse_bps(value: &str) -> Result<f64, RateError> {
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
        .map_err(|_| RateError::Invalid(value.to_owned()))?;
    let bps = n * scale;
    if !bps.is_finite() || bps < 0.0 {
        return Err(RateError::OutOfRange(value.to_owned()));
    }
    Ok(bps)
}

/// Why a flag's value is not a share.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a share (use 0.5%, or 0.005)")]
pub struct ShareError(String);

/// Parses a share such as `0.5%` or `0.005` (a finite number; its range is the flag's to check).
pub fn parse_share(value: &str) -> Result<f64, ShareError> {
    let trimmed = value.trim();
    let (number, scale) = match trimmed.strip_suffix('%') {
        Some(n) => (n.trim_end(), 0.01),
        None => (trimmed, 1.0),
    };
    number
        .parse::<f64>()
        .ok()
        .map(|n| n * scale)
        .filter(|v| v.is_finite())
        .ok_or_else(|| ShareError(value.to_owned()))
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
    fn shares_parse_as_percentages_or_fractions() {
        assert_eq!(parse_share("0.5%"), Ok(0.005));
        assert_eq!(parse_share(" 20 % "), Ok(0.2));
        assert_eq!(parse_share("0.25"), Ok(0.25));
        for bad in ["", "%", "half", "1e400", "NaN", "5%%"] {
            let e = parse_share(bad).unwrap_err();
            assert!(e.to_string().contains("is not a share"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn durations_parse_with_units_or_as_bare_seconds() {
        let ms = Duration::from_millis;
        for (text, want) in [
            ("250ms", ms(250)),
            ("10", ms(10_000)),
            ("1.5", ms(1_500)),
            (".5", ms(500)),
            ("1.5s", ms(1_500)),
            (".5s", ms(500)),
            (" 10s ", ms(10_000)),
            ("0ms", ms(0)),
            ("5m", ms(300_000)),
            ("1h", ms(3_600_000)),
            ("1.5h", ms(5_400_000)),
            ("1h30m", ms(5_400_000)),
            ("1h 30m", ms(5_400_000)),
            ("250us", Duration::from_micros(250)),
            ("0.25ms", Duration::from_micros(250)),
            ("2days", ms(2 * 86_400_000)),
            ("365d", ms(365 * 86_400_000)),
        ] {
            assert_eq!(parse_duration(text), Ok(want), "{text:?}");
        }
    }

    #[test]
    fn bad_durations_say_what_is_wrong() {
        for bad in [
            "",
            "s",
            "10x",
            "-1s",
            "1e400s",
            "1e30",
            "1.2.3",
            "ten seconds",
            "5 parsecs",
        ] {
            let e = parse_duration(bad).unwrap_err();
            assert!(matches!(e, DurationError::Invalid { .. }), "{bad:?}: {e}");
            assert!(e.to_string().contains("use e.g. 250ms"), "{e}");
        }
        for long in ["366d", "400d", "31622400", "9999999999999999999999"] {
            assert_eq!(
                parse_duration(long),
                Err(DurationError::OutOfRange { value: long.into() }),
                "{long:?}"
            );
        }
        assert_eq!(
            parse_duration("10x").unwrap_err().to_string(),
            "\"10x\" is not a duration (unknown time unit \"x\", supported units: ns, us/µs, ms, \
             sec, min, hours, days, weeks, months, years (and few variations); use e.g. 250ms, \
             10s, 1.5s, 5m, 1h30m, or a number of seconds)"
        );
    }

    #[test]
    fn rates_parse_with_decimal_suffixes() {
        assert_eq!(parse_bps("100M").unwrap(), 100e6);
        assert_eq!(parse_bps("2.5G").unwrap(), 2.5e9);
        assert_eq!(parse_bps("0").unwrap(), 0.0);
        for bad in ["", "M", "fast"] {
            assert_eq!(
                parse_bps(bad),
                Err(RateError::Invalid(bad.into())),
                "{bad:?}"
            );
        }
        for bad in ["-1M", "1e400"] {
            assert_eq!(
                parse_bps(bad),
                Err(RateError::OutOfRange(bad.into())),
                "{bad:?}"
            );
        }
    }
}
