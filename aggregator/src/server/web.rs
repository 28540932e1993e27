//! The web view on the HTTP port: the page (`GET /`, one self-contained file) and the JSON API it
//! reads (`/api/*`). The API answers through the Topology service itself, so a query from the
//! page is checked, timed and counted like the same query over gRPC; it needs read credentials
//! when authentication is on (the page asks for a bearer token then).
//!
//! | route | answer |
//! |---|---|
//! | `GET /api/zones` | `ListZones`: zones and zone-to-zone figures |
//! | `GET /api/nodes?zone=` | `ListNodes` |
//! | `GET /api/matrix?metric=rtt\|rtt_p99\|loss\|throughput&zone=&nodes=a,b` | `GetMatrix` |
//! | `GET /api/path?src=&dst=` | `GetPath` |
//! | `GET /api/rank?zone=&limit=&candidates=a,b&peers=c` | `RankNodes` |
//! | `POST /api/place` `{"workers":3,"zone_policy":"prefer_one","exclude":[]}` | `Place` |

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use tonic::Request;
use zonemesh_proto::json;
use zonemesh_proto::v1;
use zonemesh_proto::v1::topology_server::Topology as _;

use super::auth::{Guard, Need};
use super::topology::TopologyService;

/// The page.
const INDEX: &str = include_str!("web/index.html");

type Params = Query<HashMap<String, String>>;

/// The routes of the page and its API.
pub fn router(topology: TopologyService, guard: Arc<Guard>) -> Router {
    let api = Router::new()
        .route("/api/zones", get(zones))
        .route("/api/nodes", get(nodes))
        .route("/api/matrix", get(matrix))
        .route("/api/path", get(path))
        .route("/api/rank", get(rank))
        .route("/api/place", post(place))
        .with_state(topology)
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

/// A Topology answer as JSON, or the status as an HTTP error with its message.
fn answer<T>(result: Result<tonic::Response<T>, tonic::Status>) -> Response
where
    for<'a> json::AsJson<'a, T>: serde::Serialize,
{
    match result {
        Ok(r) => Json(json::AsJson(r.get_ref())).into_response(),
        Err(status) => {
            let code = match status.code() {
                tonic::Code::InvalidArgument => StatusCode::BAD_REQUEST,
                tonic::Code::NotFound => StatusCode::NOT_FOUND,
                tonic::Code::FailedPrecondition => StatusCode::CONFLICT,
                tonic::Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            let body = serde_json::json!({ "error": status.message() });
            (code, Json(body)).into_response()
        }
    }
}

fn bad_request(message: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(serde_json::json!({ "error": message })),
    )
        .into_response()
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

async fn zones(State(t): State<TopologyService>) -> Response {
    answer(t.list_zones(Request::new(v1::ListZonesRequest {})).await)
}

async fn nodes(State(t): State<TopologyService>, Query(p): Params) -> Response {
    let request = v1::ListNodesRequest {
        zone: text(&p, "zone"),
    };
    answer(t.list_nodes(Request::new(request)).await)
}

async fn matrix(State(t): State<TopologyService>, Query(p): Params) -> Response {
    let name = p.get("metric").map_or("rtt", String::as_str);
    let Some(metric) = json::parse_metric(name) else {
        return bad_request(format!(
            "metric: {name:?} is none of rtt, rtt_p99, loss, throughput"
        ));
    };
    let request = v1::GetMatrixRequest {
        metric: metric as i32,
        nodes: list(&p, "nodes"),
        zone: text(&p, "zone"),
    };
    answer(t.get_matrix(Request::new(request)).await)
}

async fn path(State(t): State<TopologyService>, Query(p): Params) -> Response {
    let request = v1::GetPathRequest {
        src: text(&p, "src"),
        dst: text(&p, "dst"),
    };
    answer(t.get_path(Request::new(request)).await)
}

async fn rank(State(t): State<TopologyService>, Query(p): Params) -> Response {
    let limit = match p.get("limit").map(|l| l.parse::<u32>()) {
        None => 0,
        Some(Ok(l)) => l,
        Some(Err(_)) => return bad_request("limit: not a whole number".into()),
    };
    let request = v1::RankNodesRequest {
        candidates: list(&p, "candidates"),
        zone: text(&p, "zone"),
        peers: list(&p, "peers"),
        limit,
        ..Default::default()
    };
    answer(t.rank_nodes(Request::new(request)).await)
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
}

async fn place(State(t): State<TopologyService>, body: axum::body::Bytes) -> Response {
    let body: PlaceBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => return bad_request(format!("body: {e}")),
    };
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
            return bad_request(format!(
                "zone_policy: {other:?} is none of prefer_one, require_one, any"
            ));
        }
    };
    let request = v1::PlaceRequest {
        workers: body.workers,
        zone_policy: policy as i32,
        exclude: body.exclude,
        ..Default::default()
    };
    answer(t.place(Request::new(request)).await)
}
