//! Extender calls that reach a replica that does not lead go to the leader, where the job
//! memory lives: the body as it came, the caller's `Authorization` header, and the leader's
//! answer as it is. A leader that advertises `https://` is reached over TLS: its certificate
//! verified against `--peer-ca`, this replica presenting `--peer-cert` when set (the leader's
//! guard sees that identity; the caller's was checked here, and its `Authorization` header goes
//! along).

use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// How long a forwarded call may take (kube-scheduler's extender timeout is 5 s by default).
const FORWARD_TIMEOUT: Duration = Duration::from_secs(4);

/// The client that forwards.
#[derive(Debug, Clone)]
pub struct Forwarder {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl Default for Forwarder {
    /// Plain HTTP; an `https://` leader is refused (no CA to verify it with).
    fn default() -> Self {
        Self::new(None)
    }
}

impl Forwarder {
    /// A forwarder that reaches `https://` leaders with `tls` (HTTP/1.1: its ALPN protocols are
    /// the connector's to set), and `http://` ones in the clear.
    pub fn new(tls: Option<rustls::ClientConfig>) -> Self {
        let mut tls = tls.unwrap_or_else(|| {
            rustls::ClientConfig::builder_with_provider(zonemesh_tls::provider())
                .with_safe_default_protocol_versions()
                .expect("the provider's default protocol versions")
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        });
        tls.alpn_protocols.clear();
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.set_connect_timeout(Some(Duration::from_secs(1)));
        http.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
        }
    }

    /// POSTs `body` to `path` of the replica at `base` (`http(s)://host:port`), with the caller's
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
