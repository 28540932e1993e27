//! The bytes the aggregator receives: a few windows, turned into reports, numbered by the outbox
//! and encoded, are exactly `tests/golden/reports.hex` (one report per line, protobuf in hex).
//! The file was written by the agent that built `v1` messages itself, before its reports became
//! domain values converted at the session; the figures on the wire must not move.

use std::collections::BTreeMap;
use std::time::Duration;

use prost::Message;
use zonemesh_agent::outbox::Outbox;
use zonemesh_agent::probe::{PeerWindow, WindowReport};
use zonemesh_agent::report::of_window;
use zonemesh_agent::stats::WindowStats;
use zonemesh_domain::{Bps, IcmpMode, NodeName, ThroughputSample, UnixMs};
use zonemesh_proto::v1;

fn name(n: &str) -> NodeName {
    NodeName::parse("node", n).unwrap()
}

/// A peer's window: replies after these round trips (ns), then `lost` probes without one.
fn peer(rtts_ns: &[u64], lost: u64) -> PeerWindow {
    let mut stats = WindowStats::new();
    for &ns in rtts_ns {
        stats.reply(Duration::from_nanos(ns));
    }
    for _ in 0..lost {
        stats.lost();
    }
    PeerWindow {
        zone: "z".into(),
        stats,
    }
}

/// A window of `length` ending at `end_unix_ms`.
fn window(length: Duration, end_unix_ms: i64, peers: Vec<(&str, PeerWindow)>) -> WindowReport {
    let start = tokio::time::Instant::now();
    WindowReport {
        index: 0,
        start,
        end: start + length,
        end_unix_ms: UnixMs(end_unix_ms),
        peers: peers.into_iter().map(|(n, p)| (name(n), p)).collect(),
    }
}

/// A throughput result as `tcp::measure` computes it.
fn throughput(bytes: u64, micros: u64, warmup_us: u64, streams: u32) -> ThroughputSample {
    let rate = Bps::parse("throughput_bps", bytes as f64 * 8.0 / (micros as f64 / 1e6)).unwrap();
    ThroughputSample::new(rate, bytes, micros, warmup_us, streams).unwrap()
}

/// The reports of three windows, as sent twice (a reconnect sends them again), in hex.
fn sent() -> Vec<String> {
    let tenth_ms: Vec<u64> = (1..=100).map(|i| i * 10_000).collect();
    let full = window(
        Duration::from_secs(10),
        1_700_000_010_000,
        vec![
            ("a", peer(&[50_000, 60_000], 0)),
            ("b", peer(&[37_000, 41_000, 39_000, 2_000_000, 40_000], 1)),
            ("c", peer(&[], 3)),
            ("d", peer(&[], 0)),
            ("e", peer(&[1_234_567], 0)),
            ("g.example-1", peer(&tenth_ms, 3)),
        ],
    );
    let results = BTreeMap::from([
        (name("c"), throughput(1_000_000, 1_000_000, 0, 1)),
        (name("f"), throughput(377_123_456, 2_999_871, 1_000_000, 4)),
        (name("a"), throughput(10, 3, 0, 1)),
    ]);
    let partial = window(
        Duration::from_millis(2_500),
        1_700_000_012_500,
        vec![("b", peer(&[120_500, 119_250, 3_000_000_000, 121_001], 2))],
    );
    let empty = window(Duration::from_secs(10), 1_700_000_022_500, vec![]);

    let node = name("a");
    let mut outbox = Outbox::new(8);
    outbox.push(of_window(&node, IcmpMode::Raw, &full, results));
    let results = BTreeMap::from([(name("b"), throughput(5_000, 7, 0, 2))]);
    outbox.push(of_window(&node, IcmpMode::Tcp, &partial, results));
    assert!(of_window(&node, IcmpMode::Tcp, &empty, BTreeMap::new()).is_empty());

    let mut hex = Vec::new();
    for applied in [41, 41] {
        outbox.connected(applied);
        while let Some(report) = outbox.next_to_send() {
            // As the session sends it.
            let bytes = v1::Report::from(report).encode_to_vec();
            hex.push(bytes.iter().map(|b| format!("{b:02x}")).collect());
        }
    }
    hex
}

#[test]
fn the_aggregator_receives_the_bytes_it_always_did() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/reports.hex");
    let golden = std::fs::read_to_string(path).unwrap_or_default();
    let sent = sent();
    assert_eq!(sent.len(), 4, "two reports, sent twice");
    assert_eq!(sent[..2], sent[2..], "a replay is the same bytes");
    assert_eq!(sent.join("\n") + "\n", golden, "{path}");
}
