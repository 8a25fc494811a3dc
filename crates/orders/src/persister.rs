//! Moves order events from every sale's Redis Stream into SQL.
//!
//! Each sale stream has one consumer group, `persister`; every running
//! persister is a consumer of it, so an entry goes to one of them. An entry
//! is acknowledged (XACK) only after the transaction holding it committed,
//! and inserting an order twice is a no-op, so a crash between commit and
//! acknowledgement only means a harmless redelivery. Entries left pending by
//! a consumer that died are taken over (XAUTOCLAIM) once idle long enough.
//! Streams are trimmed only below the oldest entry the group has not
//! acknowledged, so nothing unpersisted is ever dropped.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redis::aio::{ConnectionLike, ConnectionManager};
use seckill_engine::{Engine, Event, StreamEntry, next_entry_id};

use crate::error::Result;
use crate::store::Store;

/// The consumer group every persister joins.
pub const GROUP: &str = "persister";

/// How a persister runs.
#[derive(Clone, Debug)]
pub struct PersisterConfig {
    /// This consumer's name; unique per running persister.
    pub consumer: String,
    /// Most entries read per stream per round (one SQL transaction).
    pub batch: usize,
    /// How long one read blocks waiting for new entries.
    pub block: Duration,
    /// Entries pending this long on any consumer are taken over.
    pub claim_idle: Duration,
    /// How often the list of sales is refreshed, dead consumers' entries
    /// claimed and streams trimmed.
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
            block: Duration::from_millis(50),
            claim_idle: Duration::from_secs(5),
            housekeeping: Duration::from_millis(500),
        }
    }
}

/// One persister. Run it with [`Persister::run`] until shutdown, or step it
/// with [`Persister::round`].
pub struct Persister {
    engine: Engine,
    store: Store,
    /// Dedicated to this persister: blocking reads must not stall others.
    conn: ConnectionManager,
    config: PersisterConfig,
    /// sale id -> stream key, of sales whose group exists.
    streams: HashMap<String, String>,
    last_housekeeping: Option<Instant>,
}

impl Persister {
    /// A persister on `redis_url`. It does not wait for Redis: while Redis
    /// is away its rounds fail and are retried, and it reconnects by itself.
    pub async fn new(redis_url: &str, store: Store, config: PersisterConfig) -> Result<Self> {
        let engine = Engine::connect_lazy(redis_url)?;
        let client = seckill_lock::client(redis_url).map_err(seckill_engine::Error::from)?;
        // Its own connection: reads block for `config.block`, so give them
        // room beyond that, and never stall anyone else's commands.
        let conn_config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(config.block + Duration::from_secs(2)))
            .set_number_of_retries(0)
            .set_max_delay(Duration::from_millis(200));
        let conn = ConnectionManager::new_lazy_with_config(client, conn_config)?;
        Ok(Self {
            engine,
            store,
            conn,
            config,
            streams: HashMap::new(),
            last_housekeeping: None,
        })
    }

    /// Runs rounds until `shutdown` resolves, then finishes the round in
    /// hand (its transaction commits and is acknowledged) and returns.
    /// Errors are logged and retried after a pause, never fatal.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                biased;
                () = &mut shutdown => return,
                round = self.round() => {
                    if let Err(e) = round {
                        tracing::warn!(error = %e, "persister round failed; retrying");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
        }
    }

    /// One round: housekeeping when due, then one read of new entries from
    /// every sale stream, committed and acknowledged. Answers how many
    /// events were persisted.
    pub async fn round(&mut self) -> Result<usize> {
        let mut persisted = 0;
        if self
            .last_housekeeping
            .is_none_or(|t| t.elapsed() >= self.config.housekeeping)
        {
            self.last_housekeeping = Some(Instant::now());
            self.refresh_streams().await?;
            persisted += self.claim_abandoned().await?;
            self.trim().await?;
        }
        if self.streams.is_empty() {
            tokio::time::sleep(self.config.block).await;
            return Ok(persisted);
        }
        let (sales, keys): (Vec<&String>, Vec<&String>) = self.streams.iter().unzip();
        let reply: Option<Vec<(String, redis::Value)>> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(&self.config.consumer)
            .arg("COUNT")
            .arg(self.config.batch)
            .arg("BLOCK")
            .arg(self.config.block.as_millis() as u64)
            .arg("STREAMS")
            .arg(&keys)
            .arg(vec![">"; keys.len()])
            .query_async(&mut self.conn)
            .await?;
        let by_key: HashMap<&String, &String> =
            keys.iter().copied().zip(sales.iter().copied()).collect();
        let mut batch = Vec::new();
        for (key, entries) in reply.unwrap_or_default() {
            let Some(sale) = by_key.get(&key) else {
                continue;
            };
            batch.push((sale.to_string(), StreamEntry::list(&entries)?, key));
        }
        for (sale, entries, key) in batch {
            persisted += self.persist(&key, &sale, &entries).await?;
        }
        Ok(persisted)
    }

    /// Commits the order events `entries` of one stream carry to SQL, then
    /// acknowledges the entries, all in one XACK.
    async fn persist(&mut self, key: &str, sale: &str, entries: &[StreamEntry]) -> Result<usize> {
        if entries.is_empty() {
            return Ok(0);
        }
        let events: Vec<Event> = entries
            .iter()
            .flat_map(|e| Event::decode(sale, e))
            .collect();
        self.store.apply(&events).await?;
        let ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
        let _: i64 = self.conn.xack(key, GROUP, &ids).await?;
        Ok(events.len())
    }

    /// Learns of new sales: creates their group (from the first entry, so
    /// nothing already in the stream is missed) and records the sale in SQL.
    async fn refresh_streams(&mut self) -> Result<()> {
        let ids: HashSet<String> = self.engine.sale_ids().await?.into_iter().collect();
        self.streams.retain(|sale, _| ids.contains(sale));
        for id in ids {
            let key = Engine::stream_key(&id)?;
            // Every time, not just for new sales: a stream deleted and made
            // again (a sale recreated, Redis rebuilt from SQL) needs its
            // group back, or every read fails with NOGROUP.
            let created: redis::RedisResult<()> =
                self.conn.xgroup_create_mkstream(&key, GROUP, "0").await;
            let new_group = match created {
                Ok(()) => true,
                Err(e) if e.code() == Some("BUSYGROUP") => false,
                Err(e) => return Err(e.into()),
            };
            if new_group || !self.streams.contains_key(&id) {
                match self.engine.sale(&id).await {
                    Ok(sale) => self.store.upsert_sale(&sale).await?,
                    Err(seckill_engine::Error::SaleNotFound(_)) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            self.streams.insert(id, key);
        }
        Ok(())
    }

    /// Takes over entries another consumer read but never acknowledged.
    async fn claim_abandoned(&mut self) -> Result<usize> {
        let mut persisted = 0;
        let idle = self.config.claim_idle.as_millis() as u64;
        for (sale, key) in self.streams.clone() {
            let mut start = "0-0".to_owned();
            loop {
                // Redis 7: [next start, claimed entries, deleted ids].
                let (next, claimed, _deleted): (String, redis::Value, redis::Value) =
                    redis::cmd("XAUTOCLAIM")
                        .arg(&key)
                        .arg(GROUP)
                        .arg(&self.config.consumer)
                        .arg(idle)
                        .arg(&start)
                        .arg("COUNT")
                        .arg(self.config.batch)
                        .query_async(&mut self.conn)
                        .await?;
                let claimed = StreamEntry::list(&claimed)?;
                persisted += self.persist(&key, &sale, &claimed).await?;
                if next == "0-0" {
                    break;
                }
                start = next;
            }
        }
        Ok(persisted)
    }

    /// Drops entries every consumer has acknowledged, and only those; the
    /// engine keeps those pending orders still live in.
    async fn trim(&mut self) -> Result<()> {
        for (sale, key) in &self.streams {
            if let Some(floor) = acknowledged_floor(&mut self.conn, key).await? {
                self.engine.trim_stream(sale, &floor).await?;
            }
        }
        Ok(())
    }
}

/// Order events of sale `sale_id` not yet persisted: read but not
/// acknowledged, or not read at all (the whole stream before any persister
/// has seen the sale).
pub async fn unpersisted(
    conn: &mut (impl ConnectionLike + Send + Sync),
    sale_id: &str,
) -> Result<u64> {
    let key = Engine::stream_key(sale_id)?;
    Ok(match group_info(conn, &key).await? {
        Some(g) => {
            let undelivered = match g.lag {
                Some(lag) => lag,
                // Redis cannot always say (after deletions): count them.
                None => entries_after(conn, &key, &g.last_delivered_id).await?,
            };
            g.pending + undelivered
        }
        None => conn.xlen(&key).await?,
    })
}

/// Entries of `key` after id `after`.
async fn entries_after(
    conn: &mut (impl ConnectionLike + Send + Sync),
    key: &str,
    after: &str,
) -> Result<u64> {
    const PAGE: usize = 10_000;
    let mut count = 0;
    let mut start = format!("({after}");
    loop {
        let page: redis::streams::StreamRangeReply =
            conn.xrange_count(key, &start, "+", PAGE).await?;
        count += page.ids.len() as u64;
        match page.ids.last() {
            Some(last) if page.ids.len() == PAGE => start = format!("({}", last.id),
            _ => return Ok(count),
        }
    }
}

/// The lowest entry id the group still needs: its oldest pending entry, or
/// the one after the last delivered. Entries below it are safe to drop.
/// `None` if the group does not exist.
pub(crate) async fn acknowledged_floor(
    conn: &mut (impl ConnectionLike + Send + Sync),
    key: &str,
) -> Result<Option<String>> {
    let Some(group) = group_info(conn, key).await? else {
        return Ok(None);
    };
    let pending: redis::streams::StreamPendingReply = conn.xpending(key, GROUP).await?;
    let floor = match pending {
        redis::streams::StreamPendingReply::Data(data) => data.start_id,
        _ => next_entry_id(&group.last_delivered_id),
    };
    Ok(Some(floor))
}

pub(crate) struct GroupInfo {
    pub last_delivered_id: String,
    pub pending: u64,
    /// Entries not yet delivered to any consumer (Redis 7 `lag`).
    pub lag: Option<u64>,
}

pub(crate) async fn group_info(
    conn: &mut (impl ConnectionLike + Send + Sync),
    key: &str,
) -> Result<Option<GroupInfo>> {
    let groups: redis::RedisResult<Vec<HashMap<String, redis::Value>>> = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(key)
        .query_async(conn)
        .await;
    let groups = match groups {
        Ok(g) => g,
        Err(e) if e.to_string().contains("no such key") => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    for group in groups {
        let text = |k: &str| -> Option<String> {
            group
                .get(k)
                .and_then(|v| redis::from_redis_value_ref(v).ok())
        };
        if text("name").as_deref() != Some(GROUP) {
            continue;
        }
        let number = |k: &str| {
            group
                .get(k)
                .and_then(|v| redis::from_redis_value_ref::<u64>(v).ok())
        };
        return Ok(Some(GroupInfo {
            last_delivered_id: text("last-delivered-id").unwrap_or_else(|| "0-0".to_owned()),
            pending: number("pending").unwrap_or(0),
            lag: number("lag"),
        }));
    }
    Ok(None)
}
