//! [`Conn`]: the connection every crate above takes, to one server, a
//! cluster or the master the sentinels name, used as any redis-rs async
//! connection; and [`Replicas`], which replicas its confirmation that a
//! write is kept (`WAIT`) counts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, ResponsePolicy, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

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

    /// Whether every replica that could take over from `key`'s master has
    /// every write this connection sent to it so far, confirmed within
    /// `timeout`, and the connection is still the one of `epoch` (read
    /// before those writes were sent: a `WAIT` counts only its own
    /// connection's writes, see [`Conn::epoch`]); false when not all of
    /// them confirmed in time, or the connection was made again. Redis
    /// holds the connection's later commands until it answers, so callers
    /// share one confirmation among the writes made meanwhile.
    ///
    /// Every one, not one of them: the sentinels, or a cluster's replicas
    /// in their election, pick the replica to promote by offsets that may
    /// be a second old, so a confirmation by one replica of two did not
    /// keep a write through a failover that promoted the other. `which`
    /// says which replicas could take over (see [`Replicas`]); never fewer
    /// than one is waited for.
    ///
    /// ```no_run
    /// # async fn run(mut conn: seckill_redis::Conn) -> redis::RedisResult<()> {
    /// use seckill_redis::Replicas;
    /// let epoch = conn.epoch();
    /// // … writes to {sale:1} …
    /// let timeout = std::time::Duration::from_millis(100);
    /// let kept = conn.on_every_replica(b"{sale:1}:sale", epoch, timeout, Replicas::Online).await?;
    /// assert!(kept, "the writes are on every replica");
    /// # Ok(()) }
    /// ```
    pub async fn on_every_replica(
        &mut self,
        key: &[u8],
        epoch: u64,
        timeout: Duration,
        which: Replicas,
    ) -> RedisResult<bool> {
        let mut info = redis::cmd("INFO");
        info.arg("replication");
        let info: String = redis::from_redis_value(self.on_master_of(info, key).await?)?;
        // At least one, as a master without a replica listed may gain one
        // within `timeout` (a replica finishing its first sync).
        let replicas = which.count(&info).max(1);
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas).arg(timeout.as_millis().max(1) as u64);
        let acked: usize = redis::from_redis_value(self.on_master_of(wait, key).await?)?;
        Ok(acked >= replicas && self.epoch() == epoch)
    }

    /// Sends `cmd` where a command on `key` runs. A failure on a broken
    /// connection raises the epoch, as one of any request does: the client
    /// reconnects after it, and a `WAIT` sent on the new connection, to the
    /// same server, would confirm none of the old one's writes.
    async fn on_master_of(&mut self, cmd: Cmd, key: &[u8]) -> RedisResult<Value> {
        let answer = match &mut self.inner {
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
        };
        raise_if_broken(&self.epoch, &answer);
        answer
    }
}

/// A connection to one server made with settings of its own (Redlock
/// sets its per-master timeouts this way).
impl From<ConnectionManager> for Conn {
    fn from(manager: ConnectionManager) -> Self {
        Self::new(Inner::Server(manager), Arc::default())
    }
}

/// Raises `epoch` (see [`Conn::epoch`]) if `answer` says the connection
/// broke, so the next request goes on another one.
fn raise_if_broken<T>(epoch: &AtomicU64, answer: &RedisResult<T>) {
    if let Err(e) = answer
        && (e.is_io_error() || e.is_unrecoverable_error() || e.is_timeout())
    {
        epoch.fetch_add(1, Ordering::SeqCst);
    }
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
            raise_if_broken(&epoch, &answer);
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
            raise_if_broken(&epoch, &answer);
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

/// The replicas [`Conn::on_every_replica`] counts as able to take over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replicas {
    /// Those the master lists online (`INFO replication`) and heard from
    /// within the last two seconds (replicas report every second): one
    /// frozen or cut off longer is not waited for while another is in
    /// touch, as it would stop every confirmation until the master dropped
    /// it (a minute by default), and the sentinels stop choosing a replica
    /// that does not answer them for five seconds. For a purchase, whose
    /// buyer waits: a frozen replica costs 503s for two seconds, not a
    /// minute; what that leaves is a replica two to five seconds out of
    /// touch that is promoted all the same.
    InTouch,
    /// Every one the master lists online, however long unheard: one frozen
    /// holds every confirmation until it runs again or the master drops
    /// it. For what is written elsewhere on the strength of it (the orders
    /// persister's SQL), which must not hold what a promoted replica
    /// lacks: counted as purchases are, a replica unheard for just over
    /// two seconds may be waited for by a purchase (refused when the
    /// master dies) and not by the persister that reads it a moment later.
    Online,
}

impl Replicas {
    /// How many replicas an `INFO replication` answer lists as `self`
    /// says: lines such as
    /// `slave0:ip=10.0.0.2,port=6379,state=online,offset=123,lag=0`.
    fn count(self, info: &str) -> usize {
        info.lines()
            .filter(|l| l.starts_with("slave") && l.contains(':'))
            .filter(|l| {
                let field = |name: &str| {
                    l.split([':', ','])
                        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                };
                field("state") == Some("online")
                    && (self == Replicas::Online
                        // -1 too: Redis 7.0 reports it under load (its
                        // cached clock trailing the stamp of the replica's
                        // last report), and a replica heard from just now
                        // is in touch.
                        || field("lag")
                            .and_then(|lag| lag.trim().parse::<i64>().ok())
                            .is_some_and(|lag| lag <= REPLICA_SILENCE))
            })
            .count()
    }
}

/// How long, in seconds, a replica may go unheard by its master and still
/// be waited for as [`Replicas::InTouch`].
const REPLICA_SILENCE: i64 = 2;

#[cfg(test)]
mod tests {
    use super::Replicas;

    const INFO: &str = "# Replication\r\nrole:master\r\nconnected_slaves:5\r\n\
        slave0:ip=127.0.0.1,port=7001,state=online,offset=10,lag=0\r\n\
        slave1:ip=127.0.0.1,port=7002,state=online,offset=10,lag=2\r\n\
        slave2:ip=127.0.0.1,port=7003,state=online,offset=9,lag=3\r\n\
        slave3:ip=127.0.0.1,port=7004,state=wait_bgsave,offset=0,lag=0\r\n\
        slave4:ip=127.0.0.1,port=7005,state=online,offset=10,lag=-1\r\n\
        master_failover_state:no-failover\r\nmaster_repl_offset:10\r\n";
    const NONE: &str = "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n";

    #[test]
    fn replicas_in_touch_are_those_online_and_heard_from_lately() {
        assert_eq!(Replicas::InTouch.count(INFO), 3);
        assert_eq!(Replicas::InTouch.count(NONE), 0);
    }

    #[test]
    fn replicas_online_are_all_those_online_however_long_unheard() {
        assert_eq!(Replicas::Online.count(INFO), 4);
        assert_eq!(Replicas::Online.count(NONE), 0);
    }
}
