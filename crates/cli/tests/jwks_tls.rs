//! `serve --jwks-url https://…`: the document is fetched over TLS and the
//! server's certificate is checked against the system's CA certificates
//! (here a test CA, through `SSL_CERT_FILE`); a certificate no CA vouches
//! for is refused, and so are the tokens whose keys it would have given.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use seckill_service::client::{Http, Signer};
use seckill_testkit::RedisServer;
use serde_json::json;

mod common;

/// A CA, and a certificate for `localhost` it signed with its key.
fn certificates() -> (
    String,
    rustls::pki_types::CertificateDer<'static>,
    rcgen::KeyPair,
) {
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = rcgen::CertifiedIssuer::self_signed(ca, rcgen::KeyPair::generate().unwrap()).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    (ca.pem(), leaf.der().clone(), key)
}

/// Serves `document` over TLS on a free loopback port; answers the port.
async fn serve_tls(document: String) -> u16 {
    let (_, cert, key) = certificates_cached();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.clone()],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, document) = (acceptor.clone(), document.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |_| {
                    let body = Bytes::from(document.clone());
                    async move {
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(body)))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    port
}

/// One CA and certificate for the whole test binary.
fn certificates_cached() -> &'static (
    String,
    rustls::pki_types::CertificateDer<'static>,
    rcgen::KeyPair,
) {
    static CERTS: std::sync::OnceLock<(
        String,
        rustls::pki_types::CertificateDer<'static>,
        rcgen::KeyPair,
    )> = std::sync::OnceLock::new();
    CERTS.get_or_init(certificates)
}

fn key(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/../service/tests/keys/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// `seckill serve` with buyers verified against `jwks_url`, and `env`;
/// answers it, its base URL and the file its log goes to.
fn serve(
    redis: &RedisServer,
    dir: &std::path::Path,
    jwks_url: &str,
    env: &[(&str, &std::path::Path)],
) -> (common::Serve, String, std::path::PathBuf) {
    let log = dir.join(format!("serve-{}.log", env.len()));
    let mut command = Command::new(env!("CARGO_BIN_EXE_seckill"));
    command
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-token",
            "t",
            "--rate-per-ip",
            "0",
        ])
        .args([
            "--buyer-auth",
            "jwt",
            "--jwks-url",
            jwks_url,
            "--redis-url",
            &redis.url(),
        ])
        .arg("--database-url")
        .arg(dir.join(format!("o{}.db", env.len())))
        // Only the CA this test names, never one the machine happens to have.
        .env("SSL_CERT_DIR", dir.join("no-such-dir"))
        .env_remove("SSL_CERT_FILE")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().unwrap();
    let line = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .next()
        .unwrap_or_else(|| {
            panic!(
                "serve exited: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        })
        .unwrap();
    let base = line.strip_prefix("listening on ").expect(&line).to_owned();
    (common::Serve(child), base, log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_document_is_fetched_over_tls_and_its_certificate_checked() {
    let encoding = jsonwebtoken::EncodingKey::from_rsa_pem(&key("rsa.key")).unwrap();
    let mut jwk =
        jsonwebtoken::jwk::Jwk::from_encoding_key(&encoding, jsonwebtoken::Algorithm::RS256)
            .unwrap();
    jwk.common.key_id = Some("k1".to_owned());
    let port = serve_tls(json!({ "keys": [jwk] }).to_string()).await;
    let url = format!("https://localhost:{port}/jwks.json");
    let redis = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &certificates_cached().0).unwrap();
    let token = Signer::pem(&key("rsa.key"))
        .unwrap()
        .kid("k1")
        .token("alice", Duration::from_secs(600));

    // Trusted CA: the key arrives and the buyer's token verifies.
    let (_serve, base, _) = serve(&redis, dir.path(), &url, &[("SSL_CERT_FILE", &ca)]);
    let admin = Http::new(&base, Some("t".into()));
    let sale = json!({ "id": "tls", "name": "x", "stock": 10, "per_user_limit": 1 });
    assert_eq!(admin.post("/v1/sales", &sale).await.unwrap().0, 201);
    let buyer = Http::new(&base, Some(token.clone()));
    let (status, answer) = buyer
        .post("/v1/sales/tls/purchase", &json!({}))
        .await
        .unwrap();
    assert_eq!(status, 200, "{answer}");

    // Another CA, which did not sign the certificate: the fetch fails,
    // saying why, and the token is refused.
    let other = dir.path().join("other-ca.pem");
    std::fs::write(&other, certificates().0).unwrap();
    let (_serve, base, log) = serve(&redis, dir.path(), &url, &[("SSL_CERT_FILE", &other)]);
    let buyer = Http::new(&base, Some(token));
    let (status, answer) = buyer
        .post("/v1/sales/tls/purchase", &json!({}))
        .await
        .unwrap();
    assert_eq!(
        (status.as_u16(), answer["code"].as_str()),
        (401, Some("unauthorized")),
        "{answer}"
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("JWKS fetch failed") && logged.to_lowercase().contains("certificate"),
        "{logged}"
    );
}
