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
use serde_json::Value;
use tonic::{Request, Status};
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
            super::auth::http_guard(guard.clone(), "query", Need::Read, request, next)
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
fn answer<T>(result: Result<tonic::Response<T>, tonic::Status>, view: fn(&T) -> Value) -> Response {
    match result {
        Ok(r) => Json(view(r.get_ref())).into_response(),
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

// The web API answers whole: it follows the gRPC answers' pages in the process (the page caps
// are for clients that receive at most 4 MiB; the page asks for large answers on purpose).

/// Pages one view may take before the web API gives up (a matrix whose nodes keep changing
/// between pages starts over).
const MAX_PAGES: usize = 1_000;

async fn all_zones(t: &TopologyService) -> Result<tonic::Response<v1::ListZonesResponse>, Status> {
    let mut whole = v1::ListZonesResponse::default();
    let mut token = String::new();
    for _ in 0..MAX_PAGES {
        let page = t
            .list_zones(Request::new(v1::ListZonesRequest {
                page_token: token,
                ..Default::default()
            }))
            .await?
            .into_inner();
        whole.zones = page.zones;
        whole.links.extend(page.links);
        if page.next_page_token.is_empty() {
            return Ok(tonic::Response::new(whole));
        }
        token = page.next_page_token;
    }
    Err(Status::unavailable(
        "ListZones: more pages than the web API follows",
    ))
}

async fn zones(State(t): State<TopologyService>) -> Response {
    answer(all_zones(&t).await, json::zones)
}

async fn all_nodes(
    t: &TopologyService,
    zone: String,
) -> Result<tonic::Response<v1::ListNodesResponse>, Status> {
    let mut whole = v1::ListNodesResponse::default();
    let mut token = String::new();
    for _ in 0..MAX_PAGES {
        let page = t
            .list_nodes(Request::new(v1::ListNodesRequest {
                zone: zone.clone(),
                page_token: token,
                ..Default::default()
            }))
            .await?
            .into_inner();
        whole.nodes.extend(page.nodes);
        if page.next_page_token.is_empty() {
            return Ok(tonic::Response::new(whole));
        }
        token = page.next_page_token;
    }
    Err(Status::unavailable(
        "ListNodes: more pages than the web API follows",
    ))
}

async fn nodes(State(t): State<TopologyService>, Query(p): Params) -> Response {
    answer(all_nodes(&t, text(&p, "zone")).await, json::nodes)
}

async fn whole_matrix(
    t: &TopologyService,
    request: v1::GetMatrixRequest,
) -> Result<tonic::Response<v1::GetMatrixResponse>, Status> {
    let mut whole = v1::GetMatrixResponse::default();
    let mut token = String::new();
    for _ in 0..MAX_PAGES {
        let page = t
            .get_matrix(Request::new(v1::GetMatrixRequest {
                page_token: token,
                ..request.clone()
            }))
            .await?
            .into_inner();
        if page.first_row == 0 || page.nodes != whole.nodes {
            // The first page, or the nodes changed between pages: start over from this one.
            if page.first_row != 0 {
                token = String::new();
                continue;
            }
            whole = v1::GetMatrixResponse {
                next_page_token: String::new(),
                ..page.clone()
            };
        } else {
            whole.cells.extend(page.cells);
        }
        if page.next_page_token.is_empty() {
            return Ok(tonic::Response::new(whole));
        }
        token = page.next_page_token;
    }
    Err(Status::unavailable(
        "GetMatrix: more pages than the web API follows",
    ))
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
        ..Default::default()
    };
    answer(whole_matrix(&t, request).await, json::matrix)
}

async fn path(State(t): State<TopologyService>, Query(p): Params) -> Response {
    let request = v1::GetPathRequest {
        src: text(&p, "src"),
        dst: text(&p, "dst"),
    };
    answer(t.get_path(Request::new(request)).await, json::path)
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
    answer(t.rank_nodes(Request::new(request)).await, json::rank)
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
    answer(t.place(Request::new(request)).await, json::place)
}
