//! Where and when an experiment ran, as its report records it.

/// The time now, to the minute, as the reports print it (`2026-12-05 02:54 UTC`).
pub fn utc_minute() -> String {
    // `date` rather than a calendar written here: the reports only print it.
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// The machine's cores (0 when unknown).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(0, usize::from)
}

/// The core count, the CPU model and `uname -srm`, for the record.
pub fn describe() -> String {
    let kernel = std::process::Command::new("uname")
        .arg("-srm")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    format!("{} cores ({cpu}), {kernel}", cores())
}

/// The 1-minute load average (NaN when unknown).
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}
