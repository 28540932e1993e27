//! A distributed-training workload on real TCP between lab namespaces: N workers that exchange a
//! gradient every iteration, by ring all-reduce or through a parameter server, timed per
//! iteration. Sockets are opened inside the nodes' namespaces (so their traffic takes the lab's
//! links, delays, loss and rate limits) and then driven from ordinary threads.
//!
//! - **Ring all-reduce** (as NCCL and Horovod do it): the gradient in N chunks; 2(N − 1) steps in
//!   which every worker sends one chunk to the next worker and receives one from the previous
//!   (reduce-scatter, then all-gather). A step lasts as long as the ring's slowest link.
//! - **Parameter server**: the first node of the placement also runs the server; every other
//!   worker sends its whole gradient to it and waits for the sum back.
//!
//! The received bytes are summed into the worker's own gradient, so that the work a real job
//! does on arrival is there too (a byte-wise add, cheap beside the network).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use zonemesh_lab::netns::NETNS_DIR;
use zonemesh_lab::{Lab, in_netns};

/// How the workers exchange gradients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Collective {
    /// Ring all-reduce.
    Ring,
    /// A parameter server on the first worker's node.
    ParameterServer,
}

impl Collective {
    /// Name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ring => "ring all-reduce",
            Self::ParameterServer => "parameter server",
        }
    }
}

/// One training run.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Ring or parameter server.
    pub collective: Collective,
    /// Bytes of one worker's gradient.
    pub gradient_bytes: usize,
    /// Timed iterations (after one untimed warm-up iteration).
    pub iterations: u32,
    /// A socket read or write that waits longer than this fails the run.
    pub timeout: Duration,
}

fn netns_path(lab: &Lab, node: &str) -> String {
    format!("{NETNS_DIR}/{}", lab.node(node).netns)
}

fn listen(lab: &Lab, node: &str) -> Result<(TcpListener, SocketAddr)> {
    let address = lab.node(node).address;
    let listener = in_netns(&netns_path(lab, node), move || {
        TcpListener::bind((address, 0))
    })?
    .with_context(|| format!("listening on {node}"))?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

fn connect(lab: &Lab, node: &str, to: SocketAddr, timeout: Duration) -> Result<TcpStream> {
    let stream = in_netns(&netns_path(lab, node), move || {
        TcpStream::connect_timeout(&to, timeout)
    })?
    .with_context(|| format!("{node} connecting to {to}"))?;
    tune(&stream, timeout)?;
    Ok(stream)
}

fn tune(stream: &TcpStream, timeout: Duration) -> Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    Ok(())
}

fn accept(listener: &TcpListener, timeout: Duration) -> Result<TcpStream> {
    let (stream, _) = listener.accept()?;
    tune(&stream, timeout)?;
    Ok(stream)
}

/// Runs `workload` on `nodes` (in rank order; a node may appear once) and returns the time of
/// each timed iteration: the slowest worker's.
pub fn run(lab: &Lab, nodes: &[String], workload: &Workload) -> Result<Vec<Duration>> {
    ensure!(
        nodes.len() >= 2,
        "a job of {} workers exchanges nothing",
        nodes.len()
    );
    for (i, n) in nodes.iter().enumerate() {
        ensure!(!nodes[..i].contains(n), "{n} is placed twice");
    }
    match workload.collective {
        Collective::Ring => ring(lab, nodes, workload),
        Collective::ParameterServer => parameter_server(lab, nodes, workload),
    }
}

fn add_into(acc: &mut [u8], other: &[u8]) {
    for (a, b) in acc.iter_mut().zip(other) {
        *a = a.wrapping_add(*b);
    }
}

fn ring(lab: &Lab, nodes: &[String], w: &Workload) -> Result<Vec<Duration>> {
    let n = nodes.len();
    let listeners: Vec<(TcpListener, SocketAddr)> = nodes
        .iter()
        .map(|node| listen(lab, node))
        .collect::<Result<_>>()?;
    // Worker i sends to i + 1 and receives from i − 1.
    let mut sends = Vec::with_capacity(n);
    for (i, node) in nodes.iter().enumerate() {
        sends.push(connect(lab, node, listeners[(i + 1) % n].1, w.timeout)?);
    }
    let mut receives: Vec<TcpStream> = listeners
        .iter()
        .map(|(l, _)| accept(l, w.timeout))
        .collect::<Result<_>>()?;
    // Accepted in listener order: listener i holds the connection from i − 1.
    let chunk = w.gradient_bytes.div_ceil(n);
    let rounds = w.iterations + 1;
    let workers: Vec<std::thread::JoinHandle<Result<Vec<Duration>>>> = sends
        .into_iter()
        .zip(receives.drain(..))
        .map(|(mut send, mut receive)| {
            std::thread::spawn(move || -> Result<Vec<Duration>> {
                let mut gradient = vec![1u8; chunk * n];
                let mut incoming = vec![0u8; chunk];
                let mut times = Vec::new();
                for _ in 0..rounds {
                    let started = Instant::now();
                    for step in 0..2 * (n - 1) {
                        let out = gradient[(step % n) * chunk..][..chunk].to_vec();
                        std::thread::scope(|s| -> Result<()> {
                            let sender = s.spawn(|| send.write_all(&out));
                            receive.read_exact(&mut incoming)?;
                            sender
                                .join()
                                .map_err(|_| anyhow::anyhow!("sender panicked"))??;
                            Ok(())
                        })?;
                        let at = ((step + n - 1) % n) * chunk;
                        add_into(&mut gradient[at..at + chunk], &incoming);
                    }
                    times.push(started.elapsed());
                }
                Ok(times)
            })
        })
        .collect();
    slowest(workers)
}

fn parameter_server(lab: &Lab, nodes: &[String], w: &Workload) -> Result<Vec<Duration>> {
    let (listener, server) = listen(lab, &nodes[0])?;
    let mut workers = Vec::new();
    for node in &nodes[1..] {
        workers.push(connect(lab, node, server, w.timeout)?);
    }
    let mut at_server: Vec<TcpStream> = (1..nodes.len())
        .map(|_| accept(&listener, w.timeout))
        .collect::<Result<_>>()?;
    let size = w.gradient_bytes;
    let rounds = w.iterations + 1;
    let server_thread = std::thread::spawn(move || -> Result<Vec<Duration>> {
        let mut times = Vec::new();
        for _ in 0..rounds {
            let started = Instant::now();
            // Receive every worker's gradient at once (incast), sum, send the sum to all.
            let received: Vec<Vec<u8>> = std::thread::scope(|s| {
                let handles: Vec<_> = at_server
                    .iter_mut()
                    .map(|stream| {
                        s.spawn(move || -> std::io::Result<Vec<u8>> {
                            let mut buf = vec![0u8; size];
                            stream.read_exact(&mut buf)?;
                            Ok(buf)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .map_err(|_| anyhow::anyhow!("server reader panicked"))?
                            .map_err(anyhow::Error::from)
                    })
                    .collect::<Result<Vec<_>>>()
            })?;
            let mut sum = vec![1u8; size];
            for r in &received {
                add_into(&mut sum, r);
            }
            std::thread::scope(|s| -> Result<()> {
                let handles: Vec<_> = at_server
                    .iter_mut()
                    .map(|stream| {
                        let sum = &sum;
                        s.spawn(move || stream.write_all(sum))
                    })
                    .collect();
                for h in handles {
                    h.join()
                        .map_err(|_| anyhow::anyhow!("server writer panicked"))??;
                }
                Ok(())
            })?;
            times.push(started.elapsed());
        }
        Ok(times)
    });
    let mut threads = vec![server_thread];
    for mut stream in workers {
        threads.push(std::thread::spawn(move || -> Result<Vec<Duration>> {
            let mut gradient = vec![1u8; size];
            let mut times = Vec::new();
            for _ in 0..rounds {
                let started = Instant::now();
                stream.write_all(&gradient)?;
                stream.read_exact(&mut gradient)?;
                times.push(started.elapsed());
            }
            Ok(times)
        }));
    }
    slowest(threads)
}

/// Per iteration, the slowest worker's time; the warm-up iteration dropped.
fn slowest(threads: Vec<std::thread::JoinHandle<Result<Vec<Duration>>>>) -> Result<Vec<Duration>> {
    let mut worst: Vec<Duration> = Vec::new();
    let mut first_error = None;
    for t in threads {
        match t.join() {
            Ok(Ok(times)) => {
                worst.resize(times.len().max(worst.len()), Duration::ZERO);
                for (w, t) in worst.iter_mut().zip(times) {
                    *w = (*w).max(t);
                }
            }
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(_) => {
                first_error.get_or_insert(anyhow::anyhow!("a worker panicked"));
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e.context("a worker failed (timed out or lost its connection)"));
    }
    if worst.len() < 2 {
        bail!("no timed iteration");
    }
    Ok(worst[1..].to_vec())
}
