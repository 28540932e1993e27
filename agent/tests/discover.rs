//! Zone discovery against a recorded Node object served locally, over HTTPS with a certificate of
//! its own (as the API server's), checking the service-account token it is sent: kube-rs's client
//! over real sockets and real TLS, so that the CA and token settings are what is tested.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use zonemesh_agent::Error;
use zonemesh_agent::discover::{KubeApi, Labels, Source, node_labels, zone};
use zonemesh_domain::ZoneName;

const NODE: &str = "gke-train-pool-a-7f3c9b21-x2kq";
const TOKEN: &str = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.test-token";

fn recorded_node() -> Vec<u8> {
    std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/node.json")).unwrap()
}

fn labels() -> Labels {
    Labels {
        zone: "topology.kubernetes.io/zone".into(),
        region: "topology.kubernetes.io/region".into(),
    }
}

/// A one-route API server: `GET /api/v1/nodes/<NODE>` with the right token gets the recorded
/// Node, anything else a 404 or 401 as the real one answers. Returns its URL, the CA to trust
/// (PEM) and a count of the requests it served.
async fn api_server(tls: bool) -> (String, Vec<u8>, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let ca_pem = cert.cert.pem().into_bytes();
    let acceptor = tls.then(|| {
        let key = rustls_pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .unwrap();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    });
    let served = Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let count = count.clone();
            tokio::spawn(async move {
                match acceptor {
                    Some(a) => {
                        if let Ok(s) = a.accept(tcp).await {
                            answer(s, &count).await;
                        }
                    }
                    None => answer(tcp, &count).await,
                }
            });
        }
    });
    let scheme = if tls { "https" } else { "http" };
    (format!("{scheme}://localhost:{port}"), ca_pem, served)
}

async fn answer<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut s: S,
    count: &AtomicUsize,
) {
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
    count.fetch_add(1, Ordering::Relaxed);
    let text = String::from_utf8_lossy(&request).to_lowercase();
    let (status, body) =
        if !text.contains(&format!("authorization: bearer {}", TOKEN.to_lowercase())) {
            (
                "401 Unauthorized",
                br#"{"kind":"Status","code":401}"#.to_vec(),
            )
        } else if text.starts_with(&format!("get /api/v1/nodes/{NODE} ")) {
            ("200 OK", recorded_node())
        } else if text.starts_with("get /api/v1/nodes/not-a-node ") {
            // A server that answers with something else than a Node.
            (
                "200 OK",
                br#"{"kind":"Status","apiVersion":"v1","status":"Success"}"#.to_vec(),
            )
        } else {
            (
                "404 Not Found",
                br#"{"kind":"Status","reason":"NotFound","code":404}"#.to_vec(),
            )
        };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(head.as_bytes()).await;
    let _ = s.write_all(&body).await;
    let _ = s.shutdown().await;
}

fn zone_name(z: &str) -> ZoneName {
    ZoneName::parse("zone", z).unwrap()
}

#[tokio::test]
async fn the_node_object_gives_zone_and_region_over_https_with_the_token() {
    let (url, ca, served) = api_server(true).await;
    let api = KubeApi {
        url,
        token: Some(TOKEN.into()),
        ca_pem: Some(ca),
    };
    let labels = node_labels(&api, NODE).await.unwrap();
    assert_eq!(labels["cloud.google.com/gke-nodepool"], "train-pool-a");
    let (z, r, source) = zone(
        NODE,
        (None, None),
        (None, None),
        Some(&api),
        &self::labels(),
    )
    .await;
    assert_eq!(z, Some(zone_name("europe-west4-a")));
    assert_eq!(r, Some(zone_name("europe-west4")));
    assert_eq!(source, Source::NodeObject);
    assert_eq!(served.load(Ordering::Relaxed), 2);
}

#[tokio::test]
async fn the_flag_then_the_pod_label_come_first_and_the_api_is_not_asked() {
    let (url, ca, served) = api_server(true).await;
    let api = KubeApi {
        url,
        token: Some(TOKEN.into()),
        ca_pem: Some(ca),
    };
    let flag = (Some(zone_name("rack-7")), None);
    let pod = (
        Some(zone_name("europe-west4-b")),
        Some(zone_name("europe-west4")),
    );
    let (z, r, s) = zone(NODE, flag.clone(), pod.clone(), Some(&api), &labels()).await;
    assert_eq!(
        (z, r, s),
        (
            Some(zone_name("rack-7")),
            Some(zone_name("europe-west4")),
            Source::Flag
        )
    );
    let (z, _, s) = zone(NODE, (None, None), pod, Some(&api), &labels()).await;
    assert_eq!(
        (z, s),
        (Some(zone_name("europe-west4-b")), Source::PodLabel)
    );
    assert_eq!(served.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn failures_leave_the_zone_unknown_with_a_reason() {
    let (url, ca, _) = api_server(true).await;
    // Another node: 404, named in the error.
    let api = KubeApi {
        url: url.clone(),
        token: Some(TOKEN.into()),
        ca_pem: Some(ca.clone()),
    };
    let e = node_labels(&api, "other-node").await.unwrap_err();
    assert!(
        e.to_string()
            .ends_with("/api/v1/nodes/other-node: 404 NotFound"),
        "{e}"
    );
    assert!(
        matches!(&e, Error::KubeStatus { code: 404, url, reason, .. }
            if url.ends_with("/api/v1/nodes/other-node") && reason == "NotFound"),
        "{e}"
    );
    // An answer that is not a Node: named as such.
    let e = node_labels(&api, "not-a-node").await.unwrap_err();
    assert!(
        matches!(&e, Error::KubeAnswer { node, .. } if node == "not-a-node"),
        "{e}"
    );
    assert!(e.to_string().contains("is not a Node object"), "{e}");
    let (z, _, s) = zone(
        "other-node",
        (None, None),
        (None, None),
        Some(&api),
        &labels(),
    )
    .await;
    assert_eq!((z, s), (None, Source::Unknown));
    // No token: 401.
    let api = KubeApi {
        url: url.clone(),
        token: None,
        ca_pem: Some(ca),
    };
    let e = node_labels(&api, NODE).await.unwrap_err();
    assert!(matches!(&e, Error::KubeStatus { code: 401, .. }), "{e}");
    // A CA that did not sign the server's certificate: refused by TLS.
    let stranger = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let api = KubeApi {
        url,
        token: Some(TOKEN.into()),
        ca_pem: Some(stranger.cert.pem().into_bytes()),
    };
    let e = node_labels(&api, NODE).await.unwrap_err();
    assert!(matches!(&e, Error::KubeRequest { .. }), "{e}");
    assert!(e.to_string().contains("invalid peer certificate"), "{e}");
    // A label key the node does not have.
    let (url, ca, _) = api_server(true).await;
    let api = KubeApi {
        url,
        token: Some(TOKEN.into()),
        ca_pem: Some(ca),
    };
    let odd = Labels {
        zone: "example.com/rack".into(),
        region: "example.com/row".into(),
    };
    let (z, _, s) = zone(NODE, (None, None), (None, None), Some(&api), &odd).await;
    assert_eq!((z, s), (None, Source::Unknown));
}

#[tokio::test]
async fn plain_http_serves_kubectl_proxy() {
    let (url, _, _) = api_server(false).await;
    let api = KubeApi {
        url,
        token: Some(TOKEN.into()),
        ca_pem: None,
    };
    let (z, _, _) = zone(NODE, (None, None), (None, None), Some(&api), &labels()).await;
    assert_eq!(z, Some(zone_name("europe-west4-a")));
}
