//! The ICMP prober against this machine's own loopback addresses, IPv4 and IPv6. As root (CI)
//! the raw socket is used and must answer; without root the explicit choices fail with a message
//! naming `--icmp`, and `auto` falls back to what can be opened.

use std::net::IpAddr;
use std::time::Duration;

use zonemesh_agent::config::IcmpChoice;
use zonemesh_agent::icmp::{IcmpProber, choose_mode};
use zonemesh_agent::probe::{Outcome, Prober, Target};
use zonemesh_domain::IcmpMode;

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1))
            == Some("0")
    })
}

fn target(address: IpAddr) -> Target {
    Target {
        node: zonemesh_domain::NodeName::parse("node", "peer").unwrap(),
        zone: "z".into(),
        address,
        port: 7402,
        interval: Duration::from_secs(1),
        train_size: 1,
        train_gap: Duration::ZERO,
        timeout: Duration::from_secs(1),
    }
}

/// Probes `address` `n` times; returns the replies' RTTs.
async fn replies(prober: &IcmpProber, address: IpAddr, n: u64) -> Vec<Duration> {
    let target = target(address);
    let mut rtts = Vec::new();
    for seq in 0..n {
        let outcome = tokio::time::timeout(target.timeout, prober.probe(&target, seq))
            .await
            .unwrap_or(Outcome::Lost);
        if let Outcome::Reply(rtt) = outcome {
            rtts.push(rtt);
        }
    }
    rtts
}

#[tokio::test(flavor = "current_thread")]
async fn raw_echo_answers_on_ipv4_and_ipv6_loopback() {
    let v4: IpAddr = "127.0.0.1".parse().unwrap();
    let v6: IpAddr = "::1".parse().unwrap();
    if !is_root() {
        let err = choose_mode(IcmpChoice::Raw, v4).expect_err("raw sockets need CAP_NET_RAW");
        assert!(err.to_string().starts_with("--icmp raw: "), "{err}");
        return;
    }
    assert_eq!(choose_mode(IcmpChoice::Raw, v4).unwrap(), IcmpMode::Raw);
    let prober = IcmpProber::new(IcmpMode::Raw, &[v4, v6]);
    for address in [v4, v6] {
        // A loopback with IPv6 switched off has no ::1 to answer.
        if address.is_ipv6() && std::net::UdpSocket::bind("[::1]:0").is_err() {
            continue;
        }
        let rtts = replies(&prober, address, 20).await;
        assert_eq!(rtts.len(), 20, "{address}: every echo is answered");
        assert!(
            rtts.iter()
                .all(|r| *r > Duration::ZERO && *r < Duration::from_millis(50)),
            "{address}: {rtts:?}"
        );
    }
}

#[tokio::test(flavor = "current_thread")]
async fn another_pinger_on_the_host_does_not_disturb_the_counts() {
    if !is_root() {
        return;
    }
    // iputils ping floods the same address with its own identifier meanwhile: our socket's filter
    // keeps its replies out, and every one of our probes still gets exactly its own reply.
    let flood = std::process::Command::new("ping")
        .args(["-n", "-q", "-i", "0.002", "-c", "2000", "127.0.0.1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let prober = IcmpProber::new(IcmpMode::Raw, &["127.0.0.1".parse().unwrap()]);
    let rtts = replies(&prober, "127.0.0.1".parse().unwrap(), 200).await;
    if let Ok(mut p) = flood {
        let _ = p.kill();
        let _ = p.wait();
    }
    assert_eq!(rtts.len(), 200);
}

#[test]
fn an_explicit_choice_that_cannot_work_names_the_flag() {
    // This machine's ping_group_range ("1 0") allows no datagram ICMP socket to anyone; where a
    // range allows it, the choice works and the check is moot.
    if let Err(err) = choose_mode(IcmpChoice::Dgram, "127.0.0.1".parse().unwrap()) {
        let text = err.to_string();
        assert!(text.starts_with("--icmp dgram: "), "{text}");
        assert!(text.contains("ping_group_range"), "{text}");
    }
    let auto = choose_mode(IcmpChoice::Auto, "127.0.0.1".parse().unwrap()).unwrap();
    if is_root() {
        assert_ne!(auto, IcmpMode::Tcp, "root can always open a raw socket");
    }
}
