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
    /// header: a repeat is answered as the first request was.
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

/// The `code` of an answer: the error code, or `ok` for a 2xx.
pub fn code(status: StatusCode, body: &Value) -> String {
    if status.is_success() {
        "ok".to_owned()
    } else {
        body["code"].as_str().unwrap_or("no_code").to_owned()
    }
}
