//! TCP on the probe port: the responder every agent runs, TCP-connect RTT probes (the fallback
//! when no ICMP socket can be opened), and timed bulk transfers for throughput grants.
//!
//! The responder tells the two uses apart by the first bytes: an RTT probe connects and resets
//! without sending anything; a throughput test sends a header, streams data and half-closes,
//! and the responder answers with the bytes it received after the warm-up and over how long
//! (receiver-side figures, like iperf3's receiver line).
//!
//! A test's first stream opens with `ZMT2` instead of `ZMT1`: before any bulk data it times up to
//! [`EXCHANGES`] request–response exchanges of a [`EXCHANGE_LEN`]-byte message (`TCP_NODELAY`
//! on both ends), on an idle connection, within the first half of the warm-up. Each request
//! starts with [`EXCHANGE_MORE`] and is echoed; the last message starts with [`EXCHANGE_DONE`]
//! and carries the warm-up left (ms), from which the responder starts its clock. The other
//! streams start when the exchanges end. A responder that predates `ZMT2` closes the
//! connection; the test then runs without exchanges. After the transfer, each sender reads its
//! TCP counters (`TCP_INFO`): segments sent and retransmitted.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use zonemesh_domain::stats::lower_median;
use zonemesh_domain::{Bps, MessageExchange, Micros, Retransmits, ThroughputSample};

use crate::Error;
use crate::config::SocketBuffer;
use crate::probe::{Outcome, Prober, Target};

/// First bytes of a throughput test's stream.
const MAGIC: &[u8; 4] = b"ZMT1";
/// First bytes of a throughput test's first stream: timed exchanges, then the transfer.
const MAGIC_EXCHANGE: &[u8; 4] = b"ZMT2";
/// Most exchanges a test times (fewer when they would take more than half the warm-up).
pub const EXCHANGES: u32 = 64;
/// Bytes of an exchanged message: a small MPI message with its envelope.
pub const EXCHANGE_LEN: usize = 64;
/// First byte of an exchange request (echoed).
const EXCHANGE_MORE: u8 = 1;
/// First byte of the message that ends the exchanges (not echoed).
const EXCHANGE_DONE: u8 = 0;
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
    let exchanges = match &header[..4] {
        m if m == MAGIC => false,
        m if m == MAGIC_EXCHANGE => true,
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a zonemesh throughput test",
            ));
        }
    };
    let ms = |b: &[u8]| Duration::from_millis(u32::from_be_bytes(b.try_into().expect("4")).into());
    let mut warmup = ms(&header[4..8]);
    let duration = ms(&header[8..12]);
    if warmup + duration > MAX_TEST {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "test longer than the responder allows",
        ));
    }
    if exchanges {
        warmup = warmup.min(echo_exchanges(&mut stream).await?);
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

/// Echoes a test's exchange requests until the message that ends them, and returns the warm-up
/// it says is left.
async fn echo_exchanges(stream: &mut TcpStream) -> io::Result<Duration> {
    stream.set_nodelay(true)?;
    let mut message = [0u8; EXCHANGE_LEN];
    for _ in 0..=EXCHANGES {
        tokio::time::timeout(HEADER_TIMEOUT, stream.read_exact(&mut message))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "exchange request"))??;
        match message[0] {
            EXCHANGE_MORE => stream.write_all(&message).await?,
            EXCHANGE_DONE => {
                let left = u32::from_be_bytes(message[1..5].try_into().expect("4 bytes"));
                return Ok(Duration::from_millis(left.into()));
            }
            _ => break,
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "exchanges neither echoable nor ended",
    ))
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

/// Runs `test` from `source` and returns the receiver's figures summed over the streams, the
/// timed exchanges of the first stream and the senders' TCP counters.
pub async fn measure(
    test: &Test,
    source: Option<IpAddr>,
    buffer: SocketBuffer,
) -> Result<ThroughputSample, Error> {
    if test.duration.is_zero() {
        return Err(Error::ThroughputDuration);
    }
    let begun = Instant::now();
    let mut first = open(test, source, buffer, MAGIC_EXCHANGE, test.warmup).await?;
    let (first, (timed, timeout)) = match time_exchanges(&mut first, begun, test.warmup).await {
        Ok(exchanges) => (first, exchanges),
        Err(e) => {
            // A responder that predates the exchanges closed the connection, or an exchange took
            // the whole warm-up: the transfer runs without them.
            tracing::debug!(peer = %test.peer, error = %e, "no timed exchanges");
            drop(first);
            let left = test.warmup.saturating_sub(begun.elapsed());
            (
                open(test, source, buffer, MAGIC, left).await?,
                (Vec::new(), None),
            )
        }
    };
    let left = test.warmup.saturating_sub(begun.elapsed());
    let deadline = Instant::now() + left + test.duration;
    let mut streams = tokio::task::JoinSet::new();
    let peer = test.peer;
    streams.spawn(async move { transfer(first, peer, deadline).await });
    for _ in 1..test.streams.max(1) {
        let test = test.clone();
        streams.spawn(async move {
            let stream = open(&test, source, buffer, MAGIC, left).await?;
            transfer(stream, test.peer, deadline).await
        });
    }
    let (mut bytes, mut micros) = (0u64, 0u64);
    let mut counters = Some((0u64, 0u64));
    while let Some(result) = streams.join_next().await {
        let done = result??;
        bytes += done.bytes;
        micros = micros.max(done.micros);
        counters = counters
            .zip(done.counters)
            .map(|((s, r), (ds, dr))| (s + ds, r + dr));
    }
    if micros == 0 {
        return Err(Error::ThroughputNothing);
    }
    let rate = Bps::parse("throughput_bps", bytes as f64 * 8.0 / (micros as f64 / 1e6))
        .map_err(Error::ThroughputFigures)?;
    let mut sample = ThroughputSample::new(
        rate,
        bytes,
        micros,
        u64::try_from(test.warmup.as_micros()).unwrap_or(u64::MAX),
        test.streams.max(1),
    )
    .map_err(Error::ThroughputFigures)?;
    sample.retransmits = counters
        .filter(|&(sent, _)| sent > 0)
        .and_then(|(sent, again)| Retransmits::new(sent, again.min(sent)).ok());
    sample.exchange = exchange_figures(&timed).map(|e| e.with_timeout(timeout));
    Ok(sample)
}

/// Connects to the test's peer from `source` and sends a header with `magic`, the warm-up left
/// and the counted duration.
async fn open(
    test: &Test,
    source: Option<IpAddr>,
    buffer: SocketBuffer,
    magic: &[u8; 4],
    warmup: Duration,
) -> Result<TcpStream, Error> {
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
    let mut header = [0u8; HEADER_LEN];
    header[..4].copy_from_slice(magic);
    header[4..8].copy_from_slice(&millis(warmup).to_be_bytes());
    header[8..12].copy_from_slice(&millis(test.duration).to_be_bytes());
    stream
        .write_all(&header)
        .await
        .map_err(|source| Error::ThroughputIo {
            peer,
            what: "transfer to",
            source,
        })?;
    Ok(stream)
}

fn millis(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

/// Times request–response exchanges on `stream` (opened with [`MAGIC_EXCHANGE`]) until
/// [`EXCHANGES`] are done or half the warm-up has passed since `begun`, then tells the responder
/// the warm-up left. Returns the exchanges with the connection's retransmission timeout after
/// them (see [`MessageExchange::timeout`]). An exchange that would outlast the whole warm-up is
/// an error: the connection is then out of step and is dropped.
async fn time_exchanges(
    stream: &mut TcpStream,
    begun: Instant,
    warmup: Duration,
) -> io::Result<(Vec<Duration>, Option<Micros>)> {
    stream.set_nodelay(true)?;
    let (budget, hard) = (begun + warmup / 2, begun + warmup);
    let mut message = [0u8; EXCHANGE_LEN];
    let mut echo = [0u8; EXCHANGE_LEN];
    let mut timed = Vec::with_capacity(EXCHANGES as usize);
    message[0] = EXCHANGE_MORE;
    while timed.len() < EXCHANGES as usize && Instant::now() < budget {
        let sent = Instant::now();
        stream.write_all(&message).await?;
        tokio::time::timeout_at(hard, stream.read_exact(&mut echo))
            .await
            .map_err(|_| {
                io::Error::new(io::ErrorKind::TimedOut, "an exchange outlasted the warm-up")
            })??;
        timed.push(sent.elapsed());
    }
    // Before the transfer's queues inflate the connection's RTT estimate, and with it the timeout.
    let timeout = retransmission_timeout(stream);
    message[0] = EXCHANGE_DONE;
    let left = warmup.saturating_sub(begun.elapsed());
    message[1..5].copy_from_slice(&millis(left).to_be_bytes());
    stream.write_all(&message).await?;
    stream.set_nodelay(false)?;
    Ok((timed, timeout))
}

/// Median, mean and largest of the timed exchanges; `None` when none was timed.
fn exchange_figures(timed: &[Duration]) -> Option<MessageExchange> {
    let mut us: Vec<f64> = timed.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    let count = u32::try_from(us.len()).ok()?;
    let max = us.iter().copied().fold(f64::NAN, f64::max);
    let mean = us.iter().sum::<f64>() / us.len() as f64;
    // The lower median: the exchanges end at half the warm-up, so a test that met a stall (a
    // lost message, repaired after a timeout) often timed only a few; with two, the upper
    // median would be the stall.
    let p50 = lower_median(&mut us)?;
    let figure = |name, v: f64| Micros::parse(name, v.min(max)).ok();
    MessageExchange::new(
        count,
        figure("exchange_p50_us", p50)?,
        figure("exchange_mean_us", mean)?,
        figure("exchange_max_us", max)?,
    )
    .ok()
}

/// What one stream's transfer counted.
struct Transferred {
    /// Bytes the receiver counted after its warm-up.
    bytes: u64,
    /// Over how long, µs.
    micros: u64,
    /// The sender's data segments and retransmissions, when `TCP_INFO` could be read.
    counters: Option<(u64, u64)>,
}

/// Streams data on `stream` until `deadline`, half-closes and reads the receiver's answer.
async fn transfer(
    mut stream: TcpStream,
    peer: SocketAddr,
    deadline: Instant,
) -> Result<Transferred, Error> {
    let io_err = |source: io::Error| Error::ThroughputIo {
        peer,
        what: "transfer to",
        source,
    };
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
    Ok(Transferred {
        bytes: u64::from_be_bytes(answer[..8].try_into().expect("8 bytes")),
        micros: u64::from_be_bytes(answer[8..].try_into().expect("8 bytes")),
        // Read once the receiver has everything: no retransmission of this test is to come.
        counters: tcp_counters(&stream),
    })
}

/// The sender's data segments sent and segments retransmitted on `stream`, from Linux's
/// `TCP_INFO` (`tcpi_data_segs_out`, since Linux 4.6, and `tcpi_total_retrans`).
fn tcp_counters(stream: &TcpStream) -> Option<(u64, u64)> {
    let info = tcp_info(
        stream,
        std::mem::offset_of!(libc::tcp_info, tcpi_data_segs_out) + 4,
    )?;
    Some((
        u64::from(info.tcpi_data_segs_out),
        u64::from(info.tcpi_total_retrans),
    ))
}

/// The retransmission timeout the kernel has for `stream` now (`TCP_INFO` `tcpi_rto`, µs), if it
/// could be read and is set.
fn retransmission_timeout(stream: &TcpStream) -> Option<Micros> {
    let info = tcp_info(stream, std::mem::offset_of!(libc::tcp_info, tcpi_rto) + 4)?;
    if info.tcpi_rto == 0 {
        return None;
    }
    Micros::parse("exchange_timeout_us", f64::from(info.tcpi_rto)).ok()
}

/// `stream`'s `TCP_INFO`, when the kernel wrote at least `needed` bytes of it (the fields the
/// caller reads); the fields beyond what it wrote are zero.
///
/// The one `unsafe` of the workspace (which denies it): neither nix nor socket2 reads
/// `TCP_INFO`, and nix's generic getter panics when the kernel's struct is shorter than libc's.
/// The kernel writes at most `len` bytes and says how many.
#[allow(unsafe_code)]
fn tcp_info(stream: &TcpStream, needed: usize) -> Option<libc::tcp_info> {
    use std::os::fd::AsRawFd;
    // SAFETY: `tcp_info` is a plain C struct of integers, for which all zero bytes is a value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::tcp_info>()).ok()?;
    // SAFETY: the descriptor is the open socket `stream` borrows; `info` and `len` are valid for
    // writes of `len` bytes, which is what getsockopt writes at most.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &raw mut len,
        )
    };
    (rc == 0 && len as usize >= needed).then_some(info)
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
        // The first stream timed its exchanges within half the warm-up, and the senders' counters
        // cover at least the bytes the receiver counted.
        let e = t.exchange.expect("the responder answers exchanges");
        assert!((1..=EXCHANGES).contains(&e.count), "{e:?}");
        assert!(
            e.p50 <= e.max && e.mean <= e.max && e.max.get() < 50_000.0,
            "{e:?}"
        );
        // Linux never times out below its TCP_RTO_MIN of 200 ms (include/net/tcp.h), whatever
        // loopback's RTT; `ss -ti` shows about 204 ms on a fresh loopback connection.
        let timeout = e.timeout.expect("TCP_INFO's tcpi_rto on Linux").get();
        assert!((200_000.0..1_000_000.0).contains(&timeout), "{e:?}");
        let r = t.retransmits.expect("TCP_INFO on Linux");
        assert!(
            r.segments_sent as f64 * 65_483.0 >= t.bytes as f64,
            "{r:?} {t:?}"
        );
    }

    #[test]
    fn exchange_figures_take_the_lower_median_and_count_a_stall_in_the_mean() {
        let ms = Duration::from_micros;
        let e = exchange_figures(&[ms(200_000), ms(20)]).unwrap();
        assert_eq!((e.count, e.p50.get(), e.max.get()), (2, 20.0, 200_000.0));
        assert_eq!(e.mean.get(), 100_010.0);
        let e = exchange_figures(&[ms(30), ms(10), ms(20)]).unwrap();
        assert_eq!(e.p50.get(), 20.0);
        assert_eq!(exchange_figures(&[]), None);
    }

    #[tokio::test]
    async fn a_responder_without_exchanges_still_serves_the_test() {
        // What a responder from before the exchanges does: it closes a `ZMT2` connection and
        // serves a `ZMT1` one.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let peer = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let mut header = [0u8; HEADER_LEN];
                stream.peek(&mut header).await.unwrap();
                if &header[..4] == MAGIC {
                    tokio::spawn(serve(stream));
                }
            }
        });
        let test = Test {
            peer,
            warmup: Duration::from_millis(100),
            duration: Duration::from_millis(200),
            streams: 1,
        };
        let t = measure(&test, None, SocketBuffer::Auto).await.unwrap();
        assert!(t.bytes > 0 && t.exchange.is_none(), "{t:?}");
    }

    #[tokio::test]
    async fn the_responder_starts_its_clock_from_the_warm_up_the_exchanges_left() {
        let peer = local_responder();
        let mut s = TcpStream::connect(peer).await.unwrap();
        let mut header = [0u8; HEADER_LEN];
        header[..4].copy_from_slice(MAGIC_EXCHANGE);
        header[4..8].copy_from_slice(&10_000u32.to_be_bytes());
        header[8..12].copy_from_slice(&100u32.to_be_bytes());
        s.write_all(&header).await.unwrap();
        let mut message = [7u8; EXCHANGE_LEN];
        message[0] = EXCHANGE_MORE;
        s.write_all(&message).await.unwrap();
        let mut echo = [0u8; EXCHANGE_LEN];
        s.read_exact(&mut echo).await.unwrap();
        assert_eq!(echo, message);
        // 10 s of warm-up asked, 0 left after the exchanges: the bytes sent now count.
        message[0] = EXCHANGE_DONE;
        message[1..5].copy_from_slice(&0u32.to_be_bytes());
        s.write_all(&message).await.unwrap();
        s.write_all(&[0u8; 4096]).await.unwrap();
        s.shutdown().await.unwrap();
        let mut answer = [0u8; ANSWER_LEN];
        tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut answer))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(u64::from_be_bytes(answer[..8].try_into().unwrap()), 4096);
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
