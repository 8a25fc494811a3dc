//! Moves order events from every sale's Redis Stream into SQL.
//!
//! Each sale stream has one consumer group, `persister`; every running
//! persister is a consumer of it, so an entry goes to one of them. A batch
//! is read by `lua/read.lua`, which records its range in the sale's
//! persisting hash instead of a per-entry pending list; the record is
//! deleted only after the transaction holding the batch committed, and
//! inserting an order twice is a no-op, so a crash in between only means a
//! harmless second write. Ranges left behind by a persister that died are
//! read again and persisted by any persister once old enough. Streams are
//! trimmed only below the oldest entry not yet committed, so nothing
//! unpersisted is ever dropped.
//!
//! Sales are independent: every sale's read is sent at once (on a
//! cluster, to its own master), and one whose master is down or frozen
//! fails alone while the others are persisted. The reads never block
//! (`XREADGROUP` without `BLOCK`), so they share the persister's own
//! connection. Housekeeping (learning of sales, taking over abandoned
//! batches, trimming) runs beside the reads, so a frozen master costs it,
//! not them, a response timeout.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use redis::AsyncCommands;
use redis::aio::ConnectionLike;
use seckill_engine::{Engine, Event, StreamEntry};
use seckill_redis::Conn;
use tokio::sync::watch;

use crate::backlog::{SaleStream, committed_floor, in_flight};
use crate::error::Result;
use crate::store::Store;

/// How long a sale whose read failed is left out of the rounds.
const REST_AFTER_FAILURE: Duration = Duration::from_secs(5);

/// The consumer group every persister joins.
pub const GROUP: &str = "persister";

/// What a persister and the sweeper send outside scripts, as `INFO
/// commandstats` names them, for tools that measure what they cost Redis:
/// deletes of committed batches, looks at batches in flight, the group's
/// state, trims and the expiry cursor before them, the list of sales and
/// new groups, and the delete of a stream a group made again for a sale
/// deleted meanwhile. The reads are function calls (`lua/read.lua`, counted as
/// such); the `TIME` of a take-over is left out, as scripts send it too.
pub const PLAIN_COMMANDS: [&str; 8] = [
    "hdel",
    "del",
    "hgetall",
    "xinfo|groups",
    "xtrim",
    "hget",
    "smembers",
    "xgroup|create",
];

/// The persister's Lua as a Redis Functions library.
static LIBRARY: LazyLock<seckill_redis::Library> = LazyLock::new(|| {
    seckill_redis::Library::builder("seckill_orders")
        .function("read", &[include_str!("lua/read.lua")])
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
    /// Batches read this long ago and still not committed are taken over.
    pub claim_idle: Duration,
    /// How often the list of sales is refreshed, abandoned batches taken
    /// over and streams trimmed.
    pub housekeeping: Duration,
}

impl Default for PersisterConfig {
    fn default() -> Self {
        Self {
            consumer: format!(
                "{}-{}-{:08x}",
                std::process::id(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis())
                    .unwrap_or(0),
                rand::random::<u32>()
            ),
            batch: 2_000,
            poll: Duration::from_millis(20),
            claim_idle: Duration::from_secs(5),
            housekeeping: Duration::from_millis(500),
        }
    }
}

/// One persister. Run it with [`Persister::run`] until shutdown, or step it
/// with [`Persister::round`].
pub struct Persister {
    inner: Inner,
    /// When housekeeping is due next, for [`Persister::round`].
    next_housekeeping: Instant,
}

/// What the read loop and housekeeping share; cheap to clone, so that
/// [`Persister::run`] can give housekeeping a task of its own.
#[derive(Clone)]
struct Inner {
    engine: Engine,
    store: Store,
    /// The engine's connection (its own: the engine is this persister's).
    conn: Conn,
    config: PersisterConfig,
    sales: Arc<Mutex<Sales>>,
}

/// The sales a persister knows of. Locked only between awaits.
#[derive(Default)]
struct Sales {
    /// sale id -> its keys, of sales whose group exists.
    streams: HashMap<String, SaleStream>,
    /// Sales whose master was unreachable, and until when they are left out.
    resting: HashMap<String, Instant>,
}

impl Sales {
    fn is_resting(&self, sale: &str) -> bool {
        self.resting
            .get(sale)
            .is_some_and(|until| *until > Instant::now())
    }

    /// The sales not resting, with their keys.
    fn due(&self) -> Vec<(String, SaleStream)> {
        let due = self
            .streams
            .iter()
            .filter(|(sale, _)| !self.is_resting(sale));
        due.map(|(sale, keys)| (sale.clone(), keys.clone()))
            .collect()
    }
}

impl std::fmt::Debug for Persister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sales = self
            .inner
            .sales()
            .streams
            .keys()
            .cloned()
            .collect::<Vec<_>>();
        f.debug_struct("Persister")
            .field("consumer", &self.inner.config.consumer)
            .field("engine", &self.inner.engine)
            .field("store", &self.inner.store)
            .field("sales", &sales)
            .finish_non_exhaustive()
    }
}

impl Persister {
    /// A persister on `redis_url`. It does not wait for Redis: while Redis
    /// is away its rounds fail and are retried, and it reconnects by itself.
    pub async fn new(redis_url: &str, store: Store, config: PersisterConfig) -> Result<Self> {
        Self::with_target(&seckill_redis::Target::server(redis_url), store, config).await
    }

    /// A persister on `target`, one server or a cluster; as
    /// [`Persister::new`] otherwise.
    pub async fn with_target(
        target: &seckill_redis::Target,
        store: Store,
        config: PersisterConfig,
    ) -> Result<Self> {
        let engine = Engine::connect_target_lazy(target)?;
        let conn = engine.connection();
        let inner = Inner {
            engine,
            store,
            conn,
            config,
            sales: Arc::default(),
        };
        Ok(Self {
            inner,
            next_housekeeping: Instant::now(),
        })
    }

    /// Runs until `shutdown` resolves, then returns: the round in hand
    /// finishes first, so what it read is committed (each of its Redis and
    /// SQL calls is bounded by a timeout). Errors are logged and retried
    /// after a pause, never fatal.
    ///
    /// Housekeeping runs beside the reads, in a task of its own: its steps
    /// go to the master holding the registry of sales and to each sale's,
    /// and one of them frozen costs a whole response timeout, which the
    /// reads of the other sales must not wait for.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        let (stop, stopped) = watch::channel(());
        let keeper = tokio::spawn(self.inner.clone().keep_house(stopped));
        tokio::pin!(shutdown);
        loop {
            let pause = match self.inner.read_round().await {
                // No backlog: let the next batch grow for a while, as a
                // small batch costs more per order.
                Ok(n) if n < self.inner.config.batch => self.inner.config.poll,
                Ok(_) => Duration::ZERO,
                Err(e) => {
                    tracing::warn!(error = %e, "persister round failed; retrying");
                    Duration::from_millis(200)
                }
            };
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = tokio::time::sleep(pause) => {}
            }
        }
        drop(stop);
        if let Err(e) = keeper.await {
            tracing::warn!(error = %e, "the persister's housekeeping task failed");
        }
    }

    /// One round: housekeeping when due, then one batch of new entries from
    /// every sale stream, each committed to SQL. Answers how many events
    /// were persisted; 0 when there was nothing new.
    pub async fn round(&mut self) -> Result<usize> {
        let mut persisted = 0;
        if Instant::now() >= self.next_housekeeping {
            let (n, pause) = self.inner.housekeeping().await;
            persisted += n;
            self.next_housekeeping = Instant::now() + pause;
        }
        match self.inner.read_round().await {
            Ok(n) => Ok(persisted + n),
            Err(_) if persisted > 0 => Ok(persisted),
            Err(e) => Err(e),
        }
    }
}

impl Inner {
    fn sales(&self) -> std::sync::MutexGuard<'_, Sales> {
        // A panic while holding the lock leaves the maps whole (each
        // change is one insert, remove or retain).
        self.sales.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Housekeeping until `stopped`'s sender is dropped; the step in hand
    /// finishes first.
    async fn keep_house(self, mut stopped: watch::Receiver<()>) {
        loop {
            let (_, pause) = self.housekeeping().await;
            tokio::select! {
                biased;
                _ = stopped.changed() => return,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Learns of new sales, takes over abandoned batches and trims the
    /// streams. Each step on its own: the master holding the sale registry
    /// (or one sale) being down must not stop the others. A step that
    /// failed outright (the registry's master, or the one asked the time,
    /// unreachable) puts the next housekeeping off as long as a resting
    /// sale is left out. Answers the events persisted and the pause until
    /// the next housekeeping.
    async fn housekeeping(&self) -> (usize, Duration) {
        let mut pause = self.config.housekeeping;
        if let Err(e) = self.refresh_streams().await {
            tracing::warn!(error = %e, "learning of new sales failed");
            pause = REST_AFTER_FAILURE;
        }
        let persisted = match self.claim_abandoned().await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "taking over abandoned batches failed");
                pause = REST_AFTER_FAILURE;
                0
            }
        };
        self.trim().await;
        (persisted, pause)
    }

    /// One batch of new entries from every sale stream not resting, each
    /// committed to SQL as soon as its read is in: a frozen master's read
    /// holds up no other sale's commit.
    async fn read_round(&self) -> Result<usize> {
        let due = self.sales().due();
        let mut reads: FuturesUnordered<_> = due
            .into_iter()
            .map(|(sale, keys)| {
                let mut read = LIBRARY.call("read", &[&keys.stream, &keys.persisting]);
                read.arg(GROUP)
                    .arg(&self.config.consumer)
                    .arg(self.config.batch);
                let mut conn = self.conn.clone();
                async move {
                    let text: redis::RedisResult<String> = read.invoke(&mut conn).await;
                    (sale, keys, text)
                }
            })
            .collect();
        let (mut persisted, mut failed) = (0, None);
        while let Some((sale, keys, text)) = reads.next().await {
            let text = match text {
                Ok(text) => text,
                Err(e) => {
                    let e = e.into();
                    self.sale_failed(&sale, "reading its orders", &e);
                    failed.get_or_insert(e);
                    continue;
                }
            };
            let mut events = Vec::new();
            if let Some(first) = Event::decode_lines(&sale, &text, &mut events) {
                let first = first.to_owned();
                persisted += self.persist(&keys, &first, &events).await?;
            }
        }
        match failed {
            // Nothing moved: the run loop pauses before the next round.
            Some(e) if persisted == 0 => Err(e),
            _ => Ok(persisted),
        }
    }

    /// Logs a failed step on `sale`, and leaves the sale out for a while
    /// when its master could not be reached or answered too late (perhaps
    /// after a whole response timeout: a frozen master), so the other
    /// sales' rounds stay short. An error reply (a group made again, say)
    /// is retried at once.
    fn sale_failed(&self, sale: &str, step: &str, e: &crate::Error) {
        tracing::warn!(sale, error = %e, "{step} failed");
        let unreachable = e.redis().is_some_and(|e| {
            e.is_timeout()
                || e.is_io_error()
                || e.is_connection_dropped()
                || e.is_connection_refusal()
                || e.is_cluster_error()
        });
        if unreachable {
            self.sales()
                .resting
                .insert(sale.to_owned(), Instant::now() + REST_AFTER_FAILURE);
        }
    }

    /// Commits order events to SQL, then deletes the record of the batch
    /// they were read as, the one starting at `first`.
    async fn persist(&self, keys: &SaleStream, first: &str, events: &[Event]) -> Result<usize> {
        self.store.apply(events).await?;
        let _: i64 = self.conn.clone().hdel(&keys.persisting, first).await?;
        Ok(events.len())
    }

    /// Learns of new sales: creates their group (from the first entry, so
    /// nothing already in the stream is missed) and records the sale in SQL.
    async fn refresh_streams(&self) -> Result<()> {
        let ids: HashSet<String> = self.engine.sale_ids().await?.into_iter().collect();
        let known: HashSet<String> = {
            let mut sales = self.sales();
            sales.streams.retain(|sale, _| ids.contains(sale));
            sales.resting.retain(|sale, _| ids.contains(sale));
            sales.streams.keys().cloned().collect()
        };
        let mut conn = self.conn.clone();
        for id in ids {
            if self.sales().is_resting(&id) {
                continue;
            }
            let keys = SaleStream::new(&id)?;
            // Every time, not just for new sales: a stream deleted and made
            // again (a sale recreated, Redis rebuilt from SQL) needs its
            // group back, or every read fails with NOGROUP.
            let created: redis::RedisResult<()> =
                conn.xgroup_create_mkstream(&keys.stream, GROUP, "0").await;
            let new_group = match created {
                Ok(()) => true,
                Err(e) if e.code() == Some("BUSYGROUP") => false,
                // Its master unreachable: the others go on; it is tried
                // again at the next housekeeping.
                Err(e) => {
                    self.sale_failed(&id, "checking its group", &e.into());
                    continue;
                }
            };
            if new_group || !known.contains(&id) {
                match self.engine.sale(&id).await {
                    Ok(sale) => self.store.upsert_sale(&sale).await?,
                    Err(seckill_engine::Error::SaleNotFound(_)) => {
                        // Deleted or archived since it was listed: the
                        // group just made its stream again, an empty key
                        // that nothing would ever remove.
                        if new_group {
                            let _: i64 = conn.del(&keys.stream).await?;
                        }
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            self.sales().streams.insert(id, keys);
        }
        Ok(())
    }

    /// Persists the batches some persister read at least `claim_idle` ago
    /// and never committed, reading each range again. Two persisters may
    /// take over the same batch at once: both write the same rows.
    async fn claim_abandoned(&self) -> Result<usize> {
        let mut persisted = 0;
        let mut conn = self.conn.clone();
        let now = redis_ms(&mut conn).await?;
        let idle = self.config.claim_idle.as_millis() as u64;
        let due = self.sales().due();
        for (sale, keys) in due {
            let batches = match in_flight(&mut conn, &keys.persisting).await {
                Ok(batches) => batches,
                Err(e) => {
                    self.sale_failed(&sale, "reading its batches", &e);
                    continue;
                }
            };
            for batch in batches {
                if now.saturating_sub(batch.read_ms) < idle {
                    continue;
                }
                let entries =
                    StreamEntry::range(&mut conn, &keys.stream, &batch.first, &batch.last).await?;
                tracing::info!(sale, first = batch.first, "taking over an abandoned batch");
                let events: Vec<Event> = entries
                    .iter()
                    .flat_map(|e| Event::decode(&sale, e))
                    .collect();
                persisted += self.persist(&keys, &batch.first, &events).await?;
            }
        }
        Ok(persisted)
    }

    /// Drops entries every persister has committed, and only those; the
    /// engine keeps those pending orders still live in.
    async fn trim(&self) {
        let due = self.sales().due();
        for (sale, _) in due {
            if let Err(e) = self.trim_sale(&sale).await {
                self.sale_failed(&sale, "trimming its stream", &e);
            }
        }
    }

    async fn trim_sale(&self, sale: &str) -> Result<()> {
        if let Some(floor) = committed_floor(&mut self.conn.clone(), sale).await? {
            self.engine.trim_stream(sale, &floor).await?;
        }
        Ok(())
    }
}

/// The server's clock in ms: the one the records' times come from.
async fn redis_ms(conn: &mut (impl ConnectionLike + Send + Sync)) -> Result<u64> {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await?;
    Ok(secs * 1000 + micros / 1000)
}
