//! Extender calls that reach a replica that does not lead go to the leader, where the job
//! memory lives: the body as it came, the caller's `Authorization` header, and the leader's
//! answer as it is. Plain HTTP only (`--advertise-url http://…`).

use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// How long a forwarded call may take (kube-scheduler's extender timeout is 5 s by default).
const FORWARD_TIMEOUT: Duration = Duration::from_secs(4);

/// The client that forwards.
#[derive(Debug, Clone)]
pub struct Forwarder {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Default for Forwarder {
    fn default() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(1)));
        Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
        }
    }
}

impl Forwarder {
    /// POSTs `body` to `path` of the replica at `base` (`http://host:port`), with the caller's
    /// `authorization`; the answer, or why there is none.
    pub async fn post(
        &self,
        base: &str,
        path: &str,
        body: Bytes,
        authorization: Option<HeaderValue>,
    ) -> Result<Response, String> {
        let mut request = Request::post(format!("{}{path}", base.trim_end_matches('/')))
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(a) = authorization {
            request = request.header(header::AUTHORIZATION, a);
        }
        let request = request.body(Full::new(body)).map_err(|e| e.to_string())?;
        let answer = tokio::time::timeout(FORWARD_TIMEOUT, async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| e.to_string())?;
            let status = response.status();
            let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            Ok::<_, String>((status, content_type, body))
        })
        .await
        .map_err(|_| format!("no answer within {FORWARD_TIMEOUT:?}"))??;
        let (status, content_type, body) = answer;
        if status == StatusCode::SERVICE_UNAVAILABLE {
            return Err(format!("the leader answered {status}"));
        }
        let mut response = (status, body).into_response();
        if let Some(c) = content_type {
            response.headers_mut().insert(header::CONTENT_TYPE, c);
        }
        Ok(response)
    }
}
