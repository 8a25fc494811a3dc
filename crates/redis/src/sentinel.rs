//! Redis Sentinel: [`Sentinels`], where the sentinels are and which master
//! they watch, and [`Following`], a connection to whichever server the
//! sentinels name master now.
//!
//! A failover moves the master to another address. A connection manager
//! reconnects to the address it was given, so it would keep knocking on the
//! dead one (or, once that returns as a replica, be told `READONLY`).
//! `Following` asks the sentinels again when a command fails in a way that
//! says the master may have moved, at most once per [`LOOKUP_GAP`], and
//! swaps its connection when they name another server. Nothing listens to
//! `+switch-master`: the first failed command after a failover asks, which
//! is as soon as anything needs the new master.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    Cmd, ErrorKind, IntoConnectionInfo, Pipeline, RedisError, RedisFuture, RedisResult, TlsMode,
    Value,
};

use crate::settings::{Access, RESPONSE_TIMEOUT, manager_config, nodes_of};

/// Shortest time between two questions to the sentinels: commands fail by
/// the thousand during a failover, and one answer serves them all.
const LOOKUP_GAP: Duration = Duration::from_millis(100);
/// How old an answer may be for a caller that only needs the master now
/// (per-master tools, a subscription), not one that saw it fail.
const FRESH_FOR: Duration = Duration::from_secs(1);

/// The sentinels and the name of the master they watch.
pub(crate) struct Sentinels {
    /// Sentinel URLs (`redis://` or `rediss://`).
    urls: Vec<String>,
    /// The master's name in the sentinels' configuration.
    name: String,
    /// Built at the first lookup, then kept: it keeps a connection to
    /// each sentinel. Held while asking.
    client: tokio::sync::Mutex<Option<SentinelClient>>,
    /// The master last named, and when.
    named: Mutex<Option<(Instant, redis::Client)>>,
}

impl Sentinels {
    /// The sentinels in `nodes` (comma-separated `host:port` or URLs)
    /// that watch the master called `name`.
    pub(crate) fn new(nodes: &str, name: &str) -> RedisResult<Self> {
        if name.trim().is_empty() {
            return Err(RedisError::from((
                ErrorKind::InvalidClientConfig,
                "Sentinel needs the name of the master it watches (--sentinel-master)",
            )));
        }
        Ok(Self {
            urls: nodes_of(nodes, "Sentinel needs at least one sentinel")?,
            name: name.trim().to_owned(),
            client: tokio::sync::Mutex::default(),
            named: Mutex::default(),
        })
    }

    /// The same sentinels and name, without the client built for other
    /// settings.
    pub(crate) fn fresh(&self) -> Self {
        Self {
            urls: self.urls.clone(),
            name: self.name.clone(),
            client: tokio::sync::Mutex::default(),
            named: Mutex::default(),
        }
    }

    pub(crate) fn urls(&self) -> &[String] {
        &self.urls
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Whether the sentinels, and so the servers, speak TLS.
    pub(crate) fn is_tls(&self) -> bool {
        self.urls.iter().any(|u| u.starts_with("rediss://"))
    }

    /// A client for the server the sentinels name master now, checked
    /// (`ROLE`) to be one, made with `access`: the servers' password, the
    /// sentinels' password over any in their URLs, the TLS settings if the
    /// sentinels are `rediss://`; `TCP_NODELAY` on.
    ///
    /// A question costs a connection to the master to check it, so
    /// answers are shared: one given after this call began answers it
    /// too, and unless `anew`, so does one less than [`FRESH_FOR`] old.
    pub(crate) async fn master(&self, access: &Access, anew: bool) -> RedisResult<redis::Client> {
        let asked = Instant::now();
        let fresh = asked.checked_sub(FRESH_FOR).unwrap_or(asked);
        if !anew && let Some(client) = self.named_since(fresh) {
            return Ok(client);
        }
        // Boxed: redis-rs's lookup is a deep future, and every future that
        // awaits this one would carry its layout.
        let lookup: std::pin::Pin<Box<dyn Future<Output = _> + Send + '_>> = Box::pin(async {
            let mut client = self.client.lock().await;
            if let Some(named) = self.named_since(asked) {
                return Ok(named);
            }
            if client.is_none() {
                *client = Some(self.build(access)?);
            }
            let named = client
                .as_mut()
                .expect("built above")
                .async_get_client()
                .await?;
            *self.named.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((Instant::now(), named.clone()));
            Ok(named)
        });
        match tokio::time::timeout(RESPONSE_TIMEOUT, lookup).await {
            Ok(found) => found.map_err(|e| self.explain(e)),
            Err(_) => Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "the sentinels did not name a master '{}' that answers within {RESPONSE_TIMEOUT:?}",
                    self.name
                ),
            ))),
        }
    }

    /// The master last named, if named after `since`.
    fn named_since(&self, since: Instant) -> Option<redis::Client> {
        let named = self.named.lock().unwrap_or_else(|e| e.into_inner());
        named
            .as_ref()
            .filter(|(at, _)| *at > since)
            .map(|(_, client)| client.clone())
    }

    fn explain(&self, e: RedisError) -> RedisError {
        if e.kind() == ErrorKind::MasterNameNotFoundBySentinel {
            return RedisError::from((
                ErrorKind::MasterNameNotFoundBySentinel,
                "no sentinel names a master that answers as one by that name",
                format!("'{}'", self.name),
            ));
        }
        crate::tls::explain(e)
    }

    fn build(&self, access: &Access) -> RedisResult<SentinelClient> {
        let tls = &access.tls;
        let nodelay = redis::io::tcp::TcpSettings::default().set_nodelay(true);
        let mut url_password = None;
        let mut addrs = Vec::new();
        for url in &self.urls {
            let info = url.as_str().into_connection_info()?;
            url_password = url_password.or(info.redis_settings().password().map(str::to_owned));
            addrs.push(info.addr().clone());
        }
        let mut builder =
            SentinelClientBuilder::new(addrs, &self.name, SentinelServerType::Master)?
                .set_client_to_sentinel_tcp_settings(nodelay.clone())
                .set_client_to_redis_tcp_settings(nodelay);
        if let Some(p) = access
            .sentinel_password
            .as_deref()
            .or(url_password.as_deref())
        {
            builder = builder.set_client_to_sentinel_password(p);
        }
        if let Some(p) = &access.password {
            builder = builder.set_client_to_redis_password(p);
        }
        if self.is_tls() {
            let mode = if tls.is_insecure() {
                TlsMode::Insecure
            } else {
                TlsMode::Secure
            };
            builder = builder
                .set_client_to_sentinel_tls_mode(mode)
                .set_client_to_redis_tls_mode(mode);
            if let Some(certs) = tls.certificates() {
                builder = builder
                    .set_client_to_sentinel_certificates(certs.clone())
                    .set_client_to_redis_certificates(certs);
            }
        } else if tls.is_insecure() || tls.certificates().is_some() {
            return Err(RedisError::from((
                ErrorKind::InvalidClientConfig,
                "TLS settings (a CA, a client certificate, insecure) need rediss:// sentinels",
            )));
        }
        builder.build()
    }
}

/// A connection to the master the sentinels name, swapped for a new one
/// when they name another. Clones share it.
#[derive(Clone)]
pub(crate) struct Following(Arc<Shared>);

struct Shared {
    sentinels: Arc<Sentinels>,
    access: Access,
    /// The connection to the master last named, with its address.
    current: Mutex<Option<(String, ConnectionManager)>>,
    /// When the sentinels were last asked; held while asking.
    asked: tokio::sync::Mutex<Option<Instant>>,
    /// Whether a question in the background is under way.
    asking: AtomicBool,
    /// Raised on every swap, shared with the `Conn` that holds this.
    epoch: Arc<AtomicU64>,
}

impl Following {
    pub(crate) fn new(sentinels: Arc<Sentinels>, access: Access, epoch: Arc<AtomicU64>) -> Self {
        Self(Arc::new(Shared {
            sentinels,
            access,
            current: Mutex::default(),
            asked: tokio::sync::Mutex::default(),
            asking: AtomicBool::new(false),
            epoch,
        }))
    }

    fn current(&self) -> Option<ConnectionManager> {
        let current = self.0.current.lock().unwrap_or_else(|e| e.into_inner());
        current.as_ref().map(|(_, manager)| manager.clone())
    }

    /// The connection to the master, asking the sentinels first if none
    /// was named yet. While they cannot name one, callers share one
    /// question per [`LOOKUP_GAP`] and the rest fail at once, so no caller
    /// waits behind another's.
    async fn manager(&self) -> RedisResult<ConnectionManager> {
        if let Some(manager) = self.current() {
            return Ok(manager);
        }
        self.0.ask().await?;
        self.current().ok_or_else(|| {
            RedisError::from((
                ErrorKind::Io,
                "the sentinels named no master a moment ago; asking again shortly",
            ))
        })
    }

    /// After `result`: asks the sentinels again, in the background, if it
    /// says the master may have moved and no question is under way.
    fn after<T>(&self, result: &RedisResult<T>) {
        let Err(e) = result else { return };
        let moved = e.is_io_error()
            || e.is_unrecoverable_error()
            || e.is_timeout()
            || matches!(e.code(), Some("READONLY" | "MASTERDOWN"));
        if moved && !self.0.asking.swap(true, Ordering::SeqCst) {
            let shared = self.0.clone();
            tokio::spawn(async move {
                let _ = shared.ask().await;
                shared.asking.store(false, Ordering::SeqCst);
            });
        }
    }
}

impl Shared {
    /// Asks the sentinels for the master and swaps the connection if they
    /// name another server; not if they were asked in the last
    /// [`LOOKUP_GAP`] (the answer is still fresh, or they just failed).
    async fn ask(&self) -> RedisResult<()> {
        let mut asked = self.asked.lock().await;
        if asked.is_some_and(|at| at.elapsed() < LOOKUP_GAP) {
            return Ok(());
        }
        *asked = Some(Instant::now());
        let client = self.sentinels.master(&self.access, true).await?;
        let addr = client.get_connection_info().addr().to_string();
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.as_ref().is_some_and(|(at, _)| *at == addr) {
            return Ok(());
        }
        let manager = ConnectionManager::new_lazy_with_config(client, manager_config())?;
        // Raised before the new connection is in place: a write sent on the
        // old one is never confirmed by a `WAIT` on the new one.
        self.epoch.fetch_add(1, Ordering::SeqCst);
        *current = Some((addr, manager));
        Ok(())
    }
}

impl ConnectionLike for Following {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut manager = self.manager().await?;
            let result = manager.req_packed_command(cmd).await;
            self.after(&result);
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut manager = self.manager().await?;
            let result = manager.req_packed_commands(cmd, offset, count).await;
            self.after(&result);
            result
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}
