//! A bound on how long a lab run may take, so that a run stuck anywhere (a query the aggregator
//! never answers, a tool that never exits) ends with where it was, not with the CI job's time
//! limit and nothing said: CI once spent an hour in the demo-cluster test and printed only that
//! it had been running for over 60 seconds.
//!
//! ```no_run
//! use std::time::Duration;
//! use zonemesh_lab::Watchdog;
//!
//! let watchdog = Watchdog::start("lab_e2e", Duration::from_secs(20 * 60), None);
//! watchdog.stage("settle");
//! // ...
//! watchdog.stage("cut a node off");
//! // Dropped (the run ended, well or not): the watchdog goes quietly.
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Lines of each log file printed when the limit passes.
const LOG_TAIL_LINES: usize = 25;
/// The latest stages printed when the limit passes (a progress callback notes many).
const STAGES_SHOWN: usize = 40;

/// Ends this process when the run it watches outlives its limit: writes the run's stages so far
/// (with when each began) and the last lines of its log files to standard error — directly, past
/// the test harness's capture, which an exiting process never prints — then kills what the
/// process started, removes its labs (as on SIGTERM, see [`crate::cleanup_on_signals`]) and exits
/// with 124, as `timeout(1)` does. Dropping it stops the clock.
#[derive(Debug)]
pub struct Watchdog {
    shared: Arc<(Mutex<Watched>, Condvar)>,
    started: Instant,
}

#[derive(Debug)]
struct Watched {
    done: bool,
    /// The stages noted so far: how long after the start each began, and its name.
    stages: Vec<(Duration, String)>,
}

impl Watchdog {
    /// Starts the clock on the run `what`, which may take `limit`; `logs`, a directory whose
    /// files' tails are printed if it does not end in time.
    pub fn start(what: &str, limit: Duration, logs: Option<&Path>) -> Self {
        let shared = Arc::new((
            Mutex::new(Watched {
                done: false,
                stages: Vec::new(),
            }),
            Condvar::new(),
        ));
        let watched = shared.clone();
        let (what, logs) = (what.to_owned(), logs.map(Path::to_path_buf));
        let started = Instant::now();
        std::thread::Builder::new()
            .name("lab-watchdog".into())
            .spawn(move || {
                let (lock, ended) = &*watched;
                let Ok(guard) = lock.lock() else { return };
                let Ok((guard, _)) = ended.wait_timeout_while(guard, limit, |w| !w.done) else {
                    return;
                };
                if guard.done {
                    return;
                }
                let report = report(&what, limit, started.elapsed(), &guard.stages, logs);
                let _ = std::io::stderr().lock().write_all(report.as_bytes());
                crate::lab::remove_all("by the watchdog");
                std::process::exit(124);
            })
            .expect("spawn the lab watchdog thread");
        Self { shared, started }
    }

    /// Notes that the run now does `stage` (printed, with the time since the start, if the limit
    /// passes).
    pub fn stage(&self, stage: impl Into<String>) {
        if let Ok(mut w) = self.shared.0.lock() {
            w.stages.push((self.started.elapsed(), stage.into()));
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let (lock, ended) = &*self.shared;
        if let Ok(mut w) = lock.lock() {
            w.done = true;
        }
        ended.notify_all();
    }
}

/// What the watchdog says when `what` outlived `limit`.
fn report(
    what: &str,
    limit: Duration,
    elapsed: Duration,
    stages: &[(Duration, String)],
    logs: Option<PathBuf>,
) -> String {
    let mut out = format!(
        "\n{what}: still running after {} (its limit is {}); the watchdog ends it.\nstages:\n",
        minutes(elapsed),
        minutes(limit)
    );
    if stages.is_empty() {
        out.push_str("  (none noted)\n");
    }
    let earlier = stages.len().saturating_sub(STAGES_SHOWN);
    if earlier > 0 {
        out.push_str(&format!("  ({earlier} earlier)\n"));
    }
    for (at, stage) in &stages[earlier..] {
        out.push_str(&format!("  {} {stage}\n", minutes(*at)));
    }
    let mut files: Vec<PathBuf> = logs
        .and_then(|dir| std::fs::read_dir(dir).ok())
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        out.push_str(&format!(
            "--- last {} of {} lines of {}\n",
            lines.len().min(LOG_TAIL_LINES),
            lines.len(),
            file.display()
        ));
        for line in &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..] {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// `m:ss`.
fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}", s / 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Set in the copy of this test binary that the test below runs and the watchdog ends.
    const STUCK: &str = "ZONEMESH_WATCHDOG_TEST_STUCK";

    #[test]
    fn a_run_past_its_limit_ends_its_process_with_124_and_says_where_it_was() {
        if std::env::var_os(STUCK).is_some() {
            let logs = std::env::var_os(STUCK).map(PathBuf::from);
            let watchdog = Watchdog::start("stuck", Duration::from_millis(300), logs.as_deref());
            watchdog.stage("waiting for what never comes");
            std::thread::sleep(Duration::from_secs(30));
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("aggregator.log"), "the last line\n").unwrap();
        let started = Instant::now();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "watchdog::tests::a_run_past_its_limit_ends_its_process_with_124_and_says_where_it_was",
                "--test-threads=1",
            ])
            .env(STUCK, dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(124), "{stderr}");
        assert!(started.elapsed() < Duration::from_secs(20), "{stderr}");
        assert!(
            stderr.contains("stuck: still running after 0:00"),
            "{stderr}"
        );
        assert!(
            stderr.contains("  0:00 waiting for what never comes\n"),
            "{stderr}"
        );
        assert!(
            stderr.contains("aggregator.log\nthe last line\n"),
            "{stderr}"
        );
    }

    #[test]
    fn a_run_that_ends_in_time_is_left_alone() {
        let watchdog = Watchdog::start("quick", Duration::from_millis(200), None);
        watchdog.stage("done at once");
        drop(watchdog);
        // Past the limit, this process is still here.
        std::thread::sleep(Duration::from_millis(400));
    }

    #[test]
    fn the_report_names_the_stages_and_the_logs_tails() {
        let dir = tempfile::tempdir().unwrap();
        let log: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.path().join("aggregator.log"), log).unwrap();
        let stages = [
            (Duration::ZERO, "settle".to_owned()),
            (
                Duration::from_secs(95),
                "throughput beside iperf3".to_owned(),
            ),
        ];
        let text = report(
            "lab_e2e",
            Duration::from_secs(1200),
            Duration::from_secs(1201),
            &stages,
            Some(dir.path().to_owned()),
        );
        assert!(text.contains("lab_e2e: still running after 20:01 (its limit is 20:00)"));
        assert!(text.contains("  0:00 settle\n  1:35 throughput beside iperf3\n"));
        assert!(text.contains("last 25 of 30 lines of"));
        assert!(text.contains("line 6\n") && !text.contains("line 5\n"));
    }
}
