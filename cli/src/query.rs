//! `zonemesh nodes|zones|path|matrix|rank|place|tiers`: the Topology API from a terminal or a
//! script; `zonemesh publish` (see [`crate::tiers`]).
//!
//! Tables fit the terminal and are coloured only on a terminal that supports colour, never with
//! `NO_COLOR`, unless `--color always` (anstream decides, with `CLICOLOR` and `CLICOLOR_FORCE`
//! too); `--output json` prints the same JSON as the aggregator's web API. Anything that waits
//! shows a spinner on standard error, on a terminal only. The exit status says what went wrong
//! ([`exit`]).

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;
use tonic::transport::Channel;
use zonemesh_common::flags::parse_duration;
use zonemesh_proto::json;
use zonemesh_proto::v1;
use zonemesh_tls::TlsArgs;

use crate::failure::{Failure, exit};
use crate::render::{self, Style};

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Tables for people.
    Table,
    /// JSON for programs (the web API's shapes).
    Json,
    /// The same as YAML (Kubernetes objects for `zonemesh publish --dry-run`).
    Yaml,
}

/// When to colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// On a terminal that supports colour, unless NO_COLOR is set (or CLICOLOR=0; CLICOLOR_FORCE
    /// forces it).
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// How to reach the aggregator and how to print.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// The aggregator's gRPC URL (https:// with --tls-ca). Replicas: several, comma-separated,
    /// or a name that resolves to several; a query that one cannot answer (unreachable,
    /// UNAVAILABLE) is asked of the next.
    #[arg(
        global = true,
        long,
        env = "ZONEMESH_AGGREGATOR",
        default_value = "http://127.0.0.1:7400",
        value_delimiter = ','
    )]
    pub aggregator: Vec<String>,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Bearer token for an aggregator that requires credentials.
    #[arg(
        global = true,
        long,
        env = "ZONEMESH_TOKEN",
        hide_env_values = true,
        conflicts_with = "token_file"
    )]
    pub token: Option<String>,
    /// File holding the bearer token.
    #[arg(global = true, long, env = "ZONEMESH_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// Output format.
    #[arg(global = true, long, short, value_enum, default_value = "table")]
    pub output: Output,
    /// When to colour tables.
    #[arg(global = true, long, value_enum, default_value = "auto")]
    pub color: ColorChoice,
    /// How long to wait for the aggregator.
    #[arg(global = true, long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// The queries.
#[derive(Debug, Clone, Subcommand)]
pub enum Query {
    /// Every node with its state and its figures inside its zone.
    Nodes {
        /// Only this zone's nodes.
        #[arg(long)]
        zone: Option<String>,
    },
    /// Zones and the figures between them.
    Zones,
    /// The open faults: which node, direction, zone link or path, of what kind, how badly, since
    /// when, and the paths that show it.
    Faults,
    /// One directed path's figures.
    Path {
        /// Source node.
        src: String,
        /// Destination node.
        dst: String,
    },
    /// One metric as a node-by-node matrix.
    Matrix {
        /// The zone whose nodes form the matrix (default: every node).
        #[arg(long)]
        zone: Option<String>,
        /// These nodes instead, comma-separated.
        #[arg(long, value_delimiter = ',')]
        nodes: Vec<String>,
        /// rtt, rtt_p99, loss or throughput.
        #[arg(long, default_value = "rtt")]
        metric: String,
    },
    /// Nodes best first.
    Rank {
        /// Rank this zone's nodes.
        #[arg(long)]
        zone: Option<String>,
        /// These candidates instead, comma-separated.
        #[arg(long, value_delimiter = ',')]
        candidates: Vec<String>,
        /// Nodes the job already runs on: candidates are scored by their paths to these.
        #[arg(long, value_delimiter = ',')]
        peers: Vec<String>,
        /// At most this many (0: all).
        #[arg(long, default_value_t = 0)]
        limit: u32,
    },
    /// Choose nodes for the workers of a job.
    Place {
        /// Number of workers.
        workers: u32,
        /// How strictly to keep to one zone.
        #[arg(long, value_enum, default_value = "prefer-one")]
        policy: Policy,
        /// Nodes never to use, comma-separated.
        #[arg(long, value_delimiter = ',')]
        exclude: Vec<String>,
        /// The job's collective: nodes and rank order are chosen for its predicted time.
        #[arg(long, value_enum)]
        collective: Option<CollectiveArg>,
        /// Bytes one iteration moves (the gradient size; for all-to-all, what each rank sends),
        /// a Kubernetes quantity such as 25Mi or 4M. Needed with --collective.
        #[arg(long)]
        bytes: Option<String>,
        /// Parameter servers (with --collective parameter-server; default 1).
        #[arg(long)]
        servers: Option<u32>,
        /// Also show up to this many runner-up placements with their predicted times.
        #[arg(long, default_value_t = 0)]
        alternatives: u32,
        /// Print an MPI hostfile in rank order (`host slots=N` lines, as Open MPI reads).
        #[arg(long)]
        hostfile: bool,
    },
    /// The measured tiers: zones, groups of near zones, the cluster, with the figures behind
    /// every cut.
    Tiers,
    /// What the aggregator's publisher writes to Kubernetes: --dry-run prints it, --delete
    /// removes everything zonemesh owns; or, with --slurm tree|block|yaml, the tiers as Slurm's
    /// topology file (--file, written only when it changes).
    Publish(crate::tiers::Publish),
}

/// `PlaceRequest.collective`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CollectiveArg {
    /// Ring all-reduce over the ranks in order.
    Ring,
    /// Reduce inside each zone, all-reduce across zones, broadcast inside each zone.
    Hierarchical,
    /// Parameter servers on the first ranks.
    ParameterServer,
    /// Every rank sends to every other.
    AllToAll,
}

/// `PlaceRequest.zone_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Policy {
    /// One zone when one can hold the job, else the fewest zones with the best links.
    PreferOne,
    /// One zone or fail.
    RequireOne,
    /// Any nodes; only the figures count.
    Any,
}

/// The job flags of `place`: the collective and its bytes (a Kubernetes quantity), both or
/// neither.
pub fn place_job(
    collective: Option<CollectiveArg>,
    bytes: Option<&str>,
) -> Result<(v1::Collective, u64), Failure> {
    let usage = |m: String| Failure::new(exit::USAGE, m);
    match (collective, bytes) {
        (None, None) => Ok((v1::Collective::Unspecified, 0)),
        (None, Some(_)) => Err(usage("--bytes needs --collective".into())),
        (Some(_), None) => Err(usage(
            "--collective needs --bytes (the bytes one iteration moves, such as 25Mi)".into(),
        )),
        (Some(c), Some(b)) => {
            let bytes =
                zonemesh_domain::parse_quantity(b).map_err(|e| usage(format!("--bytes: {e}")))?;
            let c = match c {
                CollectiveArg::Ring => v1::Collective::Ring,
                CollectiveArg::Hierarchical => v1::Collective::Hierarchical,
                CollectiveArg::ParameterServer => v1::Collective::ParameterServer,
                CollectiveArg::AllToAll => v1::Collective::AllToAll,
            };
            Ok((c, bytes))
        }
    }
}

/// A spinner on standard error while `work` runs, after a short delay and on a terminal only
/// (indicatif hides it elsewhere).
async fn with_progress<T>(what: &str, work: impl std::future::Future<Output = T>) -> T {
    let spinner =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    if spinner.is_hidden() {
        return work.await;
    }
    spinner.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {wide_msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    spinner.set_message(format!("{what}…"));
    let shown = spinner.clone();
    // Only for what takes a while: a quick answer leaves no trace.
    let delay = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        shown.enable_steady_tick(Duration::from_millis(100));
    });
    let out = work.await;
    delay.abort();
    spinner.finish_and_clear();
    out
}

/// Sets where colour goes for the whole process (`--color`, then anstream's rules for `auto`:
/// a terminal that supports colour, `NO_COLOR`, `CLICOLOR`, `CLICOLOR_FORCE`); whether stdout
/// gets colour.
pub fn color_stdout(choice: ColorChoice) -> bool {
    let choice = match choice {
        ColorChoice::Auto => anstream::ColorChoice::Auto,
        ColorChoice::Always => anstream::ColorChoice::Always,
        ColorChoice::Never => anstream::ColorChoice::Never,
    };
    choice.write_global();
    let color = anstream::AutoStream::choice(&std::io::stdout()) != anstream::ColorChoice::Never;
    // comfy-table colours through crossterm, which drops colour under NO_COLOR by itself: the
    // decision is made above (`--color always` beats NO_COLOR, as the convention allows).
    crossterm::style::force_color_output(color);
    color
}

impl Connection {
    fn style(&self) -> Style {
        let terminal = std::io::stdout().is_terminal();
        let color = color_stdout(self.color);
        let width = if terminal {
            terminal_size::terminal_size().map_or(100, |(w, _)| usize::from(w.0))
        } else {
            std::env::var("COLUMNS")
                .ok()
                .and_then(|c| c.parse().ok())
                .unwrap_or(usize::MAX)
        };
        Style { color, width }
    }

    fn authorization(
        &self,
    ) -> Result<Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>, Failure> {
        let token = match (&self.token, &self.token_file) {
            (Some(t), _) => t.trim().to_owned(),
            (None, Some(path)) => std::fs::read_to_string(path)
                .map_err(|e| {
                    Failure::new(exit::USAGE, format!("--token-file {}: {e}", path.display()))
                })?
                .trim()
                .to_owned(),
            (None, None) => return Ok(None),
        };
        format!("Bearer {token}")
            .parse()
            .map(Some)
            .map_err(|_| Failure::new(exit::USAGE, "--token: not a valid header value"))
    }

    /// The TLS settings for the aggregators' URLs (each checked against the flags).
    fn client_tls(&self) -> Result<zonemesh_tls::ClientTls, Failure> {
        let mut tls = None;
        for url in &self.aggregator {
            tls = Some(
                self.tls
                    .client_tls(url)
                    .map_err(|e| Failure::new(exit::USAGE, e.to_string()))?,
            );
        }
        tls.ok_or_else(|| Failure::new(exit::USAGE, "--aggregator: no URL given"))
    }

    async fn client(&self, target: &zonemesh_tls::Target) -> Result<Client, Failure> {
        let tls = target.tls(&self.client_tls()?);
        let header = self.authorization()?;
        let channel = with_progress(
            &format!("connecting to {}", target.url),
            zonemesh_tls::connect(&target.url, &tls, self.timeout),
        )
        .await
        .map_err(|e| {
            let status = if e.is_credentials() {
                exit::NO_PERMISSION
            } else {
                exit::UNAVAILABLE
            };
            Failure::new(status, e.to_string())
        })?;
        Ok(
            v1::topology_client::TopologyClient::with_interceptor(channel, Authorize(header))
                .max_decoding_message_size(256 << 20),
        )
    }
}

/// The Topology client of the queries.
type Client = v1::topology_client::TopologyClient<
    tonic::service::interceptor::InterceptedService<Channel, Authorize>,
>;

/// Puts the bearer token, if there is one, on every call.
#[derive(Debug, Clone)]
struct Authorize(Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>);

impl tonic::service::Interceptor for Authorize {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(h) = &self.0 {
            request.metadata_mut().insert("authorization", h.clone());
        }
        Ok(request)
    }
}

/// Calls `$rpc` of `$client` with `$request` under `$timeout`, with a spinner while it runs,
/// and returns its answer, or from the enclosing function the failure with its exit status. (A
/// macro: every RPC is a method of its own.)
macro_rules! call {
    ($client:expr, $timeout:expr, $what:expr, $rpc:ident, $request:expr) => {{
        let mut request = tonic::Request::new($request);
        request.set_timeout($timeout);
        with_progress($what, $client.$rpc(request))
            .await
            .map_err(|s| Failure::from_status($what, &s))?
            .into_inner()
    }};
}

fn print(connection: &Connection, value: impl Serialize, table: impl FnOnce(&Style) -> String) {
    match connection.output {
        // Serializing a wire answer to a String cannot fail: no maps with non-string keys.
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        ),
        Output::Yaml => {
            let value = serde_json::to_value(&value).unwrap_or_default();
            print!("{}", zonemesh_publish::yaml::documents([&value]));
        }
        Output::Table => {
            // The style first: it sets anstream's global choice (`--color`), which the stream
            // reads when it is made. Through anstream, escapes are stripped when colour is off,
            // whatever made them.
            let text = table(&connection.style());
            anstream::print!("{text}");
        }
    }
}

/// Runs one query and prints its answer.
pub async fn run(connection: &Connection, query: Query) -> Result<(), Failure> {
    // Flags first: a wrong one is a usage error whether or not the aggregator is up.
    match &query {
        Query::Matrix { metric, .. } => {
            metric_flag(metric)?;
        }
        Query::Place {
            collective, bytes, ..
        } => {
            place_job(*collective, bytes.as_deref())?;
        }
        _ => {}
    }
    let mut slurm = None;
    let publish = match &query {
        Query::Publish(p) => {
            slurm = crate::slurm::plan(&p.slurm, p.dry_run)?;
            if slurm.is_some() {
                None
            } else {
                match publish_settings(p).await? {
                    Some(settings) => Some(settings),
                    None => return Ok(()),
                }
            }
        }
        _ => None,
    };
    // Checked before anything is resolved or connected.
    connection.client_tls()?;
    connection.authorization()?;
    let targets = zonemesh_tls::targets(&connection.aggregator).await;
    let mut failure = None;
    for (i, target) in targets.iter().enumerate() {
        match run_at(
            connection,
            target,
            query.clone(),
            publish.as_ref(),
            slurm.as_ref(),
        )
        .await
        {
            Err(f) if f.status == exit::UNAVAILABLE && i + 1 < targets.len() => {
                eprintln!("zonemesh: {}; asking {}", f.message, targets[i + 1].url);
                failure = Some(f);
            }
            answered => return answered,
        }
    }
    Err(failure.unwrap_or_else(|| Failure::new(exit::USAGE, "--aggregator: no URL given")))
}

/// Runs one query against one aggregator and prints its answer.
async fn run_at(
    connection: &Connection,
    target: &zonemesh_tls::Target,
    query: Query,
    publish: Option<&zonemesh_publish::Settings>,
    slurm: Option<&crate::slurm::Plan>,
) -> Result<(), Failure> {
    let mut client = connection.client(target).await?;
    let timeout = connection.timeout;
    match query {
        Query::Nodes { zone } => {
            let answer = all_nodes(&mut client, timeout, zone.unwrap_or_default()).await?;
            print(connection, json::AsJson(&answer), |s| {
                render::nodes(&answer, s)
            });
        }
        Query::Zones => {
            let answer = all_zones(&mut client, timeout).await?;
            print(connection, json::AsJson(&answer), |s| {
                render::zones(&answer, s)
            });
        }
        Query::Faults => {
            let answer = call!(
                client,
                timeout,
                "ListFaults",
                list_faults,
                v1::ListFaultsRequest {}
            );
            print(connection, json::AsJson(&answer), |s| {
                render::faults(&answer, s)
            });
        }
        Query::Path { src, dst } => {
            let answer = call!(
                client,
                timeout,
                "GetPath",
                get_path,
                v1::GetPathRequest { src, dst }
            );
            print(connection, json::AsJson(&answer), |_| render::path(&answer));
        }
        Query::Matrix {
            zone,
            nodes,
            metric,
        } => {
            let request = v1::GetMatrixRequest {
                metric: metric_flag(&metric)? as i32,
                nodes,
                zone: zone.unwrap_or_default(),
                ..Default::default()
            };
            let answer = whole_matrix(&mut client, timeout, request).await?;
            print(connection, json::AsJson(&answer), |s| {
                render::matrix(&answer, s)
            });
        }
        Query::Rank {
            zone,
            candidates,
            peers,
            limit,
        } => {
            let answer = call!(
                client,
                timeout,
                "RankNodes",
                rank_nodes,
                v1::RankNodesRequest {
                    candidates,
                    zone: zone.unwrap_or_default(),
                    peers,
                    limit,
                    ..Default::default()
                }
            );
            print(connection, json::AsJson(&answer), |s| {
                render::ranking(&answer, s)
            });
        }
        Query::Place {
            workers,
            policy,
            exclude,
            collective,
            bytes,
            servers,
            alternatives,
            hostfile,
        } => {
            let zone_policy = match policy {
                Policy::PreferOne => v1::ZonePolicy::PreferOne,
                Policy::RequireOne => v1::ZonePolicy::RequireOne,
                Policy::Any => v1::ZonePolicy::Any,
            };
            let (collective, bytes_per_iteration) = place_job(collective, bytes.as_deref())?;
            let answer = call!(
                client,
                timeout,
                "Place",
                place,
                v1::PlaceRequest {
                    workers,
                    zone_policy: zone_policy as i32,
                    exclude,
                    collective: collective as i32,
                    bytes_per_iteration,
                    servers: servers.unwrap_or(0),
                    alternatives,
                    ..Default::default()
                }
            );
            if hostfile {
                print!("{}", render::hostfile(&answer));
            } else {
                print(connection, json::AsJson(&answer), |_| {
                    render::placement(&answer)
                });
            }
        }
        Query::Tiers => {
            let answer = call!(
                client,
                timeout,
                "GetTiers",
                get_tiers,
                v1::GetTiersRequest {}
            );
            print(connection, json::AsJson(&answer), |_| {
                crate::tiers::tree(&answer, zonemesh_common::time::unix_ms())
            });
        }
        Query::Publish(_) => {
            let answer = call!(
                client,
                timeout,
                "GetTiers",
                get_tiers,
                v1::GetTiersRequest {}
            );
            if let Some(plan) = slurm {
                let tiers = zonemesh_domain::Tiers::try_from(answer).map_err(|e| {
                    Failure::new(
                        exit::FAILURE,
                        format!("GetTiers answered invalid tiers: {e}"),
                    )
                })?;
                let mut unreachable = std::collections::BTreeSet::new();
                if plan.needs_node_states() {
                    let nodes = all_nodes(&mut client, timeout, String::new()).await?;
                    unreachable.extend(
                        nodes
                            .nodes
                            .into_iter()
                            .filter(|n| {
                                n.state == v1::NodeState::Down as i32
                                    || n.state == v1::NodeState::Unreachable as i32
                            })
                            .map(|n| n.name),
                    );
                }
                return crate::slurm::publish(plan, &tiers, unreachable);
            }
            let settings = publish.expect("set for publish");
            // The health labels come from the open faults.
            let faults = if settings
                .schedulers
                .contains(&zonemesh_publish::Scheduler::Health)
            {
                let answer = call!(
                    client,
                    timeout,
                    "ListFaults",
                    list_faults,
                    v1::ListFaultsRequest {}
                );
                zonemesh_domain::Faults::try_from(answer).map_err(|e| {
                    Failure::new(
                        exit::FAILURE,
                        format!("ListFaults answered invalid faults: {e}"),
                    )
                })?
            } else {
                zonemesh_domain::Faults::default()
            };
            print_dry_run(connection, answer, &faults, settings)?;
        }
    }
    Ok(())
}

/// `--metric`, or the usage error that names the metrics there are.
fn metric_flag(metric: &str) -> Result<v1::Metric, Failure> {
    json::parse_metric(metric).ok_or_else(|| {
        Failure::new(
            exit::USAGE,
            format!("--metric: {metric:?} is none of rtt, rtt_p99, loss, throughput"),
        )
    })
}

/// `publish`'s settings when it is to print what the aggregator writes (`--dry-run`); `None`
/// once `--delete` has removed it; a usage error without either.
async fn publish_settings(
    p: &crate::tiers::Publish,
) -> Result<Option<zonemesh_publish::Settings>, Failure> {
    let settings = p.settings()?;
    if p.delete {
        print!("{}", crate::tiers::delete(settings).await?);
        return Ok(None);
    }
    if !p.dry_run {
        return Err(Failure::new(
            exit::USAGE,
            "the aggregator publishes (--publish); give --dry-run to print what it writes, or --delete to remove it",
        ));
    }
    Ok(Some(settings))
}

// Long answers come in pages (each under the 4 MiB gRPC clients accept): the three below follow
// them.

/// Every node (of `zone`, if not empty).
async fn all_nodes(
    client: &mut Client,
    timeout: Duration,
    zone: String,
) -> Result<v1::ListNodesResponse, Failure> {
    let mut answer = v1::ListNodesResponse::default();
    let mut page_token = String::new();
    loop {
        let page = call!(
            client,
            timeout,
            "ListNodes",
            list_nodes,
            v1::ListNodesRequest {
                zone: zone.clone(),
                page_token,
                ..Default::default()
            }
        );
        answer.nodes.extend(page.nodes);
        if page.next_page_token.is_empty() {
            return Ok(answer);
        }
        page_token = page.next_page_token;
    }
}

/// Every zone and every zone link.
async fn all_zones(
    client: &mut Client,
    timeout: Duration,
) -> Result<v1::ListZonesResponse, Failure> {
    let mut answer = v1::ListZonesResponse::default();
    let mut page_token = String::new();
    loop {
        let page = call!(
            client,
            timeout,
            "ListZones",
            list_zones,
            v1::ListZonesRequest {
                page_token,
                ..Default::default()
            }
        );
        answer.zones = page.zones;
        answer.links.extend(page.links);
        if page.next_page_token.is_empty() {
            return Ok(answer);
        }
        page_token = page.next_page_token;
    }
}

/// Every row of the matrix `request` asks for.
async fn whole_matrix(
    client: &mut Client,
    timeout: Duration,
    request: v1::GetMatrixRequest,
) -> Result<v1::GetMatrixResponse, Failure> {
    let mut answer = v1::GetMatrixResponse::default();
    let mut page_token = String::new();
    loop {
        let page = call!(
            client,
            timeout,
            "GetMatrix",
            get_matrix,
            v1::GetMatrixRequest {
                page_token,
                ..request.clone()
            }
        );
        if page.first_row == 0 {
            answer = page.clone();
        } else if page.nodes != answer.nodes {
            return Err(Failure::new(
                exit::UNAVAILABLE,
                "GetMatrix: the matrix's nodes changed between its pages; try again",
            ));
        } else {
            answer.cells.extend(page.cells);
        }
        if page.next_page_token.is_empty() {
            return Ok(answer);
        }
        page_token = page.next_page_token;
    }
}

/// What the publisher would write for the tiers `answer`, as `publish --dry-run` prints it.
fn print_dry_run(
    connection: &Connection,
    answer: v1::GetTiersResponse,
    faults: &zonemesh_domain::Faults,
    settings: &zonemesh_publish::Settings,
) -> Result<(), Failure> {
    let tiers = zonemesh_domain::Tiers::try_from(answer).map_err(|e| {
        Failure::new(
            exit::FAILURE,
            format!("GetTiers answered invalid tiers: {e}"),
        )
    })?;
    let objects = crate::tiers::dry_run_objects(&tiers, faults, settings);
    match connection.output {
        Output::Yaml => print!("{}", zonemesh_publish::yaml::documents(&objects)),
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "apiVersion": "v1", "kind": "List", "items": objects,
            }))
            .unwrap_or_default()
        ),
        Output::Table => print!("{}", crate::tiers::dry_run_table(&objects)),
    }
    Ok(())
}
