//! A keep-alive HTTP/1 JSON client of this API, for load generators,
//! demos and tests.
//!
//! ```no_run
//! # async fn run() -> Result<(), seckill_service::Error> {
//! let http = seckill_service::client::Http::new("http://127.0.0.1:8080", None);
//! let (status, sale) = http.get("/v1/sales/drop-1").await?;
//! println!("{status}: {} left", sale["remaining"]);
//! # Ok(()) }
//! ```

use std::time::Duration;

use bytes::Bytes;

use crate::Error;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// Longest one request may take before it counts as failed.
const TIMEOUT: Duration = Duration::from_secs(10);

type Result<T> = std::result::Result<T, Error>;

fn http_error(e: impl std::fmt::Display) -> Error {
    Error::Http(e.to_string())
}

/// A client of one running service: keep-alive connections (up to 1024 idle),
/// `TCP_NODELAY`, a 10 s limit per request. Clones share the connection pool.
#[derive(Clone)]
pub struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    token: Option<String>,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Whether there is a token, never the token itself.
        f.debug_struct("Http")
            .field("base", &self.base)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl Http {
    /// A client of the service at `base` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base: &str, token: Option<String>) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(1024)
            .build(connector);
        Self {
            client,
            base: base.trim_end_matches('/').to_owned(),
            token,
        }
    }

    /// The same client (sharing its connections) sending `token` as its
    /// bearer credential: one buyer among many, say.
    pub fn with_token(&self, token: Option<String>) -> Self {
        Self {
            client: self.client.clone(),
            base: self.base.clone(),
            token,
        }
    }

    /// `POST` of `body` (bytes sent as they are, JSON) with extra headers:
    /// a signed webhook, whose signature covers the exact bytes.
    pub async fn post_bytes(
        &self,
        path: &str,
        body: Bytes,
        headers: &[(&str, &str)],
    ) -> Result<(StatusCode, Value)> {
        let mut all = vec![("content-type", "application/json")];
        all.extend_from_slice(headers);
        self.request(Method::POST, path, &all, body).await
    }

    /// `GET` of `path` with extra headers.
    pub async fn get_with(
        &self,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<(StatusCode, Value)> {
        self.request(Method::GET, path, headers, Bytes::new()).await
    }

    /// The base URL this client talks to.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `GET` of `path` (e.g. `/v1/sales/drop-1`): the status and the JSON
    /// body (`Value::Null` if it is not JSON).
    pub async fn get(&self, path: &str) -> Result<(StatusCode, Value)> {
        self.send(Method::GET, path, None).await
    }

    /// `POST` of `body` as JSON to `path`: the status and the JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Result<(StatusCode, Value)> {
        self.send(Method::POST, path, Some(body)).await
    }

    /// `POST` of `body` as JSON to `path` with an `Idempotency-Key`
    /// header (paying and cancelling take one; a purchase refuses it).
    pub async fn post_idempotent(
        &self,
        path: &str,
        body: &Value,
        key: &str,
    ) -> Result<(StatusCode, Value)> {
        let bytes = serde_json::to_vec(body).map_err(http_error)?;
        let headers = [
            ("content-type", "application/json"),
            ("idempotency-key", key),
        ];
        self.request(Method::POST, path, &headers, Bytes::from(bytes))
            .await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value)> {
        let (content_type, bytes) = match body {
            Some(b) => (
                Some("application/json"),
                serde_json::to_vec(b).map_err(http_error)?,
            ),
            None => (None, Vec::new()),
        };
        self.raw(method, path, content_type, Bytes::from(bytes))
            .await
    }

    /// Any request, as bytes: for clients (and tests) that send what JSON
    /// values cannot express. A body that is not JSON answers `Value::Null`.
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> Result<(StatusCode, Value)> {
        let headers: &[(&str, &str)] = match content_type {
            Some(content_type) => &[("content-type", content_type)],
            None => &[],
        };
        self.request(method, path, headers, body).await
    }

    async fn request(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<(StatusCode, Value)> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req.body(Full::new(body)).map_err(http_error)?;
        let call = async {
            let response = self.client.request(req).await.map_err(http_error)?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(http_error)?
                .to_bytes();
            let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            Ok((status, value))
        };
        tokio::time::timeout(TIMEOUT, call)
            .await
            .map_err(|_| Error::Timeout(TIMEOUT))?
    }
}

/// Signs buyer tokens as a shop's identity service would: for the demo,
/// load generators and tests.
///
/// ```
/// let signer = seckill_service::client::Signer::hs256(b"a secret of thirty-two bytes or more");
/// let token = signer.token("alice", std::time::Duration::from_secs(600));
/// assert_eq!(token.split('.').count(), 3);
/// ```
#[derive(Clone)]
pub struct Signer {
    key: jsonwebtoken::EncodingKey,
    header: jsonwebtoken::Header,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("alg", &self.header.alg)
            .field("kid", &self.header.kid)
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// HS256 with a shared secret.
    pub fn hs256(secret: &[u8]) -> Self {
        Self {
            key: jsonwebtoken::EncodingKey::from_secret(secret),
            header: jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        }
    }

    /// A private key in PEM: RS256 for RSA, ES256 for EC P-256, EdDSA for
    /// Ed25519.
    pub fn pem(pem: &[u8]) -> Result<Self> {
        use jsonwebtoken::{Algorithm, EncodingKey};
        let (key, alg) = if let Ok(k) = EncodingKey::from_rsa_pem(pem) {
            (k, Algorithm::RS256)
        } else if let Ok(k) = EncodingKey::from_ec_pem(pem) {
            (k, Algorithm::ES256)
        } else if let Ok(k) = EncodingKey::from_ed_pem(pem) {
            (k, Algorithm::EdDSA)
        } else {
            return Err(Error::Http(
                "not an RSA, EC P-256 or Ed25519 private key in PEM".to_owned(),
            ));
        };
        Ok(Self {
            key,
            header: jsonwebtoken::Header::new(alg),
        })
    }

    /// The same key, its tokens naming it `kid` (for a JWKS document).
    pub fn kid(mut self, kid: &str) -> Self {
        self.header.kid = Some(kid.to_owned());
        self
    }

    /// A token for `user` (`sub`), valid for `ttl` from now.
    pub fn token(&self, user: &str, ttl: Duration) -> String {
        let exp = jsonwebtoken::get_current_timestamp() + ttl.as_secs();
        self.claims(&serde_json::json!({ "sub": user, "exp": exp }))
    }

    /// A token of any claims (tests of refusals: no `exp`, a wrong `aud`).
    pub fn claims(&self, claims: &Value) -> String {
        // Encoding a JSON value with a key that parsed cannot fail.
        jsonwebtoken::encode(&self.header, claims, &self.key).unwrap_or_default()
    }
}

/// The `code` of an answer: the error code, or `ok` for a 2xx.
pub fn code(status: StatusCode, body: &Value) -> String {
    if status.is_success() {
        "ok".to_owned()
    } else {
        body["code"].as_str().unwrap_or("no_code").to_owned()
    }
}
