//! The link emulator: holds packets between zones for the configured delay, with jitter, in user
//! space (this kernel has no `netem`).
//!
//! The router namespace sends every packet from zone *a* to zone *b* to NFQUEUE queue
//! [`queue_number`]`(a, b)` in its FORWARD chain (a forwarding hop, so the delay composes with
//! the nodes' own `tbf` rate limits instead of colliding with TCP small queues in a sender's
//! OUTPUT hook). One thread reads the queues over one netlink socket and gives each packet its
//! verdict when its time has come.
//!
//! What keeps it fast:
//! - metadata only: the kernel copies no payload to user space (the queue number says which link
//!   a packet is on);
//! - GSO packets are queued whole (`NFQA_CFG_F_GSO`), so a 64 KiB TCP super-packet costs one
//!   message, not 45;
//! - one queue per direction and release times that never go backwards, so each queue is a FIFO
//!   and one `NFQNL_MSG_VERDICT_BATCH` releases every due packet of a queue at once; the verdicts
//!   of all queues go out in one `send`.
//!
//! Jitter never reorders a link: a packet leaves no earlier than the one before it on the same
//! link (as a real serial link behaves), so a packet's delay is
//! `max(base ± uniform jitter, previous release − arrival)`.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::time::TimeSpec;
use socket2::{Domain, Protocol, Socket, Type};

const NETLINK_NETFILTER: i32 = 12;
const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_CONFIG: u16 = 2;
const NFQNL_MSG_VERDICT_BATCH: u16 = 3;
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_TIMESTAMP: u16 = 4;
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQA_CFG_MASK: u16 = 4;
const NFQA_CFG_FLAGS: u16 = 5;
const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_COPY_META: u8 = 1;
const NFQA_CFG_F_GSO: u32 = 4;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLMSG_ERROR: u16 = 2;
const NF_ACCEPT: u32 = 1;

/// Packets a queue holds before the kernel drops new ones (as a router's full buffer would).
const QUEUE_MAXLEN: u32 = 65_536;
/// Receive buffer of the netlink socket: bursts wait here between two reads.
const SOCKET_BUFFER: usize = 32 << 20;
/// How often the thread looks at its stop flag when no packet is due.
const IDLE_WAKE: Duration = Duration::from_millis(50);
/// A packet due this soon is released with the ones due now.
const EARLY: Duration = Duration::from_micros(10);
/// Oversleep beyond this is a busy machine, not timer latency: not learnt from.
const MAX_OVERSLEEP: Duration = Duration::from_millis(1);
/// A kernel timestamp older than this at read time is not believed.
const MAX_READ_WAIT: Duration = Duration::from_millis(100);

/// Microseconds since the epoch by the wall clock (the clock of the kernel's packet stamps).
fn wall_us() -> u64 {
    zonemesh_common::time::unix_time().as_micros() as u64
}

/// The kernel stamps queued packets only while some socket asks for receive timestamps; this
/// socket asks, for as long as it lives. `None` if it cannot (delays then count from the read).
fn enable_kernel_timestamps() -> Option<std::net::UdpSocket> {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").ok()?;
    nix::sys::socket::setsockopt(
        &socket,
        nix::sys::socket::sockopt::ReceiveTimestampns,
        &true,
    )
    .ok()?;
    Some(socket)
}

/// The NFQUEUE queue number of the link from zone index `from` to zone index `to` (indexes
/// from 0, fewer than 256 zones).
pub fn queue_number(from: usize, to: usize) -> u16 {
    (from * 256 + to) as u16
}

/// The delay of one direction of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkDelay {
    /// NFQUEUE queue of this direction.
    pub queue: u16,
    /// Mean one-way delay.
    pub delay: Duration,
    /// Each packet's delay is `delay` plus a uniform value in `[-jitter, +jitter]` (but at least
    /// zero, and never ahead of the packet before it).
    pub jitter: Duration,
}

/// What the emulator has done so far.
#[derive(Debug, Default)]
pub struct Counters {
    /// Packets received from the kernel.
    pub packets: AtomicU64,
    /// Packets released.
    pub released: AtomicU64,
    /// Verdict messages sent (one releases many packets).
    pub verdicts: AtomicU64,
    /// Largest number of packets held at once.
    pub peak_held: AtomicU64,
    /// Sum of the lateness of each release beyond its due time, ns.
    pub late_ns: AtomicU64,
    /// Times the netlink socket overflowed (the kernel dropped queued packets).
    pub overflows: AtomicU64,
    /// Sum of how early packets released ahead of their due time were, ns.
    pub early_ns: AtomicU64,
}

/// A running emulator thread; stopped (and its verdicts given) when dropped.
#[derive(Debug)]
pub struct Emulator {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<()>>>,
    /// The queues, in the order of `extra_ns`.
    queues: Vec<u16>,
    /// Delay added to each queue's at run time (a fault injected), ns.
    extra_ns: Arc<Vec<AtomicU64>>,
    /// Its counters.
    pub counters: Arc<Counters>,
}

impl Emulator {
    /// Starts the emulator for `links` inside the network namespace at `netns_path`
    /// (`/run/netns/<name>`). Returns once the queues are bound, so that the iptables rules that
    /// feed them can be added right after.
    pub fn start(netns_path: &str, links: Vec<LinkDelay>, seed: u64) -> io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let queues: Vec<u16> = links.iter().map(|l| l.queue).collect();
        let extra_ns: Arc<Vec<AtomicU64>> =
            Arc::new(links.iter().map(|_| AtomicU64::new(0)).collect());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let path = netns_path.to_owned();
        let (stop2, counters2, extra2) = (stop.clone(), counters.clone(), extra_ns.clone());
        let thread = std::thread::Builder::new()
            .name("link-emulator".into())
            .spawn(move || {
                let setup = || -> io::Result<Netlink> {
                    crate::netns::enter(&path)?;
                    // Releases on time to the µs, not the 50 µs of the default timer slack.
                    let _ = nix::sys::prctl::set_timerslack(1);
                    Netlink::bind(links.iter().map(|l| l.queue))
                };
                let netlink = match setup() {
                    Ok(n) => {
                        let _ = ready_tx.send(Ok(()));
                        n
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                        return Err(e);
                    }
                };
                run(netlink, &links, &extra2, seed, &stop2, &counters2)
            })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Self {
                stop,
                thread: Some(thread),
                queues,
                extra_ns,
                counters,
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(io::Error::other("the emulator thread ended before binding")),
        }
    }

    /// Stops the thread; returns what ended it if it failed.
    pub fn stop(&mut self) -> io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(io::Error::other("the emulator thread panicked")),
            None => Ok(()),
        }
    }

    /// Adds `extra` to the delay of every packet of `queue` from now on (zero takes it away);
    /// false when the emulator has no such queue.
    pub fn set_extra_delay(&self, queue: u16, extra: Duration) -> bool {
        match self.queues.iter().position(|q| *q == queue) {
            Some(i) => {
                self.extra_ns[i].store(extra.as_nanos() as u64, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Whether the thread still runs (it ends only when stopped or on a netlink error).
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// One held packet.
#[derive(Debug, Clone, Copy)]
struct Held {
    id: u32,
    due: Instant,
}

/// Per-direction FIFO of held packets.
#[derive(Debug)]
struct Link {
    config: LinkDelay,
    held: VecDeque<Held>,
    last_due: Option<Instant>,
}

/// xorshift64*: jitter needs cheap, seedable randomness, not a good one.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next_unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The delay of one packet on `link` arriving at `now` (jittered, never ahead of the previous),
/// `extra` added.
fn due_time(link: &mut Link, now: Instant, rng: &mut Rng, extra: Duration) -> Instant {
    let c = link.config;
    let mut delay = c.delay + extra;
    if !c.jitter.is_zero() {
        let offset = c.jitter.as_secs_f64() * (2.0 * rng.next_unit() - 1.0);
        delay = Duration::from_secs_f64(((c.delay + extra).as_secs_f64() + offset).max(0.0));
    }
    let due = (now + delay).max(link.last_due.unwrap_or(now));
    link.last_due = Some(due);
    due
}

fn run(
    mut netlink: Netlink,
    configs: &[LinkDelay],
    extra_ns: &[AtomicU64],
    seed: u64,
    stop: &AtomicBool,
    counters: &Counters,
) -> io::Result<()> {
    let mut links: Vec<Link> = configs
        .iter()
        .map(|c| Link {
            config: *c,
            held: VecDeque::new(),
            last_due: None,
        })
        .collect();
    let index = |queue: u16| configs.iter().position(|c| c.queue == queue);
    let mut rng = Rng(seed | 1);
    let mut buf = vec![0u8; 1 << 16];
    let mut verdicts = Vec::with_capacity(4096);
    let mut held_now = 0u64;
    let mut oversleep = Duration::ZERO;
    let _timestamps = enable_kernel_timestamps();
    loop {
        if stop.load(Ordering::Relaxed) {
            // Let everything still held go, so no connection is left hanging.
            for link in &mut links {
                if let Some(last) = link.held.back() {
                    push_batch_verdict(&mut verdicts, link.config.queue, last.id);
                }
                link.held.clear();
            }
            if !verdicts.is_empty() {
                netlink.send(&verdicts)?;
            }
            return Ok(());
        }
        let next_due = links
            .iter()
            .filter_map(|l| l.held.front())
            .map(|h| h.due)
            .min();
        let now = Instant::now();
        // Wake up early by the oversleep seen so far, so that releases are on time on average.
        let wake_at = next_due.map(|d| d.checked_sub(oversleep).unwrap_or(d));
        let wait = wake_at.map_or(IDLE_WAKE, |d| {
            d.saturating_duration_since(now).min(IDLE_WAKE)
        });
        if !wait.is_zero() {
            let mut fds = [PollFd::new(netlink.socket.as_fd(), PollFlags::POLLIN)];
            let readable = match ppoll(&mut fds, Some(TimeSpec::from_duration(wait)), None) {
                Ok(n) => n > 0,
                Err(nix::errno::Errno::EINTR) => true,
                Err(e) => return Err(e.into()),
            };
            if !readable && let Some(w) = wake_at.filter(|w| *w > now) {
                // A timed wake-up: learn how late the kernel woke us (EWMA, 1/8).
                let late = Instant::now()
                    .saturating_duration_since(w)
                    .min(MAX_OVERSLEEP);
                oversleep = (oversleep * 7 + late) / 8;
            }
        }
        // Take every packet the kernel has for us.
        loop {
            let n = match netlink.socket.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // The socket overflowed and the kernel dropped packets (as a full router
                // buffer would): counted by the kernel, nothing to undo here.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    counters.overflows.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let (read_at, read_wall_us) = (Instant::now(), wall_us());
            for Queued {
                queue,
                id,
                queued_us,
            } in packets(&buf[..n])
            {
                counters.packets.fetch_add(1, Ordering::Relaxed);
                let Some(i) = index(queue) else {
                    // Not ours to delay: let it through at once.
                    push_batch_verdict(&mut verdicts, queue, id);
                    continue;
                };
                // The delay counts from when the kernel queued the packet, not from when this
                // thread woke up to read it (a wake-up costs 100 µs and more on a small VM).
                let waited = queued_us
                    .map(|q| Duration::from_micros(read_wall_us.saturating_sub(q)))
                    .filter(|w| *w < MAX_READ_WAIT)
                    .unwrap_or_default();
                let extra = Duration::from_nanos(extra_ns[i].load(Ordering::Relaxed));
                let due = due_time(&mut links[i], read_at - waited, &mut rng, extra);
                links[i].held.push_back(Held { id, due });
                held_now += 1;
            }
        }
        counters.peak_held.fetch_max(held_now, Ordering::Relaxed);
        // Release what is due: per link a prefix of its FIFO, in one batch verdict. A packet
        // due within EARLY is released now rather than after another wake-up.
        let now = Instant::now();
        for link in &mut links {
            let mut last = None;
            while let Some(front) = link.held.front() {
                if front.due > now + EARLY {
                    break;
                }
                let late = now.saturating_duration_since(front.due).as_nanos() as u64;
                let early = front.due.saturating_duration_since(now).as_nanos() as u64;
                counters.late_ns.fetch_add(late, Ordering::Relaxed);
                counters.early_ns.fetch_add(early, Ordering::Relaxed);
                last = Some(front.id);
                link.held.pop_front();
                held_now -= 1;
                counters.released.fetch_add(1, Ordering::Relaxed);
            }
            if let Some(id) = last {
                push_batch_verdict(&mut verdicts, link.config.queue, id);
            }
        }
        if !verdicts.is_empty() {
            counters.verdicts.fetch_add(1, Ordering::Relaxed);
            netlink.send(&verdicts)?;
            verdicts.clear();
        }
    }
}

/// One queued packet as the kernel announced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Queued {
    queue: u16,
    id: u32,
    /// When the kernel queued it (wall clock, µs since the epoch), if it said.
    queued_us: Option<u64>,
}

/// Every queued-packet message in one netlink read.
fn packets(mut data: &[u8]) -> Vec<Queued> {
    let mut out = Vec::new();
    while data.len() >= 16 {
        let len = u32::from_ne_bytes(data[0..4].try_into().expect("4 bytes")) as usize;
        let kind = u16::from_ne_bytes(data[4..6].try_into().expect("2 bytes"));
        if len < 16 || len > data.len() {
            break;
        }
        if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET && len >= 20 {
            let queue = u16::from_be_bytes(data[18..20].try_into().expect("2 bytes"));
            let mut attrs = &data[20..len];
            let (mut id, mut queued_us) = (None, None);
            while attrs.len() >= 4 {
                let alen = u16::from_ne_bytes(attrs[0..2].try_into().expect("2 bytes")) as usize;
                let atype = u16::from_ne_bytes(attrs[2..4].try_into().expect("2 bytes")) & 0x3fff;
                if alen < 4 || alen > attrs.len() {
                    break;
                }
                if atype == NFQA_PACKET_HDR && alen >= 8 {
                    id = Some(u32::from_be_bytes(attrs[4..8].try_into().expect("4 bytes")));
                }
                if atype == NFQA_TIMESTAMP && alen >= 20 {
                    let sec = u64::from_be_bytes(attrs[4..12].try_into().expect("8 bytes"));
                    let usec = u64::from_be_bytes(attrs[12..20].try_into().expect("8 bytes"));
                    queued_us = Some(sec * 1_000_000 + usec);
                }
                attrs = &attrs[align4(alen).min(attrs.len())..];
            }
            if let Some(id) = id {
                out.push(Queued {
                    queue,
                    id,
                    queued_us,
                });
            }
        }
        data = &data[align4(len).min(data.len())..];
    }
    out
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Appends a netlink message: header, `nfgenmsg` for `queue`, then `attrs` (type, payload).
fn push_message(out: &mut Vec<u8>, kind: u16, flags: u16, queue: u16, attrs: &[(u16, &[u8])]) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]); // length, set below
    out.extend_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | kind).to_ne_bytes());
    out.extend_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes()); // sequence
    out.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel
    out.extend_from_slice(&[0 /* AF_UNSPEC */, 0 /* NFNETLINK_V0 */]);
    out.extend_from_slice(&queue.to_be_bytes());
    for (atype, payload) in attrs {
        out.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
        out.extend_from_slice(&atype.to_ne_bytes());
        out.extend_from_slice(payload);
        out.resize(align4(out.len()), 0);
    }
    let len = (out.len() - start) as u32;
    out[start..start + 4].copy_from_slice(&len.to_ne_bytes());
}

fn push_batch_verdict(out: &mut Vec<u8>, queue: u16, id: u32) {
    let mut hdr = [0u8; 8];
    hdr[..4].copy_from_slice(&NF_ACCEPT.to_be_bytes());
    hdr[4..].copy_from_slice(&id.to_be_bytes());
    push_message(
        out,
        NFQNL_MSG_VERDICT_BATCH,
        0,
        queue,
        &[(NFQA_VERDICT_HDR, &hdr)],
    );
}

/// The netlink socket bound to the emulator's queues.
struct Netlink {
    socket: Socket,
}

impl Netlink {
    fn bind(queues: impl Iterator<Item = u16>) -> io::Result<Self> {
        let socket = Socket::new(
            Domain::from(libc::AF_NETLINK),
            Type::RAW,
            Some(Protocol::from(NETLINK_NETFILTER)),
        )?;
        nix::sys::socket::setsockopt(
            &socket,
            nix::sys::socket::sockopt::RcvBufForce,
            &SOCKET_BUFFER,
        )
        .map_err(io::Error::from)?;
        let mut netlink = Self { socket };
        for queue in queues {
            let mut params = [0u8; 5];
            params[4] = NFQNL_COPY_META;
            let cmd = [NFQNL_CFG_CMD_BIND, 0, 0, 0];
            let mut config = Vec::new();
            push_message(
                &mut config,
                NFQNL_MSG_CONFIG,
                NLM_F_ACK,
                queue,
                &[(NFQA_CFG_CMD, &cmd)],
            );
            netlink.request(&config, queue)?;
            config.clear();
            push_message(
                &mut config,
                NFQNL_MSG_CONFIG,
                NLM_F_ACK,
                queue,
                &[
                    (NFQA_CFG_PARAMS, &params),
                    (NFQA_CFG_QUEUE_MAXLEN, &QUEUE_MAXLEN.to_be_bytes()),
                    (NFQA_CFG_MASK, &NFQA_CFG_F_GSO.to_be_bytes()),
                    (NFQA_CFG_FLAGS, &NFQA_CFG_F_GSO.to_be_bytes()),
                ],
            );
            netlink.request(&config, queue)?;
        }
        netlink.socket.set_nonblocking(true)?;
        Ok(netlink)
    }

    /// Sends a request with NLM_F_ACK and waits for its acknowledgement.
    fn request(&mut self, message: &[u8], queue: u16) -> io::Result<()> {
        self.send(message)?;
        let mut buf = [0u8; 8192];
        loop {
            let n = self.socket.read(&mut buf)?;
            if n >= 20 && u16::from_ne_bytes([buf[4], buf[5]]) == NLMSG_ERROR {
                let errno = i32::from_ne_bytes(buf[16..20].try_into().expect("4 bytes"));
                return if errno == 0 {
                    Ok(())
                } else {
                    Err(io::Error::new(
                        io::Error::from_raw_os_error(-errno).kind(),
                        format!(
                            "NFQUEUE queue {queue}: {}",
                            io::Error::from_raw_os_error(-errno)
                        ),
                    ))
                };
            }
        }
    }

    fn send(&mut self, message: &[u8]) -> io::Result<()> {
        // Unconnected, unbound netlink sockets send to the kernel (port 0) and bind themselves.
        self.socket.write_all(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(delay_us: u64, jitter_us: u64) -> Link {
        Link {
            config: LinkDelay {
                queue: 1,
                delay: Duration::from_micros(delay_us),
                jitter: Duration::from_micros(jitter_us),
            },
            held: VecDeque::new(),
            last_due: None,
        }
    }

    #[test]
    fn without_jitter_every_packet_waits_the_delay() {
        let mut l = link(5000, 0);
        let mut rng = Rng(7);
        let t0 = Instant::now();
        for k in 0..10 {
            let at = t0 + Duration::from_micros(k * 100);
            assert_eq!(
                due_time(&mut l, at, &mut rng, Duration::ZERO),
                at + Duration::from_millis(5)
            );
        }
    }

    #[test]
    fn an_injected_delay_adds_to_the_links_own() {
        let mut l = link(5000, 0);
        let mut rng = Rng(7);
        let t0 = Instant::now();
        let extra = Duration::from_millis(3);
        assert_eq!(
            due_time(&mut l, t0, &mut rng, extra),
            t0 + Duration::from_millis(8)
        );
        // Taken away, later packets wait the link's delay again, never overtaking.
        let later = t0 + Duration::from_millis(10);
        assert_eq!(
            due_time(&mut l, later, &mut rng, Duration::ZERO),
            later + Duration::from_millis(5)
        );
    }

    #[test]
    fn jitter_spreads_delays_around_the_mean_without_reordering() {
        let mut l = link(5000, 1000);
        let mut rng = Rng(42);
        let t0 = Instant::now();
        let mut previous = t0;
        let mut delays = Vec::new();
        for k in 0..10_000u64 {
            // One packet every 10 ms: far enough apart that ordering never binds.
            let at = t0 + Duration::from_millis(k * 10);
            let due = due_time(&mut l, at, &mut rng, Duration::ZERO);
            assert!(due >= previous, "packet {k} would overtake");
            previous = due;
            delays.push((due - at).as_secs_f64() * 1e6);
        }
        let mean = delays.iter().sum::<f64>() / delays.len() as f64;
        let (min, max) = delays
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), d| (a.min(*d), b.max(*d)));
        assert!((mean - 5000.0).abs() < 30.0, "mean {mean}");
        assert!((4000.0..4050.0).contains(&min), "min {min}");
        assert!(max <= 6000.0 && max > 5950.0, "max {max}"); // (5950, 6000]
    }

    #[test]
    fn back_to_back_packets_keep_their_order_under_jitter() {
        let mut l = link(5000, 2000);
        let mut rng = Rng(1);
        let t0 = Instant::now();
        let dues: Vec<Instant> = (0..1000)
            .map(|k| {
                due_time(
                    &mut l,
                    t0 + Duration::from_micros(k),
                    &mut rng,
                    Duration::ZERO,
                )
            })
            .collect();
        assert!(dues.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn queued_packet_messages_are_parsed_and_verdicts_encoded() {
        // A kernel-shaped NFQNL_MSG_PACKET for queue 258, packet id 77.
        let mut msg = Vec::new();
        let mut hdr = [0u8; 7];
        hdr[..4].copy_from_slice(&77u32.to_be_bytes());
        let mut stamp = [0u8; 16];
        stamp[..8].copy_from_slice(&1_700_000_000u64.to_be_bytes());
        stamp[8..].copy_from_slice(&250u64.to_be_bytes());
        push_message(
            &mut msg,
            NFQNL_MSG_PACKET,
            0,
            258,
            &[(NFQA_PACKET_HDR, &hdr), (NFQA_TIMESTAMP, &stamp)],
        );
        let mut bare = Vec::new();
        push_message(
            &mut bare,
            NFQNL_MSG_PACKET,
            0,
            3,
            &[(NFQA_PACKET_HDR, &hdr)],
        );
        let two = [msg, bare].concat();
        let stamped = Queued {
            queue: 258,
            id: 77,
            queued_us: Some(1_700_000_000_000_250),
        };
        let unstamped = Queued {
            queue: 3,
            id: 77,
            queued_us: None,
        };
        assert_eq!(packets(&two), [stamped, unstamped]);
        // Truncated input yields what is whole and nothing else.
        assert_eq!(packets(&two[..two.len() - 3]), [stamped]);

        let mut v = Vec::new();
        push_batch_verdict(&mut v, 3, 9);
        assert_eq!(v.len(), 16 + 4 + 12);
        assert_eq!(
            u16::from_ne_bytes([v[4], v[5]]),
            (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_VERDICT_BATCH
        );
        assert_eq!(&v[18..20], &3u16.to_be_bytes());
        assert_eq!(&v[24..28], &NF_ACCEPT.to_be_bytes());
        assert_eq!(&v[28..32], &9u32.to_be_bytes());
    }

    #[test]
    fn queue_numbers_are_distinct_per_direction() {
        assert_ne!(queue_number(0, 1), queue_number(1, 0));
        assert_eq!(queue_number(2, 3), 515);
    }
}
