//! [`Target`] and [`Conn`]: which Redis the system talks to (one server or
//! a cluster) and the client settings for it, decided here once; every
//! crate above takes a [`Conn`] and never asks which kind it is.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, ResponsePolicy, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{Cmd, IntoConnectionInfo, Pipeline, RedisFuture, RedisResult, Value};

use crate::tls::Tls;

/// Longest wait to open a connection to a node.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest wait for one answer. A flash sale would rather answer "try
/// again" than hold a buyer: no command waits longer than this, a
/// cluster's redirects and retries included.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Where Redis is, and how to speak TLS to it.
///
/// ```
/// use seckill_redis::Target;
/// let one = Target::server("redis://127.0.0.1:6379/");
/// let cluster = Target::cluster("127.0.0.1:7000,127.0.0.1:7001").unwrap();
/// assert!(!one.is_cluster() && cluster.is_cluster());
/// assert_eq!(cluster.to_string(), "the cluster at 127.0.0.1:7000,127.0.0.1:7001");
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
    tls: Tls,
    /// A password given apart from the URLs (read from a file, say).
    password: Option<String>,
}

#[derive(Clone)]
enum Nodes {
    /// One server, by URL.
    Server(String),
    /// A Redis Cluster, by seed nodes (URLs); the client learns the rest
    /// of the cluster from them.
    Cluster(Vec<String>),
}

impl Target {
    /// One server at `url` (`redis://` or `rediss://`).
    pub fn server(url: &str) -> Self {
        Self {
            nodes: Nodes::Server(url.to_owned()),
            tls: Tls::default(),
            password: None,
        }
    }

    /// A cluster from a comma-separated list of seed nodes, each
    /// `host:port` or a `redis://` (`rediss://`) URL.
    pub fn cluster(nodes: &str) -> RedisResult<Self> {
        let nodes: Vec<String> = nodes
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(|n| {
                if n.contains("://") {
                    n.to_owned()
                } else {
                    format!("redis://{n}/")
                }
            })
            .collect();
        if nodes.is_empty() {
            return Err(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "a cluster needs at least one seed node",
            )));
        }
        for node in &nodes {
            node.as_str().into_connection_info()?;
        }
        Ok(Self {
            nodes: Nodes::Cluster(nodes),
            tls: Tls::default(),
            password: None,
        })
    }

    /// With the TLS settings `tls` for its `rediss://` URLs.
    #[must_use]
    pub fn with_tls(mut self, tls: Tls) -> Self {
        self.tls = tls;
        self
    }

    /// With `password` for every node, over any in its URLs: for a
    /// password kept out of the command line.
    #[must_use]
    pub fn with_password(mut self, password: &str) -> Self {
        self.password = Some(password.to_owned());
        self
    }

    /// Its TLS settings.
    pub fn tls(&self) -> &Tls {
        &self.tls
    }

    /// Whether its URLs are `rediss://`.
    pub fn is_tls(&self) -> bool {
        self.urls().iter().any(|u| u.starts_with("rediss://"))
    }

    /// A cluster's seed nodes; none for one server.
    pub(crate) fn seeds(&self) -> &[String] {
        match &self.nodes {
            Nodes::Server(_) => &[],
            Nodes::Cluster(nodes) => nodes,
        }
    }

    fn urls(&self) -> &[String] {
        match &self.nodes {
            Nodes::Server(url) => std::slice::from_ref(url),
            Nodes::Cluster(nodes) => nodes,
        }
    }

    /// A client for `url`, one of this target's, with its TLS settings
    /// and `TCP_NODELAY`.
    pub(crate) fn client_for(&self, url: &str) -> RedisResult<redis::Client> {
        let mut info = nodelay(url)?;
        if let Some(password) = &self.password {
            let settings = info.redis_settings().clone().set_password(password);
            info = info.set_redis_settings(settings);
        }
        self.tls.client(info)
    }

    /// Whether this is a cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.nodes, Nodes::Cluster(_))
    }

    /// A client to subscribe to classic pub/sub with on the `attempt`-th
    /// try: the server, or on a cluster (where a `PUBLISH` reaches every
    /// node, slot moves and failovers included) the seed nodes in turn, so
    /// a subscriber whose node died moves to the next.
    pub fn pubsub_client(&self, attempt: usize) -> RedisResult<redis::Client> {
        let urls = self.urls();
        self.client_for(&urls[attempt % urls.len()])
    }

    /// A client for the one server, for connections of their own (a
    /// `WATCH` transaction); `None` for a cluster.
    pub fn server_client(&self) -> RedisResult<Option<redis::Client>> {
        match &self.nodes {
            Nodes::Server(url) => self.client_for(url).map(Some),
            Nodes::Cluster(_) => Ok(None),
        }
    }

    /// A connection that (re)connects on use and fails fast while Redis is
    /// away, so a service can start, and recover, without it.
    pub fn connect_lazy(&self) -> RedisResult<Conn> {
        match &self.nodes {
            Nodes::Server(url) => {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(CONNECT_TIMEOUT))
                    .set_response_timeout(Some(RESPONSE_TIMEOUT))
                    .set_number_of_retries(0)
                    .set_max_delay(Duration::from_millis(200));
                let manager =
                    ConnectionManager::new_lazy_with_config(self.client_for(url)?, config)?;
                Ok(Conn(Inner::Server(manager)))
            }
            Nodes::Cluster(nodes) => {
                let nodelay = redis::io::tcp::TcpSettings::default().set_nodelay(true);
                // Short waits between retries (MOVED, ASK, TRYAGAIN during a
                // slot move or a failover), all inside the response timeout.
                let mut builder = ClusterClient::builder(nodes.iter().map(String::as_str));
                if let Some(certs) = self.tls.certificates() {
                    builder = builder.certs(certs);
                }
                if self.tls.is_insecure() {
                    builder = builder.tls(redis::TlsMode::Insecure);
                }
                if let Some(password) = &self.password {
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
                let conn = client.get_pending_async_connection_with_config(config);
                Ok(Conn(Inner::Cluster(conn)))
            }
        }
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
            .field("tls", &self.tls)
            .finish()
    }
}

/// The address(es), never a password: for logs and messages.
impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addr = |url: &str| match url.into_connection_info() {
            Ok(info) => info.addr().to_string(),
            Err(_) => "an unreadable address".to_owned(),
        };
        match &self.nodes {
            Nodes::Server(url) => f.write_str(&addr(url))?,
            Nodes::Cluster(nodes) => {
                let nodes: Vec<String> = nodes.iter().map(|n| addr(n)).collect();
                write!(f, "the cluster at {}", nodes.join(","))?;
            }
        }
        if self.is_tls() {
            f.write_str(" (TLS)")?;
        }
        Ok(())
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

/// A connection to a [`Target`], used as any redis-rs async connection.
/// Cheap to clone: clones share it.
#[derive(Clone)]
pub struct Conn(Inner);

#[derive(Clone)]
enum Inner {
    Server(ConnectionManager),
    Cluster(ClusterConnection),
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Inner::Server(_) => "Conn(server)",
            Inner::Cluster(_) => "Conn(cluster)",
        })
    }
}

impl Conn {
    /// Whether a command may run twice: the cluster client sends a command
    /// again after a connection drops, and the first may have run. Callers
    /// whose commands are not idempotent make them so (a purchase gets a
    /// request id) where this is true.
    pub fn may_resend(&self) -> bool {
        matches!(self.0, Inner::Cluster(_))
    }

    /// Whether Redis answers: the server, or on a cluster any one node.
    /// A cluster client sends a bare `PING` to every master and wants every
    /// answer, so one master down would make the whole service look down,
    /// while the sales on the other masters are being served.
    pub async fn ping(&mut self) -> RedisResult<()> {
        self.ping_any().await.map_err(crate::tls::explain)
    }

    async fn ping_any(&mut self) -> RedisResult<()> {
        let cmd = redis::cmd("PING");
        match &mut self.0 {
            Inner::Server(c) => cmd.query_async(c).await,
            Inner::Cluster(c) => {
                // Every node at once, the first answer wins: a frozen node
                // neither delays it nor, picked by chance three times in a
                // row as random tries could, fails it (drill 14 once got a
                // 503 from /readyz while one master was frozen).
                let any = RoutingInfo::MultiNode((
                    MultipleNodeRoutingInfo::AllNodes,
                    Some(ResponsePolicy::OneSucceeded),
                ));
                c.route_command(cmd, any).await.map(drop)
            }
        }
    }

    /// Sends `FUNCTION LOAD` of `code` where a call on `key` runs: the one
    /// server, or the master that serves `key`'s slot. A library is loaded
    /// node by node as calls find it missing, so one unreachable node does
    /// not stop the others (a promoted replica has it already).
    pub(crate) async fn function_load(&mut self, code: &str, key: &[u8]) -> RedisResult<Value> {
        let mut cmd = redis::cmd("FUNCTION");
        cmd.arg("LOAD").arg(code);
        self.on_master_of(cmd, key).await
    }

    /// Sends `FUNCTION LOAD` of `code` to every master (the one server):
    /// for a call redirected by `ASK` during a slot move, which runs on a
    /// master that does not own the slot yet. A master that is unreachable
    /// or had it already does not stop the others; the call that follows
    /// says whether it worked.
    pub(crate) async fn function_load_everywhere(&mut self, code: &str) {
        let mut cmd = redis::cmd("FUNCTION");
        cmd.arg("LOAD").arg(code);
        let _: RedisResult<Value> = match &mut self.0 {
            Inner::Server(c) => cmd.query_async(c).await,
            Inner::Cluster(c) => {
                c.route_command(
                    cmd,
                    RoutingInfo::MultiNode((
                        MultipleNodeRoutingInfo::AllMasters,
                        Some(ResponsePolicy::AllSucceeded),
                    )),
                )
                .await
            }
        };
    }

    /// `WAIT replicas timeout` on the connection that wrote `key`: the
    /// number of replicas that have every write this connection sent to
    /// `key`'s master so far. Redis holds the connection's later commands
    /// until it answers, so callers share one wait among the writes made
    /// meanwhile.
    ///
    /// ```no_run
    /// # async fn run(mut conn: seckill_redis::Conn) -> redis::RedisResult<()> {
    /// let acked = conn.wait_replicas(b"{sale:1}:sale", 1, std::time::Duration::from_millis(100)).await?;
    /// assert!(acked >= 1, "the write is on a replica");
    /// # Ok(()) }
    /// ```
    pub async fn wait_replicas(
        &mut self,
        key: &[u8],
        replicas: u32,
        timeout: Duration,
    ) -> RedisResult<u32> {
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(replicas).arg(timeout.as_millis().max(1) as u64);
        redis::from_redis_value(self.on_master_of(cmd, key).await?).map_err(Into::into)
    }

    /// Sends `cmd` where a command on `key` runs.
    async fn on_master_of(&mut self, cmd: Cmd, key: &[u8]) -> RedisResult<Value> {
        match &mut self.0 {
            Inner::Server(c) => cmd.query_async(c).await,
            Inner::Cluster(c) => {
                let route = Route::with_key(key, SlotAddr::Master);
                c.route_command(
                    cmd,
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                )
                .await
            }
        }
    }
}

/// A connection to one server made with settings of its own (Redlock
/// sets its per-master timeouts this way).
impl From<ConnectionManager> for Conn {
    fn from(manager: ConnectionManager) -> Self {
        Self(Inner::Server(manager))
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.0 {
            Inner::Server(c) => c.req_packed_command(cmd),
            Inner::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.0 {
            Inner::Server(c) => c.req_packed_commands(cmd, offset, count),
            Inner::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.0 {
            Inner::Server(c) => c.get_db(),
            Inner::Cluster(c) => c.get_db(),
        }
    }
}
