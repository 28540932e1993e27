//! The agent's one error type. Configuration errors name their flag (and exit with status 64);
//! the others say which peer, API server or stream failed, with the cause as their source.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong in the agent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag's value that is not a valid node or zone name (the message names the flag).
    #[error(transparent)]
    Name(#[from] zonemesh_domain::FieldError),
    /// A flag's value that cannot be used.
    #[error("{flag}: {reason}")]
    Flag {
        /// The flag, with its dashes.
        flag: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A `--socket-buffer` value that is no size it takes.
    #[error("{value:?} is {problem}")]
    SocketBuffer {
        /// The value given.
        value: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A file a flag names that cannot be read.
    #[error("{flag} {}: {source}{note}", path.display())]
    FlagFile {
        /// The flag.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
        /// Why the file is needed (empty, or starting with a space).
        note: String,
    },
    /// The TLS flags, or their files.
    #[error(transparent)]
    Tls(#[from] zonemesh_tls::Error),
    /// An RTT method asked for by `--icmp` that this host does not allow.
    #[error("--icmp {mode}: cannot open {socket} ({source}); this needs {needs}")]
    Icmp {
        /// The method asked for.
        mode: &'static str,
        /// The socket that could not be opened.
        socket: &'static str,
        /// What the host must allow.
        needs: &'static str,
        /// The cause.
        #[source]
        source: io::Error,
    },

    /// An entry of the probe plan with no address of a family this node has.
    #[error("target {node}: no address of a family this node has ({addresses:?})")]
    TargetFamily {
        /// The peer it names.
        node: zonemesh_domain::NodeName,
        /// Its addresses.
        addresses: Vec<IpAddr>,
    },

    /// The Kubernetes API server gave no answer in time.
    #[error("{url}: no answer within {after:?}")]
    KubeTimeout {
        /// The API server.
        url: String,
        /// How long the agent waited.
        after: Duration,
    },
    /// The Kubernetes API server's address cannot be used.
    #[error("{url}: {reason}")]
    KubeAddress {
        /// The API server.
        url: String,
        /// What is wrong ("not a URL: …", "no host").
        reason: String,
    },
    /// The cluster's CA certificate (`--kube-ca-file`) cannot be used.
    #[error("{url}: {reason}")]
    KubeCa {
        /// The API server.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No client could be made for the API server (its TLS settings, its token).
    #[error("{url}: cannot make a Kubernetes client: {reason}")]
    KubeClient {
        /// The API server.
        url: String,
        /// The client's error and its causes.
        reason: String,
    },
    /// The request did not get an HTTP answer: no connection, TLS refused, the stream broke.
    #[error("{url}: {reason}")]
    KubeRequest {
        /// What was asked for.
        url: String,
        /// The client's error and its causes.
        reason: String,
    },
    /// The API server said no.
    #[error("{url}: {code} {reason}{}", then_colon(message))]
    KubeStatus {
        /// What was asked for.
        url: String,
        /// The HTTP status code.
        code: u16,
        /// The Status reason (`NotFound`, `Unauthorized`), if the answer had one.
        reason: String,
        /// The Status message, or the start of an answer that is no Status.
        message: String,
    },
    /// The API server's answer is not the Node object asked for.
    #[error("node {node}: {reason}")]
    KubeAnswer {
        /// The node asked for.
        node: String,
        /// What is wrong with the answer.
        reason: String,
    },

    /// A throughput test with no time to run.
    #[error("duration_ms is 0")]
    ThroughputDuration,
    /// A stream of a throughput test panicked or was cancelled.
    #[error("stream task: {0}")]
    ThroughputTask(#[from] tokio::task::JoinError),
    /// The socket of a throughput test could not be made.
    #[error("socket: {0}")]
    ThroughputSocket(#[source] io::Error),
    /// The peer's responder did not accept the connection in time.
    #[error("connect to {peer} timed out")]
    ThroughputConnectTimeout {
        /// The peer's responder.
        peer: SocketAddr,
    },
    /// The peer's responder refused the connection, or it failed.
    #[error("{what} {peer}: {source}")]
    ThroughputIo {
        /// The peer's responder.
        peer: SocketAddr,
        /// The step that failed ("connect to", "transfer to").
        what: &'static str,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The peer did not send its figures after the test.
    #[error("{peer} did not answer with its figures")]
    ThroughputNoAnswer {
        /// The peer's responder.
        peer: SocketAddr,
    },
    /// No byte arrived after the warm-up.
    #[error("nothing arrived after the warm-up")]
    ThroughputNothing,
    /// The figures of a test are out of range (a rate above 10 Tbit/s).
    #[error("throughput figures: {0}")]
    ThroughputFigures(#[source] zonemesh_domain::FieldError),

    /// The aggregator cannot be reached.
    #[error(transparent)]
    Connect(#[from] zonemesh_tls::ConnectError),
    /// A call or the stream to the aggregator failed.
    #[error("{what}{} ({:?})", status.message(), status.code())]
    Rpc {
        /// What failed ("Ingest.Connect: ", "Hello: ", "" mid-stream).
        what: &'static str,
        /// The aggregator's (or the transport's) status.
        status: tonic::Status,
    },
    /// The stream to the aggregator ended or closed; `0` says how.
    #[error("{0}")]
    Stream(&'static str),
    /// The aggregator refused the Hello.
    #[error("Hello refused: {message} (field {field})")]
    HelloRefused {
        /// Its message.
        message: String,
        /// The field it names.
        field: String,
    },
    /// The aggregator answered the Hello with something else than an acknowledgement.
    #[error("expected an Ack of the Hello, got {0}")]
    HelloAnswer(String),
}

/// `": message"`, or nothing for an empty message.
fn then_colon(message: &str) -> String {
    if message.is_empty() {
        String::new()
    } else {
        format!(": {message}")
    }
}
