//! How a persister runs ([`PersisterConfig`], and the fixed pauses of
//! the background tasks) and meets Redis: the consumer group it joins, the
//! crate's Lua library, the commands it sends outside scripts.

use std::sync::LazyLock;
use std::time::Duration;

/// How long a master whose read failed is left out of a persister's rounds.
pub(crate) const REST_AFTER_FAILURE: Duration = Duration::from_secs(5);

/// How long a persister's round waits for a master's read before going on
/// without it (the read stays in flight).
pub(crate) const READ_WAIT: Duration = Duration::from_millis(100);

/// How often a persister or sweeper on a cluster asks which masters serve
/// which slots (each time on a new connection to a seed node).
pub(crate) const WATCH_MASTERS_EVERY: Duration = Duration::from_secs(2);

/// The orders crate's Lua (the persister's reads and the ledger's
/// bookkeeping, the sweeper's due index) as a Redis Functions library.
pub(crate) static LIBRARY: LazyLock<seckill_redis::Library> = LazyLock::new(|| {
    seckill_redis::Library::builder("seckill_orders")
        .cross_slot("read_news", &[include_str!("lua/read_news.lua")])
        .cross_slot("ledger_done", &[include_str!("lua/ledger_done.lua")])
        .function("claim_batch", &[include_str!("lua/claim_batch.lua")])
        .read_only("due", &[include_str!("lua/due.lua")])
        .build()
});

/// How a persister runs.
#[derive(Clone, Debug)]
pub struct PersisterConfig {
    /// This consumer's name; unique per running persister.
    pub consumer: String,
    /// Most entries read per stream per round (one SQL transaction).
    pub batch: usize,
    /// How long to wait before reading again after a round found less
    /// than a batch.
    pub poll: Duration,
    /// The longest wait after rounds that found nothing: each empty round
    /// doubles the wait from `poll` up to this, so an idle persister sends
    /// each master a few calls a second, and the first order after a quiet
    /// spell waits at most this long to be read.
    pub idle_poll: Duration,
    /// Batches read this long ago and still not committed by a persister
    /// that has gone quiet as long are taken over.
    pub claim_idle: Duration,
    /// How often the registry's log is read and the other persisters'
    /// marks looked at.
    pub housekeeping: Duration,
    /// How often every sale is read, and every abandoned batch looked for,
    /// whatever the signals said.
    pub full_read: Duration,
    /// With `Some(timeout)`, what a read took is committed to SQL only
    /// once every replica the master lists online has it, however long
    /// unheard
    /// ([`Conn::on_every_replica`](seckill_redis::Conn::on_every_replica)
    /// with [`Replicas::Online`](seckill_redis::Replicas::Online) after the
    /// read, on the connection that read; replication is ordered, so a
    /// replica that has the read has the purchases before it). Stricter
    /// than a purchase's wait, which passes over a replica unheard for two
    /// seconds, so that SQL does not keep what a promoted replica lacks. A
    /// purchase its master answered and a replica lacked, lost with the
    /// master in a failover that promoted that replica, then never reaches
    /// SQL either. A read left unconfirmed stays pending and is taken over
    /// once `claim_idle` old, under the same rule: a master cut off from
    /// its replicas (the sentinels promoted one) may answer for seconds
    /// before it is made a replica and forgets what it took. A frozen
    /// replica delays commits until it runs again, or its master drops it
    /// and another replica confirms.
    /// Set by `--durability replica`; `None` (the default) commits at once.
    pub replica_wait: Option<Duration>,
}

impl PersisterConfig {
    /// Commits as purchases are acknowledged: with
    /// [`Durability::Replica`](seckill_engine::Durability::Replica), only
    /// what every replica has, waiting as long as a purchase would
    /// ([`PersisterConfig::replica_wait`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use seckill_engine::Durability;
    /// use seckill_orders::PersisterConfig;
    /// let timeout = Duration::from_millis(250);
    /// let config = PersisterConfig::default().with_durability(Durability::Replica { timeout });
    /// assert_eq!(config.replica_wait, Some(timeout));
    /// ```
    pub fn with_durability(mut self, durability: seckill_engine::Durability) -> Self {
        self.replica_wait = match durability {
            seckill_engine::Durability::Primary => None,
            seckill_engine::Durability::Replica { timeout } => Some(timeout),
        };
        self
    }
}

impl Default for PersisterConfig {
    fn default() -> Self {
        Self {
            consumer: format!(
                "{}-{}-{:08x}",
                std::process::id(),
                crate::clock::now_ms(),
                rand::random::<u32>()
            ),
            batch: 2_000,
            poll: Duration::from_millis(20),
            idle_poll: Duration::from_millis(160),
            claim_idle: Duration::from_secs(5),
            housekeeping: Duration::from_millis(500),
            full_read: Duration::from_secs(300),
            replica_wait: None,
        }
    }
}

/// The consumer group every persister joins.
pub const GROUP: &str = "persister";

/// What a persister and the sweeper send outside scripts, as `INFO
/// commandstats` names them, for tools that measure what they cost Redis:
/// deletes of committed batches, looks at batches in flight and at the
/// readers, the group's state (and an armed sale's last entry), trims and
/// the expiry cursor before them,
/// and the list of sales. The reads and sweeps are function calls
/// (`lua/read_news.lua`, the engine's `expire`, counted as such); the
/// `TIME` of a take-over and the ledgers' `XREADGROUP` are left out, as
/// scripts send them too (an idle ledger's read costs a few µs a round; a
/// busy sale is read by the script).
pub const PLAIN_COMMANDS: [&str; 7] = [
    "hdel",
    "hgetall",
    "xinfo|groups",
    "xtrim",
    "hget",
    "xrevrange",
    "smembers",
];
