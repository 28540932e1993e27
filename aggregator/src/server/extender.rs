//! The kube-scheduler extender on the aggregator's HTTP port: `POST /extender/filter` and
//! `POST /extender/prioritize` (`urlPrefix: http://<aggregator>:7401/extender`, verbs `filter`
//! and `prioritize`). The verbs run as queries on the owner task (see
//! [`crate::engine::extender`]); the memory of placed jobs sits behind a mutex that is held only
//! inside those queries, never across an `.await`.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use zonemesh_proto::domain::UnixMs;

use super::auth::{Guard, Need};
use super::core::Core;
use super::metrics::Metrics;
use crate::engine::Topology;
use crate::engine::extender::{ExtenderArgs, Jobs};

/// The extender's state.
#[derive(Debug, Clone)]
pub struct Extender {
    core: Core,
    metrics: Arc<Metrics>,
    jobs: Arc<Mutex<Jobs>>,
}

impl Extender {
    /// An extender over `core` that remembers jobs for `job_ttl_ms` after their last pod.
    pub fn new(core: Core, metrics: Arc<Metrics>, job_ttl_ms: i64) -> Self {
        Self {
            core,
            metrics,
            jobs: Arc::new(Mutex::new(Jobs::new(job_ttl_ms))),
        }
    }

    /// Its routes, for the callers `guard` lets schedule.
    pub fn router(self, guard: Arc<Guard>) -> Router {
        Router::new()
            .route("/extender/filter", post(filter))
            .route("/extender/prioritize", post(prioritize))
            .with_state(self)
            .layer(axum::middleware::from_fn(move |request, next| {
                super::auth::http_guard(guard.clone(), "extender", Need::Schedule, request, next)
            }))
    }

    async fn run<T: serde::Serialize + Send + 'static>(
        &self,
        verb: &'static str,
        body: &[u8],
        f: impl FnOnce(&Topology, &Mutex<Jobs>, &ExtenderArgs, UnixMs) -> Result<T, String>
        + Send
        + 'static,
    ) -> Response {
        let started = Instant::now();
        let args: ExtenderArgs = match serde_json::from_slice(body) {
            Ok(a) => a,
            Err(e) => {
                self.metrics
                    .observe_query(verb, started.elapsed().as_secs_f64(), false);
                return (
                    StatusCode::BAD_REQUEST,
                    format!("{verb}: the body is not ExtenderArgs JSON: {e}\n"),
                )
                    .into_response();
            }
        };
        let jobs = self.jobs.clone();
        let result = self.core.query(move |t, now| f(t, &jobs, &args, now)).await;
        let ok = matches!(result, Ok(Ok(_)));
        self.metrics
            .observe_query(verb, started.elapsed().as_secs_f64(), ok);
        match result {
            Ok(Ok(answer)) => Json(answer).into_response(),
            Ok(Err(message)) => {
                tracing::warn!(verb, "extender request refused: {message}");
                (StatusCode::BAD_REQUEST, format!("{message}\n")).into_response()
            }
            Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
        }
    }
}

async fn filter(State(x): State<Extender>, body: axum::body::Bytes) -> Response {
    x.run("ExtenderFilter", &body, |t, jobs, args, now| {
        let mut jobs = jobs.lock().unwrap_or_else(|e| e.into_inner());
        // A request the verb cannot answer is an `Error` in the result, as the protocol has it.
        Ok(match t.extender_filter(args, &mut jobs, now) {
            Ok(result) => result,
            Err(bad) => crate::engine::extender::FilterResult {
                error: format!("zonemesh: {bad}"),
                ..Default::default()
            },
        })
    })
    .await
}

async fn prioritize(State(x): State<Extender>, body: axum::body::Bytes) -> Response {
    x.run("ExtenderPrioritize", &body, |t, jobs, args, now| {
        let jobs = jobs.lock().unwrap_or_else(|e| e.into_inner());
        t.extender_prioritize(args, &jobs, now)
            .map_err(|bad| format!("zonemesh: {bad}"))
    })
    .await
}
