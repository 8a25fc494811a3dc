//! A JWKS document: fetched at start, every five minutes, and when a token
//! names a key it lacks (at most once per `refetch_after`). A fetch that
//! fails keeps the last good set: an identity provider's outage must not
//! log every buyer out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::jwk::JwkSet;

use super::key::{Key, Rules};
use crate::locks::{read, write};

/// A fetch must be done within this.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest document read.
const MAX_DOCUMENT: usize = 1 << 20;
/// How often the set is fetched again anyway, so a removed key stops
/// verifying even when no token names an unknown one.
pub const REFRESH_EVERY: Duration = Duration::from_secs(300);

/// Keys by `kid`.
pub type KeySet = HashMap<String, Arc<Key>>;

pub struct Jwks {
    url: String,
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
    rules: Rules,
    keys: RwLock<Arc<KeySet>>,
    /// When a fetch was last tried; held across the fetch, so concurrent
    /// misses make one request.
    tried: tokio::sync::Mutex<Option<Instant>>,
    refetch_after: Duration,
    version: AtomicU64,
}

impl Jwks {
    pub fn new(url: &str, rules: Rules, refetch_after: Duration) -> Result<Self, String> {
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let connector = if url.starts_with("https://") {
            builder
                .with_provider_and_native_roots(provider)
                .map_err(|e| format!("no CA certificates to check {url} with: {e}"))?
        } else if url.starts_with("http://") {
            // Plain HTTP on a trusted network (a sidecar, a test).
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth();
            builder.with_tls_config(config)
        } else {
            return Err(format!("--jwks-url must be http:// or https://, got {url}"));
        }
        .https_or_http()
        .enable_http1()
        .build();
        Ok(Self {
            url: url.to_owned(),
            client: Client::builder(TokioExecutor::new()).build(connector),
            rules,
            keys: RwLock::default(),
            tried: tokio::sync::Mutex::new(None),
            refetch_after,
            version: AtomicU64::new(0),
        })
    }

    /// The key named `kid`, fetching the document again if it lacks it and
    /// the last try is old enough.
    pub async fn key(&self, kid: &str) -> Option<Arc<Key>> {
        if let Some(key) = read(&self.keys).get(kid) {
            return Some(key.clone());
        }
        self.refresh(self.refetch_after).await;
        read(&self.keys).get(kid).cloned()
    }

    /// Counts the changes of the set of key ids: a token verified under an
    /// older count may have lost its key since.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Whether the last fetch was tried longer than `age` ago.
    pub fn stale(&self, age: Duration) -> bool {
        self.tried
            .try_lock()
            .is_ok_and(|t| t.is_none_or(|t| t.elapsed() > age))
    }

    /// Fetches the document unless a try was made within `min_gap`.
    pub async fn refresh(&self, min_gap: Duration) {
        let mut tried = self.tried.lock().await;
        if tried.is_some_and(|t| t.elapsed() < min_gap) {
            return;
        }
        *tried = Some(Instant::now());
        match self.fetch().await {
            Ok(keys) => {
                let mut current = write(&self.keys);
                let ids = |set: &KeySet| {
                    let mut ids: Vec<String> = set.keys().cloned().collect();
                    ids.sort_unstable();
                    ids
                };
                if ids(&current) != ids(&keys) {
                    self.version.fetch_add(1, Ordering::AcqRel);
                }
                *current = Arc::new(keys);
            }
            Err(e) => {
                tracing::warn!(url = %self.url, error = %e, "JWKS fetch failed; keeping the last good keys");
            }
        }
    }

    async fn fetch(&self) -> Result<KeySet, String> {
        let uri: hyper::Uri = self.url.parse().map_err(|e| format!("{e}"))?;
        let call = async {
            let response = self.client.get(uri).await.map_err(|e| chain(&e))?;
            if !response.status().is_success() {
                return Err(format!("answered {}", response.status()));
            }
            let body = Limited::new(response.into_body(), MAX_DOCUMENT)
                .collect()
                .await
                .map_err(|e| format!("reading the document: {e}"))?
                .to_bytes();
            serde_json::from_slice::<JwkSet>(&body).map_err(|e| format!("not a JWKS document: {e}"))
        };
        let set = tokio::time::timeout(FETCH_TIMEOUT, call)
            .await
            .map_err(|_| format!("no answer within {FETCH_TIMEOUT:?}"))??;
        let mut keys = KeySet::new();
        for jwk in &set.keys {
            let Some(kid) = &jwk.common.key_id else {
                continue;
            };
            match Key::jwk(jwk, &self.rules) {
                Ok(key) => {
                    keys.insert(kid.clone(), Arc::new(key));
                }
                Err(why) => tracing::warn!(kid = %kid, "JWKS key skipped: {why}"),
            }
        }
        Ok(keys)
    }
}

/// An error with its causes: the client's own text ("client error
/// (Connect)") hides which of DNS, TCP or the certificate failed.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
