//! The agent's configuration: flags, the environment variables `deploy/` sets (one constant per
//! name in [`env`]), and the checks that run before any socket opens.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use clap::Parser;
use zonemesh_common::flags::{LogFormat, parse_duration};
use zonemesh_domain::{NodeName, ZoneName};

use crate::Error;

/// Environment variables, one constant per name.
pub mod env {
    /// `--node`.
    pub const NODE: &str = "ZONEMESH_NODE";
    /// `--zone`.
    pub const ZONE: &str = "ZONEMESH_ZONE";
    /// `--region`.
    pub const REGION: &str = "ZONEMESH_REGION";
    /// `--address` (comma-separated).
    pub const ADDRESS: &str = "ZONEMESH_ADDRESS";
    /// `--aggregator`.
    pub const AGGREGATOR: &str = "ZONEMESH_AGGREGATOR";
    /// `--probe-port`.
    pub const PROBE_PORT: &str = "ZONEMESH_PROBE_PORT";
    /// `--metrics-listen`.
    pub const METRICS_LISTEN: &str = "ZONEMESH_METRICS_LISTEN";
    /// `--icmp`.
    pub const ICMP: &str = "ZONEMESH_ICMP";
    /// `--buffer-reports`.
    pub const BUFFER_REPORTS: &str = "ZONEMESH_BUFFER_REPORTS";
    /// `--reconnect-min`.
    pub const RECONNECT_MIN: &str = "ZONEMESH_RECONNECT_MIN";
    /// `--reconnect-max`.
    pub const RECONNECT_MAX: &str = "ZONEMESH_RECONNECT_MAX";
    /// `--socket-buffer`.
    pub const SOCKET_BUFFER: &str = "ZONEMESH_SOCKET_BUFFER";
    /// `--shutdown-timeout`.
    pub const SHUTDOWN_TIMEOUT: &str = "ZONEMESH_SHUTDOWN_TIMEOUT";
    /// `--log-format`.
    pub const LOG_FORMAT: &str = "ZONEMESH_LOG_FORMAT";
    /// `--log`.
    pub const LOG: &str = "ZONEMESH_LOG";
    /// `--pod-zone`: the pod's `topology.kubernetes.io/zone` label, from the downward API.
    pub const POD_ZONE: &str = "ZONEMESH_POD_ZONE";
    /// `--pod-region`: the pod's `topology.kubernetes.io/region` label.
    pub const POD_REGION: &str = "ZONEMESH_POD_REGION";
    /// `--kube-api`.
    pub const KUBE_API: &str = "ZONEMESH_KUBE_API";
    /// `--kube-token-file`.
    pub const KUBE_TOKEN_FILE: &str = "ZONEMESH_KUBE_TOKEN_FILE";
    /// `--kube-ca-file`.
    pub const KUBE_CA_FILE: &str = "ZONEMESH_KUBE_CA_FILE";
    /// `--zone-label`.
    pub const ZONE_LABEL: &str = "ZONEMESH_ZONE_LABEL";
    /// `--region-label`.
    pub const REGION_LABEL: &str = "ZONEMESH_REGION_LABEL";
    /// Set by Kubernetes in every pod: the API server's address.
    pub const KUBERNETES_SERVICE_HOST: &str = "KUBERNETES_SERVICE_HOST";
    /// Set by Kubernetes in every pod: the API server's port.
    pub const KUBERNETES_SERVICE_PORT: &str = "KUBERNETES_SERVICE_PORT";
}

/// Where a pod finds its service-account token.
pub const SERVICE_ACCOUNT_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
/// Where a pod finds the cluster's CA certificate.
pub const SERVICE_ACCOUNT_CA: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

/// How the agent measures RTT and loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IcmpChoice {
    /// ICMP datagram socket if `ping_group_range` allows it, else a raw socket, else TCP.
    Auto,
    /// ICMP echo over a raw socket (needs CAP_NET_RAW).
    Raw,
    /// ICMP echo over an unprivileged ICMP datagram socket.
    Dgram,
    /// TCP connect round trips to the peers' probe ports.
    Tcp,
}

/// The zonemesh agent: probes loss, RTT and throughput to the peers in the aggregator's probe plan
/// and streams one report per window to the aggregator.
#[derive(Debug, Parser)]
#[command(name = "zonemesh-agent", version)]
pub struct Cli {
    /// Kubernetes node name of this node.
    #[arg(long, env = env::NODE)]
    pub node: String,
    /// Zone of this node (topology.kubernetes.io/zone). When not given: --pod-zone, then the
    /// Node object from the API server, else "unknown" with a warning.
    #[arg(long, env = env::ZONE)]
    pub zone: Option<String>,
    /// The pod's own zone label (downward API), where the cluster copies it from the node.
    #[arg(long, env = env::POD_ZONE)]
    pub pod_zone: Option<String>,
    /// The pod's own region label (downward API).
    #[arg(long, env = env::POD_REGION)]
    pub pod_region: Option<String>,
    /// API server URL for reading this node's labels; by default the in-cluster address
    /// (KUBERNETES_SERVICE_HOST and _PORT), or none outside a cluster; "none" turns it off.
    #[arg(long, env = env::KUBE_API)]
    pub kube_api: Option<String>,
    /// Bearer token file for the API server.
    #[arg(long, env = env::KUBE_TOKEN_FILE, default_value = SERVICE_ACCOUNT_TOKEN)]
    pub kube_token_file: std::path::PathBuf,
    /// CA certificate (PEM) of the API server.
    #[arg(long, env = env::KUBE_CA_FILE, default_value = SERVICE_ACCOUNT_CA)]
    pub kube_ca_file: std::path::PathBuf,
    /// Node label that names the zone.
    #[arg(long, env = env::ZONE_LABEL, default_value = "topology.kubernetes.io/zone")]
    pub zone_label: String,
    /// Node label that names the region.
    #[arg(long, env = env::REGION_LABEL, default_value = "topology.kubernetes.io/region")]
    pub region_label: String,
    /// Region of this node (topology.kubernetes.io/region).
    #[arg(long, env = env::REGION)]
    pub region: Option<String>,
    /// Address peers probe this node on (IPv4 or IPv6), best first; repeat or separate by commas.
    #[arg(long, env = env::ADDRESS, value_delimiter = ',', required = true)]
    pub address: Vec<String>,
    /// URL of the aggregator's gRPC endpoint. Replicas: several, comma-separated, or a name that
    /// resolves to several (a headless Service); when a stream fails the agent says hello to the
    /// next and sends again what was not acknowledged.
    #[arg(
        long,
        env = env::AGGREGATOR,
        default_value = "http://zonemesh-aggregator:7400",
        value_delimiter = ','
    )]
    pub aggregator: Vec<String>,
    /// TLS to the aggregator: the agent presents a certificate naming its node.
    #[command(flatten)]
    pub tls: zonemesh_tls::TlsArgs,
    /// TCP port of this agent's RTT and throughput responder, on every --address.
    #[arg(long, env = env::PROBE_PORT, default_value_t = 7402)]
    pub probe_port: u16,
    /// Address of the Prometheus endpoint (/metrics, /healthz).
    #[arg(long, env = env::METRICS_LISTEN, default_value = "0.0.0.0:7403")]
    pub metrics_listen: SocketAddr,
    /// How to measure RTT and loss.
    #[arg(long, env = env::ICMP, value_enum, default_value = "auto")]
    pub icmp: IcmpChoice,
    /// Unacknowledged reports kept for resending; beyond it the oldest are dropped (and counted).
    #[arg(long, env = env::BUFFER_REPORTS, default_value_t = 360)]
    pub buffer_reports: usize,
    /// First reconnect delay (doubles up to --reconnect-max, with full jitter).
    #[arg(long, env = env::RECONNECT_MIN, default_value = "200ms", value_parser = parse_duration)]
    pub reconnect_min: Duration,
    /// Longest reconnect delay.
    #[arg(long, env = env::RECONNECT_MAX, default_value = "30s", value_parser = parse_duration)]
    pub reconnect_max: Duration,
    /// Send and receive buffer of throughput sockets in bytes, or "auto" for the kernel's
    /// autotuning (a fixed size is capped by net.core.[rw]mem_max and turns autotuning off).
    #[arg(long, env = env::SOCKET_BUFFER, default_value = "auto", value_parser = parse_buffer)]
    pub socket_buffer: SocketBuffer,
    /// On SIGTERM, how long to wait for the last report to be acknowledged.
    #[arg(long, env = env::SHUTDOWN_TIMEOUT, default_value = "5s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,
    /// Log format.
    #[arg(long, env = env::LOG_FORMAT, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Log filter (tracing EnvFilter syntax).
    #[arg(long, env = env::LOG, default_value = "info")]
    pub log: String,
}

/// Size of the throughput sockets' buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketBuffer {
    /// Leave them to the kernel's autotuning.
    Auto,
    /// This many bytes (SO_SNDBUF / SO_RCVBUF).
    Bytes(usize),
}

/// A `--socket-buffer` value (clap names the flag in its message).
fn parse_buffer(value: &str) -> Result<SocketBuffer, Error> {
    let bad = |problem| Error::SocketBuffer {
        value: value.to_owned(),
        problem,
    };
    if value == "auto" {
        return Ok(SocketBuffer::Auto);
    }
    let (number, scale) = if let Some(n) = value.strip_suffix("MiB") {
        (n, 1 << 20)
    } else if let Some(n) = value.strip_suffix("KiB") {
        (n, 1 << 10)
    } else {
        (value, 1)
    };
    let n: usize = number
        .parse()
        .map_err(|_| bad("not a size (use auto, 4194304, 512KiB or 4MiB)"))?;
    let bytes = n.saturating_mul(scale);
    if !(4096..=1 << 30).contains(&bytes) {
        return Err(bad("not between 4KiB and 1024MiB"));
    }
    Ok(SocketBuffer::Bytes(bytes))
}

/// Checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// This node.
    pub node: NodeName,
    /// Its zone; `None` when not given (reported as "unknown").
    pub zone: Option<ZoneName>,
    /// Its region.
    pub region: Option<ZoneName>,
    /// Advertised addresses, best first.
    pub addresses: Vec<IpAddr>,
    /// Aggregator URLs (replicas), in order.
    pub aggregator: Vec<String>,
    /// TLS to the aggregator.
    pub tls: zonemesh_tls::ClientTls,
    /// Responder port.
    pub probe_port: u16,
    /// Prometheus endpoint.
    pub metrics_listen: SocketAddr,
    /// RTT method.
    pub icmp: IcmpChoice,
    /// Outbox capacity in reports.
    pub buffer_reports: usize,
    /// Reconnect backoff bounds.
    pub reconnect: (Duration, Duration),
    /// Throughput socket buffers.
    pub socket_buffer: SocketBuffer,
    /// Shutdown wait for the last acknowledgement.
    pub shutdown_timeout: Duration,
    /// The pod's zone and region labels, if the downward API handed them in.
    pub pod_zone: (Option<ZoneName>, Option<ZoneName>),
    /// The API server, if the zone may be read from the Node object.
    pub kube_api: Option<crate::discover::KubeApi>,
    /// Label keys of zone and region.
    pub labels: crate::discover::Labels,
}

/// The error of a flag's bad value.
fn flag(flag: &'static str, reason: impl Into<String>) -> Error {
    Error::Flag {
        flag,
        reason: reason.into(),
    }
}

impl Cli {
    /// Checks what clap cannot; every error names its flag.
    pub fn config(&self) -> Result<Config, Error> {
        let node = NodeName::parse("--node", self.node.clone())?;
        let zone = ZoneName::parse_optional("--zone", self.zone.clone().unwrap_or_default())?;
        let region = ZoneName::parse_optional("--region", self.region.clone().unwrap_or_default())?;
        let mut addresses = Vec::new();
        for a in &self.address {
            let ip: IpAddr = a
                .trim()
                .parse()
                .map_err(|_| flag("--address", format!("{a:?} is not an IP address")))?;
            if ip.is_unspecified() || ip.is_multicast() {
                return Err(flag(
                    "--address",
                    format!("{ip} cannot be probed (give this node's own unicast address)"),
                ));
            }
            if !addresses.contains(&ip) {
                addresses.push(ip);
            }
        }
        if addresses.is_empty() {
            return Err(flag("--address", "at least one address is needed"));
        }
        if self.aggregator.is_empty() {
            return Err(flag("--aggregator", "no URL given"));
        }
        let mut tls = None;
        for url in &self.aggregator {
            let rest = url
                .strip_prefix("http://")
                .or_else(|| url.strip_prefix("https://"))
                .ok_or_else(|| {
                    flag(
                        "--aggregator",
                        format!("{url:?} must start with http:// or https://"),
                    )
                })?;
            let authority = rest.trim_end_matches('/');
            if authority.is_empty() || authority.contains('/') {
                return Err(flag(
                    "--aggregator",
                    format!("{url:?} must be scheme://host:port without a path"),
                ));
            }
            tonic::transport::Endpoint::from_shared(url.clone())
                .map_err(|e| flag("--aggregator", format!("{url:?}: {e}")))?;
            tls = Some(self.tls.client_tls(url)?);
        }
        let tls = tls.expect("one URL at least");
        if self.probe_port == 0 {
            return Err(flag("--probe-port", "0 is not a port peers can reach"));
        }
        if self.buffer_reports == 0 {
            return Err(flag("--buffer-reports", "must be at least 1"));
        }
        if self.reconnect_min.is_zero() || self.reconnect_min > self.reconnect_max {
            return Err(flag(
                "--reconnect-min",
                format!(
                    "{:?} must be above 0 and at most --reconnect-max {:?}",
                    self.reconnect_min, self.reconnect_max
                ),
            ));
        }
        if self.metrics_listen.port() != 0
            && self.metrics_listen.port() == self.probe_port
            && (self.metrics_listen.ip().is_unspecified()
                || addresses.contains(&self.metrics_listen.ip()))
        {
            return Err(flag(
                "--metrics-listen",
                format!(
                    "{} uses --probe-port {}",
                    self.metrics_listen, self.probe_port
                ),
            ));
        }
        let pod_zone = (
            ZoneName::parse_optional("--pod-zone", self.pod_zone.clone().unwrap_or_default())?,
            ZoneName::parse_optional("--pod-region", self.pod_region.clone().unwrap_or_default())?,
        );
        let kube_api = self.kube_api()?;
        for (name, label) in [
            ("--zone-label", &self.zone_label),
            ("--region-label", &self.region_label),
        ] {
            if label.trim().is_empty() || label.contains(char::is_whitespace) {
                return Err(flag(name, format!("{label:?} is not a label key")));
            }
        }
        Ok(Config {
            pod_zone,
            kube_api,
            labels: crate::discover::Labels {
                zone: self.zone_label.clone(),
                region: self.region_label.clone(),
            },
            node,
            zone,
            region,
            addresses,
            aggregator: self.aggregator.clone(),
            tls,
            probe_port: self.probe_port,
            metrics_listen: self.metrics_listen,
            icmp: self.icmp,
            buffer_reports: self.buffer_reports,
            reconnect: (self.reconnect_min, self.reconnect_max),
            socket_buffer: self.socket_buffer,
            shutdown_timeout: self.shutdown_timeout,
        })
    }
}

impl Cli {
    /// The API server to read the Node object from: `--kube-api`, else the in-cluster address.
    /// Token and CA are read here, so that a missing file is a startup error naming its flag
    /// (an absent token outside a cluster is fine: `kubectl proxy` needs none).
    fn kube_api(&self) -> Result<Option<crate::discover::KubeApi>, Error> {
        let url = match self.kube_api.as_deref() {
            Some("none") => return Ok(None),
            Some(url) => url.to_owned(),
            None => match (
                std::env::var(env::KUBERNETES_SERVICE_HOST),
                std::env::var(env::KUBERNETES_SERVICE_PORT),
            ) {
                (Ok(host), Ok(port)) if host.contains(':') => format!("https://[{host}]:{port}"),
                (Ok(host), Ok(port)) => format!("https://{host}:{port}"),
                _ => return Ok(None),
            },
        };
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(flag(
                "--kube-api",
                format!("{url:?} must start with https:// or http://"),
            ));
        }
        let token = match std::fs::read_to_string(&self.kube_token_file) {
            Ok(t) => Some(t.trim().to_owned()),
            Err(_) if self.kube_token_file.as_os_str() == SERVICE_ACCOUNT_TOKEN => None,
            Err(source) => {
                return Err(Error::FlagFile {
                    flag: "--kube-token-file",
                    path: self.kube_token_file.clone(),
                    source,
                    note: String::new(),
                });
            }
        };
        let ca_pem = if url.starts_with("https://") {
            Some(
                std::fs::read(&self.kube_ca_file).map_err(|source| Error::FlagFile {
                    flag: "--kube-ca-file",
                    path: self.kube_ca_file.clone(),
                    source,
                    note: format!(" (needed for {url})"),
                })?,
            )
        } else {
            None
        };
        Ok(Some(crate::discover::KubeApi { url, token, ca_pem }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, String> {
        let mut all = vec!["zonemesh-agent"];
        all.extend(args);
        Cli::try_parse_from(all)
            .map_err(|e| e.to_string())?
            .config()
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_minimal_command_line_is_enough() {
        let c = parse(&["--node", "n1", "--address", "10.0.0.1,fd00::1"]).unwrap();
        assert_eq!(c.node.as_str(), "n1");
        assert!(c.zone.is_none());
        assert_eq!(c.addresses.len(), 2);
        assert_eq!(c.probe_port, 7402);
        assert_eq!(c.socket_buffer, SocketBuffer::Auto);
    }

    #[test]
    fn every_bad_value_names_its_flag() {
        let base = ["--node", "n1", "--address", "10.0.0.1"];
        let cases: &[(&[&str], &str)] = &[
            (&["--node", "N_1", "--address", "10.0.0.1"], "--node"),
            (&["--zone", "Zone A"], "--zone"),
            (&["--region=-x"], "--region"),
            (&["--node", "n1", "--address", "ten"], "--address"),
            (&["--node", "n1", "--address", "0.0.0.0"], "--address"),
            (&["--aggregator", "zonemesh:7400"], "--aggregator"),
            (&["--aggregator", "http://a:7400/x"], "--aggregator"),
            (&["--probe-port", "0"], "--probe-port"),
            (&["--buffer-reports", "0"], "--buffer-reports"),
            (&["--reconnect-min", "1m"], "--reconnect-min"),
            (&["--socket-buffer", "12"], "--socket-buffer"),
            (&["--icmp", "udp"], "--icmp"),
            (&["--metrics-listen", "0.0.0.0:7402"], "--metrics-listen"),
            (&["--pod-zone", "Zone A"], "--pod-zone"),
            (&["--kube-api", "api:6443"], "--kube-api"),
            (
                &[
                    "--kube-api",
                    "https://api:6443",
                    "--kube-ca-file",
                    "/nonexistent/ca.crt",
                ],
                "--kube-ca-file",
            ),
            (
                &[
                    "--kube-api",
                    "http://127.0.0.1:8001",
                    "--kube-token-file",
                    "/nonexistent/token",
                ],
                "--kube-token-file",
            ),
            (&["--zone-label", " "], "--zone-label"),
        ];
        for (args, flag) in cases {
            let mut all: Vec<&str> = Vec::new();
            if !args.contains(&"--node") {
                all.extend(base);
            }
            all.extend(*args);
            let err = parse(&all).expect_err(&format!("{args:?} accepted"));
            assert!(err.contains(flag), "{args:?}: {err}");
        }
    }

    #[test]
    fn buffer_sizes_take_units() {
        assert_eq!(parse_buffer("4MiB").unwrap(), SocketBuffer::Bytes(4 << 20));
        assert_eq!(
            parse_buffer("512KiB").unwrap(),
            SocketBuffer::Bytes(512 << 10)
        );
        assert_eq!(
            parse_buffer("4GB").unwrap_err().to_string(),
            "\"4GB\" is not a size (use auto, 4194304, 512KiB or 4MiB)"
        );
        assert_eq!(
            parse_buffer("2KiB").unwrap_err().to_string(),
            "\"2KiB\" is not between 4KiB and 1024MiB"
        );
    }
}
