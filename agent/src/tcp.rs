//! TCP on the probe port: the responder every agent runs, TCP-connect RTT probes (the fallback
//! when no ICMP socket can be opened), and timed bulk transfers for throughput grants.
//!
//! The responder tells the two uses apart by the first bytes: an RTT probe connects and resets
//! without sending anything; a throughput test sends a [`Header`], streams data and half-closes,
//! and the responder answers with the bytes it received after the warm-up and over how long
//! (receiver-side figures, like iperf3's receiver line).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use zonemesh_domain::{Bps, ThroughputSample};

use crate::Error;
use crate::config::SocketBuffer;
use crate::probe::{Outcome, Prober, Target};

/// First bytes of a throughput test.
const MAGIC: &[u8; 4] = b"ZMT1";
/// Size of the header: magic, warm-up ms, counted duration ms (big-endian u32s).
const HEADER_LEN: usize = 12;
/// Size of the responder's answer: counted bytes and counted µs (big-endian u64s).
const ANSWER_LEN: usize = 16;
/// Bytes per write and read of a transfer (as iperf3's TCP default).
const CHUNK: usize = 128 * 1024;
/// Connections the responder serves at once; more wait in the kernel's backlog.
const MAX_CONNECTIONS: usize = 64;
/// How long a responder waits for the first bytes of a connection.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest test a responder accepts, warm-up included.
const MAX_TEST: Duration = Duration::from_secs(120);

/// A TCP socket for `peer`'s family with `buffer` applied and, if given, bound to `source`.
fn socket_for(
    peer: SocketAddr,
    source: Option<IpAddr>,
    buffer: SocketBuffer,
) -> io::Result<TcpSocket> {
    let socket = Socket::new(Domain::for_address(peer), Type::STREAM, Some(Protocol::TCP))?;
    if let SocketBuffer::Bytes(bytes) = buffer {
        socket.set_send_buffer_size(bytes)?;
        socket.set_recv_buffer_size(bytes)?;
    }
    if let Some(ip) = source.filter(|ip| ip.is_ipv4() == peer.is_ipv4()) {
        socket.bind(&SocketAddr::new(ip, 0).into())?;
    }
    socket.set_nonblocking(true)?;
    Ok(TcpSocket::from_std_stream(socket.into()))
}

/// RTT probes by TCP connect to the peer's probe port: the time from `connect` to the
/// established connection (SYN to SYN-ACK), closed with a reset so no TIME_WAIT piles up.
#[derive(Debug)]
pub struct TcpProber {
    sources: Vec<IpAddr>,
}

impl TcpProber {
    /// Probes from the node's `addresses`.
    pub fn new(addresses: &[IpAddr]) -> Self {
        Self {
            sources: addresses.to_vec(),
        }
    }
}

impl Prober for TcpProber {
    async fn probe(&self, target: &Target, _seq: u64) -> Outcome {
        let peer = SocketAddr::new(target.address, target.port);
        let source = self
            .sources
            .iter()
            .copied()
            .find(|s| s.is_ipv4() == peer.is_ipv4());
        let Ok(socket) = socket_for(peer, source, SocketBuffer::Auto) else {
            return Outcome::Lost;
        };
        let started = Instant::now();
        match socket.connect(peer).await {
            Ok(stream) => {
                let rtt = started.elapsed();
                let _ = SockRef::from(&stream).set_linger(Some(Duration::ZERO));
                Outcome::Reply(rtt)
            }
            Err(_) => Outcome::Lost,
        }
    }
}

/// Binds the responder on `port` of every address (before anything else starts, so a busy port
/// is a startup error).
pub fn bind_responder(
    addresses: &[IpAddr],
    port: u16,
    buffer: SocketBuffer,
) -> io::Result<Vec<std::net::TcpListener>> {
    addresses
        .iter()
        .map(|ip| {
            let addr = SocketAddr::new(*ip, port);
            let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
            socket.set_reuse_address(true)?;
            if addr.is_ipv6() {
                socket.set_only_v6(true)?;
            }
            // Accepted connections inherit the buffers (the receive window is negotiated at SYN).
            if let SocketBuffer::Bytes(bytes) = buffer {
                socket.set_send_buffer_size(bytes)?;
                socket.set_recv_buffer_size(bytes)?;
            }
            socket
                .bind(&addr.into())
                .map_err(|e| io::Error::new(e.kind(), format!("{addr}: {e}")))?;
            socket.listen(1024)?;
            socket.set_nonblocking(true)?;
            Ok(socket.into())
        })
        .collect()
}

/// Serves RTT probes and throughput tests on `listener` forever.
pub async fn respond(listener: std::net::TcpListener) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "responder cannot use its socket");
            return;
        }
    };
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        match listener.accept().await {
            Ok((stream, peer)) => {
                tokio::spawn(async move {
                    if let Err(e) = serve(stream).await {
                        tracing::debug!(%peer, error = %e, "responder connection ended");
                    }
                    drop(permit);
                });
            }
            Err(e) => {
                // Out of descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, "responder accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// One responder connection.
async fn serve(mut stream: TcpStream) -> io::Result<()> {
    let mut header = [0u8; HEADER_LEN];
    match tokio::time::timeout(HEADER_TIMEOUT, stream.read_exact(&mut header)).await {
        // An RTT probe (closed at once) or a silent client.
        Err(_) | Ok(Err(_)) => return Ok(()),
        Ok(Ok(_)) => {}
    }
    if &header[..4] != MAGIC {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a zonemesh throughput test",
        ));
    }
    let warmup =
        Duration::from_millis(u32::from_be_bytes(header[4..8].try_into().expect("4 bytes")).into());
    let duration = Duration::from_millis(
        u32::from_be_bytes(header[8..12].try_into().expect("4 bytes")).into(),
    );
    if warmup + duration > MAX_TEST {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "test longer than the responder allows",
        ));
    }
    let started = Instant::now();
    let mark = started + warmup;
    let give_up = mark + duration + Duration::from_secs(10);
    let mut buf = vec![0u8; CHUNK];
    let (mut counted, mut last) = (0u64, mark);
    loop {
        let n = match tokio::time::timeout_at(give_up, stream.read(&mut buf)).await {
            Ok(read) => read?,
            Err(_) => break,
        };
        if n == 0 {
            break;
        }
        let now = Instant::now();
        if now >= mark {
            counted += n as u64;
            last = now;
        }
    }
    let micros = u64::try_from((last - mark).as_micros()).unwrap_or(u64::MAX);
    let mut answer = [0u8; ANSWER_LEN];
    answer[..8].copy_from_slice(&counted.to_be_bytes());
    answer[8..].copy_from_slice(&micros.to_be_bytes());
    stream.write_all(&answer).await?;
    stream.shutdown().await
}

/// A throughput test that the aggregator granted.
#[derive(Debug, Clone)]
pub struct Test {
    /// Peer responder.
    pub peer: SocketAddr,
    /// Uncounted warm-up.
    pub warmup: Duration,
    /// Counted duration.
    pub duration: Duration,
    /// Parallel streams (at least 1).
    pub streams: u32,
}

/// Runs `test` from `source` and returns the receiver's figures summed over the streams.
pub async fn measure(
    test: &Test,
    source: Option<IpAddr>,
    buffer: SocketBuffer,
) -> Result<ThroughputSample, Error> {
    if test.duration.is_zero() {
        return Err(Error::ThroughputDuration);
    }
    let deadline = Instant::now() + test.warmup + test.duration;
    let mut streams = tokio::task::JoinSet::new();
    for _ in 0..test.streams.max(1) {
        let test = test.clone();
        streams.spawn(async move { one_stream(&test, source, buffer, deadline).await });
    }
    let (mut bytes, mut micros) = (0u64, 0u64);
    while let Some(result) = streams.join_next().await {
        let (b, us) = result??;
        bytes += b;
        micros = micros.max(us);
    }
    if micros == 0 {
        return Err(Error::ThroughputNothing);
    }
    let rate = Bps::parse("throughput_bps", bytes as f64 * 8.0 / (micros as f64 / 1e6))
        .map_err(Error::ThroughputFigures)?;
    ThroughputSample::new(
        rate,
        bytes,
        micros,
        u64::try_from(test.warmup.as_micros()).unwrap_or(u64::MAX),
        test.streams.max(1),
    )
    .map_err(Error::ThroughputFigures)
}

async fn one_stream(
    test: &Test,
    source: Option<IpAddr>,
    buffer: SocketBuffer,
    deadline: Instant,
) -> Result<(u64, u64), Error> {
    let peer = test.peer;
    let socket = socket_for(peer, source, buffer).map_err(Error::ThroughputSocket)?;
    let mut stream = tokio::time::timeout(Duration::from_secs(3), socket.connect(peer))
        .await
        .map_err(|_| Error::ThroughputConnectTimeout { peer })?
        .map_err(|source| Error::ThroughputIo {
            peer,
            what: "connect to",
            source,
        })?;
    let ms = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
    let mut header = [0u8; HEADER_LEN];
    header[..4].copy_from_slice(MAGIC);
    header[4..8].copy_from_slice(&ms(test.warmup).to_be_bytes());
    header[8..12].copy_from_slice(&ms(test.duration).to_be_bytes());
    let io_err = |source: io::Error| Error::ThroughputIo {
        peer,
        what: "transfer to",
        source,
    };
    stream.write_all(&header).await.map_err(io_err)?;
    let chunk = vec![0u8; CHUNK];
    while Instant::now() < deadline {
        match tokio::time::timeout_at(deadline, stream.write(&chunk)).await {
            Ok(written) => {
                written.map_err(io_err)?;
            }
            Err(_) => break,
        }
    }
    stream.shutdown().await.map_err(io_err)?;
    let mut answer = [0u8; ANSWER_LEN];
    tokio::time::timeout(Duration::from_secs(15), stream.read_exact(&mut answer))
        .await
        .map_err(|_| Error::ThroughputNoAnswer { peer })?
        .map_err(io_err)?;
    let bytes = u64::from_be_bytes(answer[..8].try_into().expect("8 bytes"));
    let micros = u64::from_be_bytes(answer[8..].try_into().expect("8 bytes"));
    Ok((bytes, micros))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local_responder() -> SocketAddr {
        let listener = bind_responder(&["127.0.0.1".parse().unwrap()], 0, SocketBuffer::Auto)
            .unwrap()
            .remove(0);
        let addr = listener.local_addr().unwrap();
        tokio::spawn(respond(listener));
        addr
    }

    #[tokio::test]
    async fn a_transfer_reports_receiver_figures_that_agree_with_themselves() {
        let peer = local_responder();
        let test = Test {
            peer,
            warmup: Duration::from_millis(100),
            duration: Duration::from_millis(300),
            streams: 2,
        };
        let t = measure(&test, None, SocketBuffer::Bytes(1 << 20))
            .await
            .unwrap();
        assert_eq!(t.streams, 2);
        assert_eq!(t.warmup_us, 100_000);
        assert!(t.bytes > 0);
        // Counted from the warm-up mark to the last byte: about the test's duration.
        assert!((250_000..2_000_000).contains(&t.duration_us), "{t:?}");
    }

    #[tokio::test]
    async fn tcp_probes_time_the_handshake_and_a_closed_port_is_lost() {
        let peer = local_responder();
        let mut target = Target {
            node: zonemesh_domain::NodeName::parse("node", "b").unwrap(),
            zone: "z".into(),
            address: peer.ip(),
            port: peer.port(),
            interval: Duration::from_secs(1),
            train_size: 1,
            train_gap: Duration::ZERO,
            timeout: Duration::from_secs(1),
        };
        let prober = TcpProber::new(&["127.0.0.1".parse().unwrap()]);
        match prober.probe(&target, 0).await {
            Outcome::Reply(rtt) => assert!(rtt < Duration::from_millis(100), "{rtt:?}"),
            Outcome::Lost => panic!("the responder is listening"),
        }
        // A port nobody listens on: refused at once.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        target.port = closed.local_addr().unwrap().port();
        drop(closed);
        assert_eq!(prober.probe(&target, 1).await, Outcome::Lost);
    }

    #[tokio::test]
    async fn the_responder_refuses_what_is_not_a_test() {
        let peer = local_responder();
        let mut s = TcpStream::connect(peer).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let mut buf = Vec::new();
        // Closed without an answer.
        let n = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf))
            .await
            .unwrap()
            .unwrap_or(0);
        assert_eq!(n, 0);
    }
}
