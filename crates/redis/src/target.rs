//! [`Target`]: which Redis the system talks to (one server, a cluster, or
//! the master a set of sentinels names) and how to reach it (TLS,
//! passwords); decided here once, so every crate above takes a
//! [`Conn`] and never asks which kind it is.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use redis::aio::ConnectionManager;
use redis::cluster::ClusterClient;
use redis::{IntoConnectionInfo, RedisResult};

use crate::conn::{Conn, Inner};
use crate::sentinel::{Following, Sentinels};
use crate::settings::{Access, CONNECT_TIMEOUT, RESPONSE_TIMEOUT, manager_config, nodes_of};
use crate::tls::Tls;

/// Where Redis is, and how to speak TLS to it.
///
/// ```
/// use seckill_redis::Target;
/// let one = Target::server("redis://127.0.0.1:6379/");
/// let cluster = Target::cluster("127.0.0.1:7000,127.0.0.1:7001").unwrap();
/// assert!(!one.is_cluster() && cluster.is_cluster());
/// assert_eq!(cluster.to_string(), "the cluster at 127.0.0.1:7000,127.0.0.1:7001");
/// let watched = Target::sentinel("127.0.0.1:26379,127.0.0.1:26380", "shop").unwrap();
/// assert_eq!(watched.to_string(), "master 'shop' of the sentinels at 127.0.0.1:26379,127.0.0.1:26380");
/// let secret = Target::server("redis://:hunter2@127.0.0.1:6379/");
/// assert_eq!(secret.to_string(), "127.0.0.1:6379");
/// assert!(!format!("{secret:?}").contains("hunter2"));
/// let kept_apart = Target::server("redis://127.0.0.1:6379/").with_password("hunter3");
/// assert!(!format!("{kept_apart:?} {kept_apart}").contains("hunter3"));
/// let tls = Target::server("rediss://127.0.0.1:6380/").with_tls(seckill_redis::Tls::default());
/// assert_eq!(tls.to_string(), "127.0.0.1:6380 (TLS)");
/// ```
#[derive(Clone)]
pub struct Target {
    nodes: Nodes,
    access: Access,
}

#[derive(Clone)]
enum Nodes {
    /// One server, by URL.
    Server(String),
    /// A Redis Cluster, by seed nodes (URLs); the client learns the rest
    /// of the cluster from them.
    Cluster(Vec<String>),
    /// Whichever server the sentinels name master; clones share the
    /// connections to the sentinels.
    Sentinel(Arc<Sentinels>),
}

impl Target {
    /// One server at `url` (`redis://` or `rediss://`).
    pub fn server(url: &str) -> Self {
        Self {
            nodes: Nodes::Server(url.to_owned()),
            access: Access::default(),
        }
    }

    /// A cluster from a comma-separated list of seed nodes, each
    /// `host:port` or a `redis://` (`rediss://`) URL.
    pub fn cluster(nodes: &str) -> RedisResult<Self> {
        Ok(Self {
            nodes: Nodes::Cluster(nodes_of(nodes, "a cluster needs at least one seed node")?),
            access: Access::default(),
        })
    }

    /// The master called `name` by the sentinels in `sentinels`, a
    /// comma-separated list of `host:port` or `redis://` (`rediss://`)
    /// URLs; a URL's password is the sentinels'. The servers are spoken to
    /// over TLS when the sentinels are, with the same settings. After a
    /// failover, connections follow the master the sentinels name.
    pub fn sentinel(sentinels: &str, name: &str) -> RedisResult<Self> {
        Ok(Self {
            nodes: Nodes::Sentinel(Arc::new(Sentinels::new(sentinels, name)?)),
            access: Access::default(),
        })
    }

    /// With the TLS settings `tls` for its `rediss://` URLs.
    #[must_use]
    pub fn with_tls(mut self, tls: Tls) -> Self {
        self.access.tls = tls;
        self.settings_changed()
    }

    /// With `password` for every server, over any in its URLs: for a
    /// password kept out of the command line.
    #[must_use]
    pub fn with_password(mut self, password: &str) -> Self {
        self.access.password = Some(password.to_owned());
        self.settings_changed()
    }

    /// With `password` for the sentinels, over any in their URLs.
    #[must_use]
    pub fn with_sentinel_password(mut self, password: &str) -> Self {
        self.access.sentinel_password = Some(password.to_owned());
        self.settings_changed()
    }

    /// Connections to the sentinels made with the old settings are not
    /// shared with this target.
    fn settings_changed(mut self) -> Self {
        if let Nodes::Sentinel(sentinels) = &self.nodes {
            self.nodes = Nodes::Sentinel(Arc::new(sentinels.fresh()));
        }
        self
    }

    /// Its TLS settings.
    pub fn tls(&self) -> &Tls {
        &self.access.tls
    }

    /// Whether it is reached over TLS (`rediss://`).
    pub fn is_tls(&self) -> bool {
        match &self.nodes {
            Nodes::Sentinel(sentinels) => sentinels.is_tls(),
            _ => self.urls().iter().any(|u| u.starts_with("rediss://")),
        }
    }

    /// A cluster's seed nodes; none otherwise.
    pub(crate) fn seeds(&self) -> &[String] {
        match &self.nodes {
            Nodes::Cluster(nodes) => nodes,
            _ => &[],
        }
    }

    fn urls(&self) -> &[String] {
        match &self.nodes {
            Nodes::Server(url) => std::slice::from_ref(url),
            Nodes::Cluster(nodes) => nodes,
            Nodes::Sentinel(sentinels) => sentinels.urls(),
        }
    }

    /// A client for `url`, one of this target's, with its TLS settings
    /// and `TCP_NODELAY`.
    pub(crate) fn client_for(&self, url: &str) -> RedisResult<redis::Client> {
        let mut info = nodelay(url)?;
        if let Some(password) = &self.access.password {
            let settings = info.redis_settings().clone().set_password(password);
            info = info.set_redis_settings(settings);
        }
        self.access.tls.client(info)
    }

    /// Whether this is a cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.nodes, Nodes::Cluster(_))
    }

    /// Whether the master is the one the sentinels name.
    pub fn is_sentinel(&self) -> bool {
        matches!(self.nodes, Nodes::Sentinel(_))
    }

    /// A client to subscribe to classic pub/sub with on the `attempt`-th
    /// try: the server; the master the sentinels name now (a `PUBLISH`
    /// reaches its replicas too); or on a cluster (where a `PUBLISH`
    /// reaches every node, slot moves and failovers included) the seed
    /// nodes in turn, so a subscriber whose node died moves to the next.
    pub async fn pubsub_client(&self, attempt: usize) -> RedisResult<redis::Client> {
        match &self.nodes {
            Nodes::Sentinel(sentinels) => sentinels.master(&self.access, false).await,
            _ => {
                let urls = self.urls();
                self.client_for(&urls[attempt % urls.len()])
            }
        }
    }

    /// A client for the one server named by URL, for connections of their
    /// own (a `WATCH` transaction); `None` for a cluster or under Sentinel,
    /// where such a connection would not follow the master.
    pub fn server_client(&self) -> RedisResult<Option<redis::Client>> {
        match &self.nodes {
            Nodes::Server(url) => self.client_for(url).map(Some),
            _ => Ok(None),
        }
    }

    /// A client for the master now: the server, or the one the sentinels
    /// name; `None` for a cluster.
    pub(crate) async fn master_client(&self) -> RedisResult<Option<redis::Client>> {
        match &self.nodes {
            Nodes::Sentinel(sentinels) => sentinels.master(&self.access, false).await.map(Some),
            _ => self.server_client(),
        }
    }

    /// A connection that (re)connects on use and fails fast while Redis is
    /// away, so a service can start, and recover, without it.
    pub fn connect_lazy(&self) -> RedisResult<Conn> {
        let epoch: Arc<AtomicU64> = Arc::default();
        let inner = match &self.nodes {
            Nodes::Server(url) => Inner::Server(ConnectionManager::new_lazy_with_config(
                self.client_for(url)?,
                manager_config(),
            )?),
            Nodes::Cluster(nodes) => Inner::Cluster(self.cluster_client(nodes)?),
            Nodes::Sentinel(sentinels) => Inner::Sentinel(Following::new(
                sentinels.clone(),
                self.access.clone(),
                epoch.clone(),
            )),
        };
        Ok(Conn::new(inner, epoch))
    }

    fn cluster_client(
        &self,
        nodes: &[String],
    ) -> RedisResult<redis::cluster_async::ClusterConnection> {
        let nodelay = redis::io::tcp::TcpSettings::default().set_nodelay(true);
        // Short waits between retries (MOVED, ASK, TRYAGAIN during a
        // slot move or a failover), all inside the response timeout.
        let mut builder = ClusterClient::builder(nodes.iter().map(String::as_str));
        if let Some(certs) = self.access.tls.certificates() {
            builder = builder.certs(certs);
        }
        if self.access.tls.is_insecure() {
            builder = builder.tls(redis::TlsMode::Insecure);
        }
        if let Some(password) = &self.access.password {
            builder = builder.password(password);
        }
        let client = builder
            .tcp_settings(nodelay)
            .connection_timeout(CONNECT_TIMEOUT)
            .response_timeout(RESPONSE_TIMEOUT)
            .overall_response_timeout(Some(RESPONSE_TIMEOUT))
            .retries(8)
            .min_retry_wait(10)
            .max_retry_wait(200)
            .build()?;
        // The config given here replaces the builder's timeouts.
        let config = redis::cluster::ClusterConfig::new()
            .set_connection_timeout(CONNECT_TIMEOUT)
            .set_response_timeout(RESPONSE_TIMEOUT);
        Ok(client.get_pending_async_connection_with_config(config))
    }

    /// Like [`Target::connect_lazy`], but fails now if Redis does not answer.
    pub async fn connect(&self) -> RedisResult<Conn> {
        let mut conn = self.connect_lazy()?;
        conn.ping().await?;
        Ok(conn)
    }
}

/// Where it is; never a password or a key.
impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("at", &self.to_string())
            .field("tls", &self.access.tls)
            .finish()
    }
}

/// The address(es), never a password: for logs and messages.
impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addrs = |urls: &[String]| {
            let addrs: Vec<String> = urls.iter().map(|u| addr(u)).collect();
            addrs.join(",")
        };
        match &self.nodes {
            Nodes::Server(url) => f.write_str(&addr(url))?,
            Nodes::Cluster(nodes) => write!(f, "the cluster at {}", addrs(nodes))?,
            Nodes::Sentinel(s) => write!(
                f,
                "master '{}' of the sentinels at {}",
                s.name(),
                addrs(s.urls())
            )?,
        }
        if self.is_tls() {
            f.write_str(" (TLS)")?;
        }
        Ok(())
    }
}

/// `host:port` of `url`, never its password.
fn addr(url: &str) -> String {
    match url.into_connection_info() {
        Ok(info) => info.addr().to_string(),
        Err(_) => "an unreadable address".to_owned(),
    }
}

/// A `redis::Client` for `url` with `TCP_NODELAY` on: redis-rs leaves
/// Nagle's algorithm on, which adds up to 40 ms to a small write after a
/// read.
///
/// ```
/// let client = seckill_redis::client("redis://127.0.0.1:6379/").unwrap();
/// # drop(client);
/// ```
pub fn client(url: &str) -> RedisResult<redis::Client> {
    redis::Client::open(nodelay(url)?)
}

fn nodelay(url: &str) -> RedisResult<redis::ConnectionInfo> {
    Ok(url
        .into_connection_info()?
        .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true)))
}
