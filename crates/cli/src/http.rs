//! A small keep-alive HTTP/1 JSON client for `demo` and `load`.

use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// Longest one request may take before it counts as failed.
const TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    token: Option<String>,
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

    pub async fn get(&self, path: &str) -> Result<(StatusCode, Value)> {
        self.send(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Result<(StatusCode, Value)> {
        self.send(Method::POST, path, Some(body)).await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value)> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        let body = match body {
            Some(b) => {
                req = req.header("content-type", "application/json");
                Full::new(Bytes::from(serde_json::to_vec(b)?))
            }
            None => Full::new(Bytes::new()),
        };
        let call = async {
            let response = self.client.request(req.body(body)?).await?;
            let status = response.status();
            let bytes = response.into_body().collect().await?.to_bytes();
            let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            anyhow::Ok((status, value))
        };
        tokio::time::timeout(TIMEOUT, call)
            .await
            .with_context(|| format!("{path}: no answer within {TIMEOUT:?}"))?
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
