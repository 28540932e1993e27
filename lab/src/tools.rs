//! iputils `ping` and `iperf3` run inside the lab's nodes — the tools operators trust, which
//! zonemesh's figures are compared with — and what they print, read.

use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::Lab;

/// Starts iputils ping inside `src`'s namespace to `dst`: `count` echoes `interval` apart.
pub fn start_ping(
    lab: &Lab,
    src: &str,
    dst: &str,
    count: u32,
    interval: Duration,
) -> Result<tokio::process::Child> {
    let address = lab.node(dst).address.to_string();
    tokio::process::Command::from(lab.command(src, "ping"))
        .args([
            "-n",
            "-c",
            &count.to_string(),
            "-i",
            &format!("{:.3}", interval.as_secs_f64()),
            "-W",
            "1",
            &address,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("run iputils ping (apt-get install iputils-ping)")
}

/// The RTTs (µs) of the replies a ping started by [`start_ping`] printed.
pub async fn ping_rtts(child: tokio::process::Child) -> Result<Vec<f64>> {
    let out = child.wait_with_output().await?;
    let rtts = parse_ping_rtts(&String::from_utf8_lossy(&out.stdout));
    if rtts.is_empty() && !out.status.success() {
        bail!("ping: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(rtts)
}

/// The RTTs (µs) of the replies in what iputils `ping -n` printed, in order: one per
/// `time=… ms` line (the summary lines carry none).
pub fn parse_ping_rtts(stdout: &str) -> Vec<f64> {
    stdout
        .lines()
        .filter_map(|l| {
            l.split("time=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .map(|ms: f64| ms * 1000.0)
        .collect()
}

/// Runs iperf3 from `src` to `dst` (a one-off server in `dst`'s namespace): `seconds` counted
/// after a 1 s warm-up (`-O 1`). Returns the receiver's bits per second.
pub async fn iperf3(lab: &Lab, src: &str, dst: &str, seconds: u32) -> Result<f64> {
    let json = iperf3_json(lab, src, dst, seconds).await?;
    received_bps(&json).context("iperf3 JSON without end.sum_received")
}

/// What iperf3's sender counted over a run as [`iperf3`] makes it: bytes sent and segments
/// retransmitted (iperf3 reads them from the kernel's `TCP_INFO`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Iperf3Sent {
    /// Bytes the sender sent in the counted part.
    pub bytes: u64,
    /// Segments it retransmitted.
    pub retransmits: u64,
}

impl Iperf3Sent {
    /// Retransmitted segments per data segment, the segments taken as `mss` bytes each.
    pub fn retransmit_ratio(&self, mss: f64) -> f64 {
        self.retransmits as f64 / (self.bytes as f64 / mss).max(1.0)
    }
}

/// Runs iperf3 as [`iperf3`] does and returns what its sender counted.
pub async fn iperf3_sent(lab: &Lab, src: &str, dst: &str, seconds: u32) -> Result<Iperf3Sent> {
    let json = iperf3_json(lab, src, dst, seconds).await?;
    let sent = &json[json
        .rfind("\"sum_sent\"")
        .context("iperf3 JSON without sum_sent")?..];
    let field = |key: &str| json_number(sent, key).with_context(|| format!("sum_sent.{key}"));
    Ok(Iperf3Sent {
        bytes: field("bytes")? as u64,
        retransmits: field("retransmits")? as u64,
    })
}

/// iperf3's JSON output of one run from `src` to `dst`.
async fn iperf3_json(lab: &Lab, src: &str, dst: &str, seconds: u32) -> Result<String> {
    const PORT: &str = "5299";
    let mut server = tokio::process::Command::from(lab.command(dst, "iperf3"))
        .args(["-s", "-1", "-p", PORT])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("run iperf3 (apt-get install iperf3)")?;
    let address = lab.node(dst).address.to_string();
    let mut last = String::new();
    // The server needs a moment to listen: retry the client a few times. A run that stalls
    // (iperf3 waits for its server's results without a limit) is killed well past its length.
    let limit = Duration::from_secs(u64::from(seconds) + 30);
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let run = tokio::process::Command::from(lab.command(src, "iperf3"))
            .args([
                "-c",
                &address,
                "-p",
                PORT,
                "-t",
                &seconds.to_string(),
                "-O",
                "1",
                "-J",
            ])
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(limit, run)
            .await
            .with_context(|| format!("iperf3 {src} -> {dst} still running after {limit:?}"))??;
        if out.status.success() {
            let _ = server.wait().await;
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        last = String::from_utf8_lossy(&out.stdout).into_owned();
    }
    let _ = server.kill().await;
    bail!("iperf3 {src} -> {dst} failed: {last}")
}

/// `end.sum_received.bits_per_second` of iperf3's JSON, without a JSON parser dependency.
fn received_bps(json: &str) -> Option<f64> {
    let end = json.rfind("\"sum_received\"")?;
    json_number(&json[end..], "bits_per_second")
}

/// The number after the first `"key":` in `json`.
fn json_number(json: &str, key: &str) -> Option<f64> {
    let quoted = format!("\"{key}\"");
    let at = json.find(&quoted)?;
    let value = json[at + quoted.len()..]
        .trim_start()
        .strip_prefix(':')?
        .trim_start();
    let number: String = value
        .chars()
        .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        .collect();
    number.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What iputils 20221126 printed, half its echo requests dropped by iptables.
    const HALF_LOST: &str = "PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data.
64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.102 ms
64 bytes from 127.0.0.1: icmp_seq=3 ttl=64 time=0.039 ms

--- 127.0.0.1 ping statistics ---
4 packets transmitted, 2 received, 50% packet loss, time 620ms
rtt min/avg/max/mdev = 0.039/0.070/0.102/0.031 ms
";

    /// The same with every reply lost.
    const ALL_LOST: &str = "PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data.

--- 127.0.0.1 ping statistics ---
4 packets transmitted, 0 received, 100% packet loss, time 612ms
";

    #[test]
    fn ping_output_gives_one_rtt_per_reply_in_microseconds() {
        let close = |got: Vec<f64>, want: &[f64]| {
            got.len() == want.len() && got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-9)
        };
        let cases: [(&str, &[f64]); 4] = [
            (HALF_LOST, &[102.0, 39.0]),
            (ALL_LOST, &[]),
            // From 1 ms on, iputils prints three significant digits.
            (
                "64 bytes from 10.77.1.12: icmp_seq=9 ttl=63 time=10.1 ms",
                &[10_100.0],
            ),
            ("", &[]),
        ];
        for (stdout, want) in cases {
            let got = parse_ping_rtts(stdout);
            assert!(
                close(got.clone(), want),
                "{stdout:?}: {got:?}, not {want:?}"
            );
        }
    }

    #[test]
    fn iperf3_json_gives_the_receiver_rate() {
        let json = r#"{"end":{"sum_sent":{"bits_per_second":9.9e7},"sum_received":{"seconds":3.0,"bits_per_second":95654321.5,"retransmits":0}}}"#;
        assert_eq!(received_bps(json), Some(95_654_321.5));
        assert_eq!(received_bps("{}"), None);
        let sent = r#"{"sum_sent":{"start":0,"bytes":14480000,"bits_per_second":9.9e7,"retransmits":500}}"#;
        assert_eq!(json_number(sent, "bytes"), Some(14_480_000.0));
        assert_eq!(json_number(sent, "retransmits"), Some(500.0));
        let ratio = Iperf3Sent {
            bytes: 14_480_000,
            retransmits: 500,
        }
        .retransmit_ratio(1448.0);
        assert!((ratio - 0.05).abs() < 1e-12);
    }
}
