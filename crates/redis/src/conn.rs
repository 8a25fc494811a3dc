//! [`Conn`]: the connection every crate above takes, to one server, a
//! cluster or the master the sentinels name, used as any redis-rs async
//! connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, ResponsePolicy, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value};

use crate::sentinel::Following;

/// A connection to a [`Target`](crate::Target), used as any redis-rs
/// async connection. Cheap to clone: clones share it.
#[derive(Clone)]
pub struct Conn {
    inner: Inner,
    /// See [`Conn::epoch`].
    epoch: Arc<AtomicU64>,
}

#[derive(Clone)]
pub(crate) enum Inner {
    Server(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(Following),
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.inner {
            Inner::Server(_) => "Conn(server)",
            Inner::Cluster(_) => "Conn(cluster)",
            Inner::Sentinel(_) => "Conn(sentinel)",
        })
    }
}

impl Conn {
    pub(crate) fn new(inner: Inner, epoch: Arc<AtomicU64>) -> Self {
        Self { inner, epoch }
    }

    /// A number that changes whenever the connection under this one may
    /// have changed since: a request failed on a broken connection (the
    /// next one reconnects), or the sentinels named a new master. A `WAIT`
    /// counts only the writes of its own connection, so it confirms a
    /// write only if the epoch read before the write was sent is the one
    /// read after the `WAIT` answered.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Whether it is a cluster's: a call's keys must then share a hash slot.
    pub fn is_cluster(&self) -> bool {
        matches!(self.inner, Inner::Cluster(_))
    }

    /// Whether a command may run twice: the cluster client sends a command
    /// again after a connection drops, and the first may have run. Callers
    /// whose commands are not idempotent make them so (a purchase gets a
    /// request id) where this is true.
    pub fn may_resend(&self) -> bool {
        self.is_cluster()
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
        match &mut self.inner {
            Inner::Server(c) => cmd.query_async(c).await,
            Inner::Sentinel(c) => cmd.query_async(c).await,
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
        let _: RedisResult<Value> = match &mut self.inner {
            Inner::Server(c) => cmd.query_async(c).await,
            Inner::Sentinel(c) => cmd.query_async(c).await,
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
        match &mut self.inner {
            Inner::Server(c) => cmd.query_async(c).await,
            Inner::Sentinel(c) => cmd.query_async(c).await,
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
        Self::new(Inner::Server(manager), Arc::default())
    }
}

/// Whether `e` says the connection broke, so the next request goes on
/// another one.
fn broken(e: &RedisError) -> bool {
    e.is_io_error() || e.is_unrecoverable_error() || e.is_timeout()
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let epoch = self.epoch.clone();
        let sent = match &mut self.inner {
            Inner::Server(c) => c.req_packed_command(cmd),
            Inner::Cluster(c) => c.req_packed_command(cmd),
            Inner::Sentinel(c) => c.req_packed_command(cmd),
        };
        Box::pin(async move {
            let answer = sent.await;
            if answer.as_ref().is_err_and(broken) {
                epoch.fetch_add(1, Ordering::SeqCst);
            }
            answer
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let epoch = self.epoch.clone();
        let sent = match &mut self.inner {
            Inner::Server(c) => c.req_packed_commands(cmd, offset, count),
            Inner::Cluster(c) => c.req_packed_commands(cmd, offset, count),
            Inner::Sentinel(c) => c.req_packed_commands(cmd, offset, count),
        };
        Box::pin(async move {
            let answer = sent.await;
            if answer.as_ref().is_err_and(broken) {
                epoch.fetch_add(1, Ordering::SeqCst);
            }
            answer
        })
    }

    fn get_db(&self) -> i64 {
        match &self.inner {
            Inner::Server(c) => c.get_db(),
            Inner::Cluster(c) => c.get_db(),
            Inner::Sentinel(c) => c.get_db(),
        }
    }
}
