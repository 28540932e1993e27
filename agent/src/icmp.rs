//! ICMP echo probes with surge-ping, and the choice of how this agent measures RTT and loss.
//!
//! One surge-ping `Client` per address family per process (two clients of one family in one
//! process were seen reporting 0 ns round trips). The agent's probes run on a current-thread
//! runtime: surge-ping timestamps the send after `send_to` returns and the reply in its receive
//! task, and on one thread the receive task cannot run (and timestamp a loopback reply) before the
//! sender has taken its timestamp.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::OnceLock;

use socket2::{Domain, Protocol, Socket, Type};
use surge_ping::{Client, Config, ICMP, PingIdentifier, PingSequence};
use zonemesh_proto::domain::IcmpMode;

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
pub fn choose_mode(choice: IcmpChoice, ours: IpAddr) -> Result<IcmpMode, String> {
    let dgram = || can_open(Type::DGRAM, ours);
    let raw = || can_open(Type::RAW, ours);
    match choice {
        IcmpChoice::Tcp => Ok(IcmpMode::Tcp),
        IcmpChoice::Dgram => dgram().map(|()| IcmpMode::Dgram).map_err(|e| {
            format!(
                "--icmp dgram: cannot open an ICMP datagram socket ({e}); this needs the \
                 process's group in net.ipv4.ping_group_range"
            )
        }),
        IcmpChoice::Raw => raw().map(|()| IcmpMode::Raw).map_err(|e| {
            format!("--icmp raw: cannot open a raw ICMP socket ({e}); this needs CAP_NET_RAW")
        }),
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
fn only_our_replies(client: &Client, v4: bool, ident: u16) -> io::Result<()> {
    use socket2::{SockFilter, SockRef};
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
    let fd = client.get_socket().get_native_sock();
    // SAFETY: `fd` is the client's open socket; the client (and so the descriptor) outlives this
    // borrow, which only sets a socket option.
    #[allow(unsafe_code)]
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    SockRef::from(&fd).attach_filter(&program)
}

/// ICMP echo probes over raw or datagram sockets.
pub struct IcmpProber {
    ty: Type,
    /// Source addresses per family (the node's first advertised address of each).
    bind_v4: Option<IpAddr>,
    bind_v6: Option<IpAddr>,
    v4: OnceLock<Option<Client>>,
    v6: OnceLock<Option<Client>>,
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
    /// per family, on first use (inside the runtime).
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

    fn client(&self, ip: IpAddr) -> Option<&Client> {
        let (cell, bind, kind) = if ip.is_ipv4() {
            (&self.v4, self.bind_v4, ICMP::V4)
        } else {
            (&self.v6, self.bind_v6, ICMP::V6)
        };
        cell.get_or_init(|| {
            let mut builder = Config::builder().kind(kind).sock_type_hint(self.ty);
            if let Some(bind) = bind {
                builder = builder.bind(SocketAddr::new(bind, 0));
            }
            match Client::new(&builder.build()) {
                Ok(client) => {
                    let got = client.get_socket().get_type();
                    if got != self.ty {
                        tracing::warn!(?got, wanted = ?self.ty, "surge-ping opened another ICMP socket type than chosen");
                    }
                    if got == Type::RAW
                        && let Err(e) = only_our_replies(&client, ip.is_ipv4(), self.ident)
                    {
                        tracing::warn!(error = %e, "cannot filter the raw ICMP socket; every ICMP packet of the host wakes the agent");
                    }
                    Some(client)
                }
                Err(e) => {
                    tracing::error!(error = %e, family = ?kind, "cannot open an ICMP socket; probes of this family count as lost");
                    None
                }
            }
        })
        .as_ref()
    }
}

impl Prober for IcmpProber {
    async fn probe(&self, target: &Target, seq: u64) -> Outcome {
        let Some(client) = self.client(target.address) else {
            return Outcome::Lost;
        };
        let mut pinger = client
            .pinger(target.address, PingIdentifier(self.ident))
            .await;
        // The scheduler applies the plan's timeout; this only keeps surge-ping from timing out first.
        pinger.timeout(target.timeout * 2);
        match pinger.ping(PingSequence(seq as u16), &PAYLOAD).await {
            Ok((_, rtt)) => Outcome::Reply(rtt),
            Err(e) => {
                tracing::trace!(peer = %target.node, error = %e, "probe failed");
                Outcome::Lost
            }
        }
    }
}
