//! ICMP echo probes, and the choice of how this agent measures RTT and loss.
//!
//! The socket loop is ours, for one reason: the reply's time must come from the kernel. A
//! user-space timestamp taken when the receiving task wakes includes the wake-up, and on a small
//! VM that was 60–190 µs on 2–10 ms paths, where iputils ping (which reads the kernel's
//! `SO_TIMESTAMP`) saw none. So each echo request is stamped with the wall clock just before it is
//! sent (as ping does), and each reply with the kernel's receive time (`SO_TIMESTAMPNS`, read with
//! `recvmsg`). surge-ping decodes the replies (IPv4 with or without the IP header, IPv6, and the
//! ICMP errors that quote a request).
//!
//! One socket per address family per prober. A raw socket gets a BPF filter so that only echo
//! replies with this agent's identifier wake it; a datagram socket only ever sees its own.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use nix::sys::socket::{ControlMessageOwned, MsgFlags, SockaddrStorage};
use socket2::{Domain, Protocol, Socket, Type};
use surge_ping::{IcmpPacket, Icmpv4Packet, Icmpv6Packet};
use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::sync::oneshot;
use zonemesh_common::time::unix_time;
use zonemesh_domain::IcmpMode;

use crate::config::IcmpChoice;
use crate::probe::{Outcome, Prober, Target};

/// Payload of every echo request (56 bytes, as iputils ping sends).
const PAYLOAD: [u8; 56] = [0x5a; 56];

/// Whether an ICMP socket of `ty` can be opened here for the family of `ip`.
fn can_open(ty: Type, ip: IpAddr) -> io::Result<()> {
    let (domain, protocol) = if ip.is_ipv4() {
        (Domain::IPV4, Protocol::ICMPV4)
    } else {
        (Domain::IPV6, Protocol::ICMPV6)
    };
    Socket::new(domain, ty, Some(protocol)).map(drop)
}

/// Picks the RTT method for `choice`: `auto` tries an ICMP datagram socket, then a raw one, then
/// falls back to TCP. An explicit choice that cannot work here is an error naming `--icmp`.
pub fn choose_mode(choice: IcmpChoice, ours: IpAddr) -> Result<IcmpMode, crate::Error> {
    let dgram = || can_open(Type::DGRAM, ours);
    let raw = || can_open(Type::RAW, ours);
    let refused = |mode, socket, needs| {
        move |source| crate::Error::Icmp {
            mode,
            socket,
            needs,
            source,
        }
    };
    match choice {
        IcmpChoice::Tcp => Ok(IcmpMode::Tcp),
        IcmpChoice::Dgram => dgram().map(|()| IcmpMode::Dgram).map_err(refused(
            "dgram",
            "an ICMP datagram socket",
            "the process's group in net.ipv4.ping_group_range",
        )),
        IcmpChoice::Raw => raw().map(|()| IcmpMode::Raw).map_err(refused(
            "raw",
            "a raw ICMP socket",
            "CAP_NET_RAW",
        )),
        IcmpChoice::Auto => Ok(if dgram().is_ok() {
            IcmpMode::Dgram
        } else if raw().is_ok() {
            IcmpMode::Raw
        } else {
            IcmpMode::Tcp
        }),
    }
}

/// Attaches a classic BPF program to a raw ICMP socket so that the kernel hands it only echo
/// replies carrying `ident`, as iputils ping does. Without it a raw socket wakes the agent for
/// every ICMP packet of the host: other pingers' replies, and on loopback its own echo requests.
/// (Datagram sockets need none: the kernel matches their replies by socket.)
fn only_our_replies(socket: &Socket, v4: bool, ident: u16) -> io::Result<()> {
    use socket2::SockFilter;
    const LDX_B_MSH: u16 = 0xb1; // X = 4 * (P[k] & 0xf): the IPv4 header length
    const LD_B_IND: u16 = 0x50; // A = P[X + k] (byte)
    const LD_H_IND: u16 = 0x48; // A = P[X + k] (half word, network order)
    const LD_B_ABS: u16 = 0x30; // A = P[k] (byte)
    const LD_H_ABS: u16 = 0x28; // A = P[k] (half word)
    const JEQ_K: u16 = 0x15; // if A == k skip jt else skip jf
    const RET_K: u16 = 0x06;
    let ident = u32::from(ident);
    // An IPv4 raw socket reads the IP header first; an ICMPv6 one starts at the ICMP header.
    let program = if v4 {
        vec![
            SockFilter::new(LDX_B_MSH, 0, 0, 0),
            SockFilter::new(LD_B_IND, 0, 0, 0),
            SockFilter::new(JEQ_K, 0, 3, 0), // echo reply (type 0)
            SockFilter::new(LD_H_IND, 0, 0, 4),
            SockFilter::new(JEQ_K, 0, 1, ident),
            SockFilter::new(RET_K, 0, 0, 0xffff),
            SockFilter::new(RET_K, 0, 0, 0),
        ]
    } else {
        vec![
            SockFilter::new(LD_B_ABS, 0, 0, 0),
            SockFilter::new(JEQ_K, 0, 3, 129), // ICMPv6 echo reply
            SockFilter::new(LD_H_ABS, 0, 0, 4),
            SockFilter::new(JEQ_K, 0, 1, ident),
            SockFilter::new(RET_K, 0, 0, 0xffff),
            SockFilter::new(RET_K, 0, 0, 0),
        ]
    };
    socket.attach_filter(&program)
}

/// What a probe in flight waits for: the kernel's receive time of its reply, or `None` when an
/// ICMP error came back instead.
type Waiter = oneshot::Sender<Option<SystemTime>>;

/// One ICMP socket and the probes waiting on it, by (peer, sequence).
struct EchoSocket {
    socket: Arc<UdpSocket>,
    waiting: Arc<Mutex<HashMap<(IpAddr, u16), Waiter>>>,
    receiver: tokio::task::JoinHandle<()>,
}

impl Drop for EchoSocket {
    fn drop(&mut self) {
        self.receiver.abort();
    }
}

/// ICMP echo probes over raw or datagram sockets.
pub struct IcmpProber {
    ty: Type,
    /// Source addresses per family (the node's first advertised address of each).
    bind_v4: Option<IpAddr>,
    bind_v6: Option<IpAddr>,
    v4: OnceLock<Option<EchoSocket>>,
    v6: OnceLock<Option<EchoSocket>>,
    ident: u16,
}

impl std::fmt::Debug for IcmpProber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IcmpProber")
            .field("type", &self.ty)
            .field("ident", &self.ident)
            .finish_non_exhaustive()
    }
}

impl IcmpProber {
    /// A prober for `mode` (raw or datagram) sending from `addresses`. Sockets open lazily, one
    /// per family, on first use (inside the runtime, which runs their receive tasks).
    pub fn new(mode: IcmpMode, addresses: &[IpAddr]) -> Self {
        let ty = if mode == IcmpMode::Dgram {
            Type::DGRAM
        } else {
            Type::RAW
        };
        Self {
            ty,
            bind_v4: addresses.iter().copied().find(IpAddr::is_ipv4),
            bind_v6: addresses.iter().copied().find(IpAddr::is_ipv6),
            v4: OnceLock::new(),
            v6: OnceLock::new(),
            // Raw sockets see every echo reply on the host: a random identifier per process keeps
            // this agent's replies apart from other pingers'.
            ident: rand::random(),
        }
    }

    fn socket(&self, ip: IpAddr) -> Option<&EchoSocket> {
        let (cell, bind) = if ip.is_ipv4() {
            (&self.v4, self.bind_v4)
        } else {
            (&self.v6, self.bind_v6)
        };
        cell.get_or_init(|| match self.open(ip.is_ipv4(), bind) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::error!(error = %e, v4 = ip.is_ipv4(), "cannot open an ICMP socket; probes of this family count as lost");
                None
            }
        })
        .as_ref()
    }

    fn open(&self, v4: bool, bind: Option<IpAddr>) -> io::Result<EchoSocket> {
        let (domain, protocol) = if v4 {
            (Domain::IPV4, Protocol::ICMPV4)
        } else {
            (Domain::IPV6, Protocol::ICMPV6)
        };
        let socket = Socket::new(domain, self.ty, Some(protocol))?;
        if let Some(bind) = bind {
            socket.bind(&SocketAddr::new(bind, 0).into())?;
        }
        if self.ty == Type::RAW
            && let Err(e) = only_our_replies(&socket, v4, self.ident)
        {
            tracing::warn!(error = %e, "cannot filter the raw ICMP socket; every ICMP packet of the host wakes the agent");
        }
        nix::sys::socket::setsockopt(
            &socket,
            nix::sys::socket::sockopt::ReceiveTimestampns,
            &true,
        )
        .map_err(io::Error::from)?;
        socket.set_nonblocking(true)?;
        // tokio's UDP socket is a datagram socket like any other: it carries ICMP as well.
        let socket = Arc::new(UdpSocket::from_std(std::net::UdpSocket::from(socket))?);
        let waiting: Arc<Mutex<HashMap<(IpAddr, u16), Waiter>>> = Arc::default();
        let receiver = tokio::spawn(receive(socket.clone(), waiting.clone(), self.ty, bind));
        Ok(EchoSocket {
            socket,
            waiting,
            receiver,
        })
    }
}

/// Removes a probe's registration when the probe ends, however it ends (reply, error, timeout).
struct Registration<'a> {
    waiting: &'a Mutex<HashMap<(IpAddr, u16), Waiter>>,
    key: (IpAddr, u16),
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        if let Ok(mut w) = self.waiting.lock() {
            w.remove(&self.key);
        }
    }
}

impl Prober for IcmpProber {
    async fn probe(&self, target: &Target, seq: u64) -> Outcome {
        let Some(echo) = self.socket(target.address) else {
            return Outcome::Lost;
        };
        let seq = seq as u16;
        let key = (target.address, seq);
        let (tx, rx) = oneshot::channel();
        {
            let Ok(mut waiting) = echo.waiting.lock() else {
                return Outcome::Lost;
            };
            // An older probe with the same sequence still waiting (65,536 probes ago) is lost.
            waiting.insert(key, tx);
        }
        let _registration = Registration {
            waiting: &echo.waiting,
            key,
        };
        let packet = echo_request(target.address.is_ipv4(), self.ident, seq);
        let Some(sent_at) = send(&echo.socket, &packet, target.address).await else {
            return Outcome::Lost;
        };
        match rx.await {
            Ok(Some(received_at)) => Outcome::Reply(
                received_at
                    .duration_since(sent_at)
                    .unwrap_or(Duration::ZERO),
            ),
            _ => Outcome::Lost,
        }
    }
}

/// Sends `packet` to `to` and returns the wall-clock time taken just before the system call
/// (not before a wait for the runtime's readiness, which can be tens of µs); `None` if it failed.
async fn send(socket: &UdpSocket, packet: &[u8], to: IpAddr) -> Option<SystemTime> {
    // Outside tokio's readiness tracking on purpose: this socket is only ever written here.
    let to: socket2::SockAddr = SocketAddr::new(to, 0).into();
    let raw = socket2::SockRef::from(socket);
    loop {
        let at = wall_clock();
        match raw.send_to(packet, &to) {
            Ok(_) => return Some(at),
            // The send buffer is full: try again in a moment (the probe's timeout bounds this).
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Err(_) => return None,
        }
    }
}

/// The wall clock now, on the clock of the kernel's receive timestamps (`CLOCK_REALTIME`).
fn wall_clock() -> SystemTime {
    SystemTime::UNIX_EPOCH + unix_time()
}

/// An echo request: type 8 (IPv4) or 128 (IPv6), code 0, checksum, identifier, sequence, and
/// 56 bytes of payload as iputils ping sends. The kernel fills in the ICMPv6 checksum, and on a
/// datagram socket the identifier.
fn echo_request(v4: bool, ident: u16, seq: u16) -> Vec<u8> {
    let mut p = Vec::with_capacity(8 + PAYLOAD.len());
    p.push(if v4 { 8 } else { 128 });
    p.push(0);
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(&ident.to_be_bytes());
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&PAYLOAD);
    if v4 {
        let sum = checksum(&p);
        p[2..4].copy_from_slice(&sum.to_be_bytes());
    }
    p
}

/// The Internet checksum (RFC 1071).
fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Reads replies forever and hands each waiting probe its reply's kernel receive time.
async fn receive(
    socket: Arc<UdpSocket>,
    waiting: Arc<Mutex<HashMap<(IpAddr, u16), Waiter>>>,
    ty: Type,
    ours: Option<IpAddr>,
) {
    let mut buf = vec![0u8; 2048];
    let mut control = nix::cmsg_space!(nix::sys::time::TimeSpec);
    let fd = socket.as_raw_fd();
    loop {
        if socket.readable().await.is_err() {
            return;
        }
        // Drain everything that is there, then wait again.
        loop {
            let received = socket.try_io(Interest::READABLE, || {
                let mut iov = [std::io::IoSliceMut::new(&mut buf)];
                let msg = nix::sys::socket::recvmsg::<SockaddrStorage>(
                    fd,
                    &mut iov,
                    Some(&mut control),
                    MsgFlags::MSG_DONTWAIT,
                )
                .map_err(io::Error::from)?;
                let stamp = msg.cmsgs().ok().and_then(|mut c| {
                    c.find_map(|m| match m {
                        ControlMessageOwned::ScmTimestampns(ts) => Some(
                            SystemTime::UNIX_EPOCH
                                + Duration::new(ts.tv_sec() as u64, ts.tv_nsec() as u32),
                        ),
                        _ => None,
                    })
                });
                let from = msg.address.and_then(|a| {
                    a.as_sockaddr_in()
                        .map(|v4| IpAddr::V4(v4.ip()))
                        .or_else(|| a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
                });
                Ok((msg.bytes, stamp.unwrap_or_else(wall_clock), from))
            });
            match received {
                Ok((n, at, Some(from))) => dispatch(&buf[..n], at, from, ty, ours, &waiting),
                Ok(_) => {}
                // Nothing left, or an error (such as a queued ICMP error, cleared by reading it):
                // wait for readiness again.
                Err(_) => break,
            }
        }
    }
}

/// Matches one received packet to the probe waiting for it.
fn dispatch(
    packet: &[u8],
    at: SystemTime,
    from: IpAddr,
    ty: Type,
    ours: Option<IpAddr>,
    waiting: &Mutex<HashMap<(IpAddr, u16), Waiter>>,
) {
    let decoded = match from {
        IpAddr::V4(src) => {
            let dst = match ours {
                Some(IpAddr::V4(o)) => o,
                _ => std::net::Ipv4Addr::UNSPECIFIED,
            };
            Icmpv4Packet::decode(packet, ty, src, dst).map(IcmpPacket::V4)
        }
        IpAddr::V6(src) => Icmpv6Packet::decode(packet, src).map(IcmpPacket::V6),
    };
    let Ok(decoded) = decoded else {
        return;
    };
    let reply = match &decoded {
        IcmpPacket::V4(p) => p.get_icmp_type().0 == 0,
        IcmpPacket::V6(p) => p.get_icmpv6_type().0 == 129,
    };
    let key = (
        decoded.real_destination(),
        decoded.get_sequence().into_u16(),
    );
    let Ok(mut w) = waiting.lock() else {
        return;
    };
    if let Some(tx) = w.remove(&key) {
        let _ = tx.send(reply.then_some(at));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_requests_carry_identifier_sequence_and_a_valid_checksum() {
        let p = echo_request(true, 0x1234, 7);
        assert_eq!(&p[..2], &[8, 0]);
        assert_eq!(&p[4..8], &[0x12, 0x34, 0, 7]);
        assert_eq!(p.len(), 64, "as iputils ping: 8 + 56 bytes");
        // A packet with its checksum in place sums to zero.
        assert_eq!(checksum(&p), 0);
        let v6 = echo_request(false, 1, 2);
        assert_eq!(
            (v6[0], &v6[2..4]),
            (128, &[0u8, 0][..]),
            "the kernel sums ICMPv6"
        );
    }

    #[test]
    fn the_checksum_is_rfc_1071s() {
        // RFC 1071's example words 0001 f203 f4f5 f6f7 sum to ddf2 before the complement.
        assert_eq!(
            checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            !0xddf2
        );
        assert_eq!(checksum(&[0xff]), !0xff00, "an odd byte is padded");
    }
}
