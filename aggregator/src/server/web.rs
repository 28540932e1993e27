//! The web view on the HTTP port: the page (`GET /`, one self-contained file) and the JSON API it
//! reads (`/api/*`). The API is a thin adapter over the query layer ([`Queries`]), as the gRPC
//! Topology service is: a query from the page is checked (by the wire's own conversions, so that
//! a refusal names the same field), timed and counted like the same query over gRPC, and its
//! errors take their HTTP status from the one table (`crate::ErrorKind`). It needs read
//! credentials when authentication is on (the page asks for a bearer token then).
//!
//! | route | answer |
//! |---|---|
//! | `GET /api/zones` | `ListZones`: zones and zone-to-zone figures |
//! | `GET /api/nodes?zone=` | `ListNodes` |
//! | `GET /api/faults` | `ListFaults`: the open faults |
//! | `GET /api/matrix?metric=rtt\|rtt_p99\|loss\|throughput&zone=&nodes=a,b` | `GetMatrix` |
//! | `GET /api/path?src=&dst=` | `GetPath` |
//! | `GET /api/rank?zone=&limit=&candidates=a,b&peers=c` | `RankNodes` |
//! | `POST /api/place` `{"workers":3,"zone_policy":"prefer_one","exclude":[],"collective":"ring","bytes_per_iteration":"25Mi","servers":0,"alternatives":2}` (the job's fields optional) | `Place` |

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use zonemesh_domain::{
    Collective, FieldError, Matrix, MatrixQuery, NodeName, Nodes, NodesQuery, PlaceQuery,
    RankQuery, Zones, ZonesQuery, parse_quantity,
};
use zonemesh_proto::json;
use zonemesh_proto::v1;

use super::auth::{Guard, Need};
use super::query::Queries;
use crate::Error;

/// The page.
const INDEX: &str = include_str!("web/index.html");

type Params = Query<HashMap<String, String>>;

/// The routes of the page and its API.
pub fn router(queries: Queries, guard: Arc<Guard>) -> Router {
    let api = Router::new()
        .route("/api/zones", get(zones))
        .route("/api/nodes", get(nodes))
        .route("/api/faults", get(faults))
        .route("/api/matrix", get(matrix))
        .route("/api/path", get(path))
        .route("/api/rank", get(rank))
        .route("/api/place", post(place))
        .with_state(queries)
        .layer(axum::middleware::from_fn(move |request, next| {
            super::auth::http_guard(
                guard.clone(),
                super::metrics::Surface::Query,
                Need::Read,
                request,
                next,
            )
        }));
    Router::new()
        .route(
            "/",
            get(|| async {
                (
                    [
                        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                        (header::CACHE_CONTROL, "no-cache"),
                    ],
                    INDEX,
                )
            }),
        )
        .merge(api)
}

/// A domain answer as the JSON view of its wire answer, or the error as its HTTP status with
/// its message.
fn answer<D, W>(result: Result<D, Error>) -> Response
where
    W: From<D>,
    for<'a> json::AsJson<'a, W>: serde::Serialize,
{
    match result {
        Ok(a) => Json(json::AsJson(&W::from(a))).into_response(),
        Err(e) => {
            let body = serde_json::json!({ "error": e.to_string() });
            (e.http_status(), Json(body)).into_response()
        }
    }
}

/// A request the edge refuses: 400 with the field and the problem.
fn refused(e: FieldError) -> Error {
    Error::InvalidArgument(e)
}

fn list(params: &HashMap<String, String>, key: &str) -> Vec<String> {
    params
        .get(key)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn text(params: &HashMap<String, String>, key: &str) -> String {
    params.get(key).cloned().unwrap_or_default()
}

// The web API answers whole: it follows the answers' pages in the process (the page caps are
// for clients that receive at most 4 MiB; the page asks for large answers on purpose).

/// Pages one view may take before the web API gives up (a matrix whose nodes keep changing
/// between pages starts over).
const MAX_PAGES: usize = 1_000;

/// More pages than the web API follows.
fn too_many_pages(rpc: &str) -> Error {
    Error::TryAgain(format!("{rpc}: more pages than the web API follows"))
}

async fn all_zones(q: &Queries) -> Result<Zones, Error> {
    let mut query = ZonesQuery::try_from(v1::ListZonesRequest::default()).map_err(refused)?;
    let mut whole = Zones::default();
    for _ in 0..MAX_PAGES {
        let page = q.list_zones(query.clone()).await?;
        whole.zones = page.zones;
        whole.links.extend(page.links);
        match page.next_offset {
            None => return Ok(whole),
            Some(next) => query.page.offset = next,
        }
    }
    Err(too_many_pages("ListZones"))
}

async fn zones(State(q): State<Queries>) -> Response {
    answer::<_, v1::ListZonesResponse>(all_zones(&q).await)
}

async fn faults(State(q): State<Queries>) -> Response {
    answer::<_, v1::ListFaultsResponse>(q.faults().map(|f| (*f).clone()))
}

async fn all_nodes(q: &Queries, zone: String) -> Result<Nodes, Error> {
    let request = v1::ListNodesRequest {
        zone,
        ..Default::default()
    };
    let mut query = NodesQuery::try_from(request).map_err(refused)?;
    let mut whole = Nodes::default();
    for _ in 0..MAX_PAGES {
        let page = q.list_nodes(query.clone()).await?;
        whole.nodes.extend(page.nodes);
        match page.next_offset {
            None => return Ok(whole),
            Some(next) => query.page.offset = next,
        }
    }
    Err(too_many_pages("ListNodes"))
}

async fn nodes(State(q): State<Queries>, Query(p): Params) -> Response {
    answer::<_, v1::ListNodesResponse>(all_nodes(&q, text(&p, "zone")).await)
}

async fn whole_matrix(q: &Queries, first: MatrixQuery) -> Result<Matrix, Error> {
    let mut query = first.clone();
    let mut whole: Option<Matrix> = None;
    for _ in 0..MAX_PAGES {
        let page = q.matrix(query.clone()).await?;
        let next = page.next_offset;
        match &mut whole {
            // The rows that follow, of the same nodes.
            Some(w) if page.first_row != 0 && page.nodes == w.nodes => w.cells.extend(page.cells),
            // The nodes changed between pages: start over from the first.
            Some(_) | None if page.first_row != 0 => {
                whole = None;
                query = first.clone();
                continue;
            }
            _ => whole = Some(page),
        }
        match next {
            None => {
                let mut w = whole.expect("a page was kept");
                w.next_offset = None;
                return Ok(w);
            }
            Some(next) => query.page.offset = next,
        }
    }
    Err(too_many_pages("GetMatrix"))
}

async fn matrix(State(q): State<Queries>, Query(p): Params) -> Response {
    let name = p.get("metric").map_or("rtt", String::as_str);
    let Some(metric) = json::parse_metric(name) else {
        let problem = format!("{name:?} is none of rtt, rtt_p99, loss, throughput");
        return answer::<Matrix, v1::GetMatrixResponse>(Err(refused(FieldError::new(
            "metric", problem,
        ))));
    };
    let request = v1::GetMatrixRequest {
        metric: metric as i32,
        nodes: list(&p, "nodes"),
        zone: text(&p, "zone"),
        ..Default::default()
    };
    let result = match MatrixQuery::try_from(request) {
        Ok(query) => whole_matrix(&q, query).await,
        Err(e) => Err(refused(e)),
    };
    answer::<_, v1::GetMatrixResponse>(result)
}

async fn path(State(q): State<Queries>, Query(p): Params) -> Response {
    let names = NodeName::parse("src", text(&p, "src"))
        .and_then(|src| Ok((src, NodeName::parse("dst", text(&p, "dst"))?)));
    let result = match names {
        Ok((src, dst)) => q.path(src, dst).await,
        Err(e) => Err(refused(e)),
    };
    answer::<_, v1::GetPathResponse>(result)
}

async fn rank(State(q): State<Queries>, Query(p): Params) -> Response {
    let limit = match p.get("limit").map(|l| l.parse::<u32>()) {
        None => 0,
        Some(Ok(l)) => l,
        Some(Err(_)) => {
            let e = FieldError::new("limit", "not a whole number");
            return answer::<zonemesh_domain::Ranking, v1::RankNodesResponse>(Err(refused(e)));
        }
    };
    let request = v1::RankNodesRequest {
        candidates: list(&p, "candidates"),
        zone: text(&p, "zone"),
        peers: list(&p, "peers"),
        limit,
        ..Default::default()
    };
    let result = match RankQuery::try_from(request) {
        Ok(query) => q.rank(query).await,
        Err(e) => Err(refused(e)),
    };
    answer::<_, v1::RankNodesResponse>(result)
}

/// The body of `POST /api/place`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PlaceBody {
    workers: u32,
    #[serde(default)]
    zone_policy: Option<String>,
    #[serde(default)]
    exclude: Vec<String>,
    /// The job's collective (`ring`, `hierarchical`, `parameter-server`, `all-to-all`).
    #[serde(default)]
    collective: Option<String>,
    /// Bytes each rank contributes per iteration: a Kubernetes quantity (`25Mi`) or a number.
    #[serde(default)]
    bytes_per_iteration: Option<serde_json::Value>,
    /// Parameter servers (a parameter-server collective only; 0 or absent: one).
    #[serde(default)]
    servers: u32,
    /// Runner-up placements to answer with.
    #[serde(default)]
    alternatives: u32,
}

/// The body as a checked `Place` query.
fn place_query(body: &[u8]) -> Result<PlaceQuery, FieldError> {
    let body: PlaceBody =
        serde_json::from_slice(body).map_err(|e| FieldError::new("body", e.to_string()))?;
    let policy = match body
        .zone_policy
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("prefer_one") => v1::ZonePolicy::PreferOne,
        Some("require_one") => v1::ZonePolicy::RequireOne,
        Some("any") => v1::ZonePolicy::Any,
        Some(other) => {
            return Err(FieldError::new(
                "zone_policy",
                format!("{other:?} is none of prefer_one, require_one, any"),
            ));
        }
    };
    let collective = match body.collective.as_deref().map(str::trim) {
        None | Some("") => {
            if body.servers > 0 {
                return Err(FieldError::new("servers", "servers without a collective"));
            }
            v1::Collective::Unspecified
        }
        Some(name) => match Collective::parse("collective", name, "servers", body.servers)? {
            Collective::RingAllReduce => v1::Collective::Ring,
            Collective::HierarchicalAllReduce => v1::Collective::Hierarchical,
            Collective::ParameterServer { .. } => v1::Collective::ParameterServer,
            Collective::AllToAll => v1::Collective::AllToAll,
        },
    };
    let bytes_per_iteration = match &body.bytes_per_iteration {
        None | Some(serde_json::Value::Null) => 0,
        Some(serde_json::Value::String(q)) if q.trim().is_empty() => 0,
        Some(serde_json::Value::String(q)) => {
            parse_quantity(q).map_err(|e| FieldError::new("bytes_per_iteration", e))?
        }
        Some(serde_json::Value::Number(n)) => n.as_u64().ok_or_else(|| {
            FieldError::new(
                "bytes_per_iteration",
                format!("{n} is not a whole number of bytes"),
            )
        })?,
        Some(other) => {
            return Err(FieldError::new(
                "bytes_per_iteration",
                format!("{other} is neither a quantity (\"25Mi\") nor a number"),
            ));
        }
    };
    PlaceQuery::try_from(v1::PlaceRequest {
        workers: body.workers,
        zone_policy: policy as i32,
        exclude: body.exclude,
        collective: collective as i32,
        bytes_per_iteration,
        servers: body.servers,
        alternatives: body.alternatives,
        ..Default::default()
    })
}

async fn place(State(q): State<Queries>, body: axum::body::Bytes) -> Response {
    let result = match place_query(&body) {
        Ok(query) => q.place(query).await,
        Err(e) => Err(refused(e)),
    };
    answer::<_, v1::PlaceResponse>(result)
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;

    /// A damaged store or the server's own fault is a 500, which clients do not retry; only
    /// what may pass is a 503; bad input a 400 that names the field.
    #[test]
    fn errors_take_their_status_from_the_one_table() {
        let corrupt = Error::Corrupt {
            path: "/data".into(),
            key: "n/a".into(),
            reason: crate::store::codec::CodecError::UnknownKey,
        };
        let cases = [
            (corrupt, StatusCode::INTERNAL_SERVER_ERROR),
            (
                Error::Internal("a query panicked".into()),
                StatusCode::INTERNAL_SERVER_ERROR,
            ),
            (Error::ShuttingDown, StatusCode::SERVICE_UNAVAILABLE),
            (
                refused(FieldError::new("zone", "empty")),
                StatusCode::BAD_REQUEST,
            ),
        ];
        for (error, want) in cases {
            let text = error.to_string();
            let response = answer::<Zones, v1::ListZonesResponse>(Err(error));
            assert_eq!(response.status(), want, "{text}");
        }
        let ok = answer::<_, v1::ListZonesResponse>(Ok(Zones::default()));
        assert_eq!(ok.status(), StatusCode::OK);
    }

    #[test]
    fn a_place_body_is_checked_field_by_field() {
        let cases = [
            (r#"{"workers":3}"#, None),
            (r#"{"workers":3,"zone_policy":"ANY"}"#, None),
            (r#"{"workers":3,"zone_policy":"two"}"#, Some("zone_policy")),
            (r#"{"workers":3,"nodes":[]}"#, Some("body")),
            (
                r#"{"workers":3,"exclude":["Bad_Name"]}"#,
                Some("exclude[0]"),
            ),
            (
                r#"{"workers":4,"collective":"ring","bytes_per_iteration":"25Mi"}"#,
                None,
            ),
            (
                r#"{"workers":4,"collective":"parameter-server","bytes_per_iteration":1000,"servers":2,"alternatives":3}"#,
                None,
            ),
            (
                r#"{"workers":4,"collective":"tree","bytes_per_iteration":"1Mi"}"#,
                Some("collective"),
            ),
            (
                r#"{"workers":4,"collective":"ring","bytes_per_iteration":"25MB"}"#,
                Some("bytes_per_iteration"),
            ),
            (
                r#"{"workers":4,"collective":"ring","bytes_per_iteration":-1}"#,
                Some("bytes_per_iteration"),
            ),
            (
                r#"{"workers":4,"collective":"ring","bytes_per_iteration":"1Mi","servers":2}"#,
                Some("servers"),
            ),
            (r#"{"workers":4,"servers":2}"#, Some("servers")),
        ];
        for (body, field) in cases {
            let got = place_query(body.as_bytes());
            assert_eq!(
                got.as_ref().err().map(FieldError::field),
                field,
                "{body}: {got:?}"
            );
        }
        // The job arrives whole: 25Mi is 26,214,400 bytes.
        let q = place_query(
            br#"{"workers":4,"collective":"all-to-all","bytes_per_iteration":"25Mi","alternatives":2}"#,
        )
        .unwrap();
        let job = q.job.expect("a job");
        assert_eq!(job.collective, Collective::AllToAll);
        assert_eq!(job.bytes_per_iteration, 25 << 20);
        assert_eq!(q.alternatives, 2);
    }
}
