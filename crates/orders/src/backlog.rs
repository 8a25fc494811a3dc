//! What is not yet in SQL: the entries of a sale's stream no persister has
//! committed (an entry holds one order event or, from `coalesced`, many),
//! and waiting for them to be. The persister, the audit and
//! the tools that wait for a drain all count the same way, here.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redis::aio::ConnectionLike;
use seckill_engine::{Engine, StreamEntry, entry_number, next_entry_id};

use crate::config::GROUP;
use crate::error::{Error, Result};
use crate::ledger::told_entries;
use crate::news::{MasterKeys, armed_end, is_armed};

/// The keys of a sale the persister works with.
#[derive(Clone, Debug)]
pub(crate) struct SaleStream {
    pub sale: String,
    pub stream: String,
    pub persisting: String,
}

impl SaleStream {
    pub fn new(sale: &str) -> Result<Self> {
        Ok(Self {
            sale: Engine::sale_key(sale)?,
            stream: Engine::stream_key(sale)?,
            persisting: Engine::persisting_key(sale)?,
        })
    }
}

/// Waits until every order event of sale `sale_id` is in SQL, checking
/// every 10 ms for at most `timeout`; answers how long it took, or
/// [`Error::NotDrained`] with what is left.
///
/// ```no_run
/// # async fn run() -> seckill_orders::Result<()> {
/// let mut conn = seckill_engine::client("redis://127.0.0.1:6379/")?
///     .get_multiplexed_async_connection()
///     .await?;
/// seckill_orders::wait_drained(&mut conn, "drop-1", std::time::Duration::from_secs(10)).await?;
/// # Ok(()) }
/// ```
pub async fn wait_drained(
    conn: &mut (impl ConnectionLike + Send + Sync),
    sale_id: &str,
    timeout: Duration,
) -> Result<Duration> {
    let started = Instant::now();
    loop {
        let own = in_stream(conn, sale_id).await?;
        let ledgers = told(conn, sale_id).await?.len() as u64;
        if own + ledgers == 0 {
            return Ok(started.elapsed());
        }
        if started.elapsed() >= timeout {
            // Where they wait, apart: a drain stuck in a sale's own stream
            // and one stuck in a ledger have different causes.
            return Err(Error::NotDrained {
                sale: sale_id.to_owned(),
                in_stream: own,
                told: ledgers,
                waited: timeout,
            });
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Stream entries of sale `sale_id` not yet persisted: read but not
/// committed, or not read at all (the whole stream before any persister
/// has seen the sale), from the sale's stream or from its master's ledger.
pub async fn unpersisted(
    conn: &mut (impl ConnectionLike + Send + Sync),
    sale_id: &str,
) -> Result<u64> {
    Ok(in_stream(conn, sale_id).await? + told(conn, sale_id).await?.len() as u64)
}

/// What [`unpersisted`] counts in the sale's own stream.
async fn in_stream(conn: &mut (impl ConnectionLike + Send + Sync), sale_id: &str) -> Result<u64> {
    let keys = SaleStream::new(sale_id)?;
    Ok(match group_info(conn, &keys.stream).await? {
        Some(g) => {
            let armed = is_armed(conn, &keys.sale).await?;
            let undelivered = match g.lag {
                // What an armed sale appended is counted as told (`told`).
                _ if armed => 0,
                Some(lag) => lag,
                // Redis cannot always say (after deletions): count them.
                None => {
                    let after = format!("({}", g.last_delivered_id);
                    StreamEntry::read(conn, &keys.stream, &after).await?.len() as u64
                }
            };
            let read: u64 = in_flight(conn, &keys.persisting)
                .await?
                .iter()
                .map(|b| b.entries)
                .sum();
            undelivered + read
        }
        // No persister read it yet: all of it.
        None => StreamEntry::count(conn, &keys.stream).await?,
    })
}

/// The entries of sale `sale_id`'s stream told through the ledgers of the
/// master its hash names (see `news.rs`) and not yet committed: not yet
/// delivered, or delivered and still pending; each as the sale's stream
/// holds it. A look over what they hold unacknowledged, for tools and the
/// audit. The master is the one of the ledger the sale is armed with
/// (`n`), else the last it was (`l`): a sale disarmed as busy may have
/// told more than the read that found it busy took.
pub(crate) async fn told(
    conn: &mut (impl ConnectionLike + Send + Sync),
    sale_id: &str,
) -> Result<Vec<StreamEntry>> {
    let keys = SaleStream::new(sale_id)?;
    let (armed, last): (Option<String>, Option<String>) = redis::cmd("HMGET")
        .arg(&keys.sale)
        .arg("n")
        .arg("l")
        .query_async(conn)
        .await?;
    let Some(ledger) = armed
        .as_deref()
        .and_then(|n| n.split(' ').next())
        .or(last.as_deref())
    else {
        return Ok(Vec::new());
    };
    // Both: while an earlier release shares the server, a sale may move
    // from one to the other with entries left in the first.
    let master = MasterKeys::of_ledger(ledger);
    let ledgers = master
        .as_ref()
        .map_or(vec![ledger], |m| m.ledgers().to_vec());
    let mut entries: Vec<StreamEntry> = Vec::new();
    for ledger in ledgers {
        let after = match group_info(conn, ledger).await? {
            Some(group) => {
                let summary: (u64, Option<String>, Option<String>, redis::Value) =
                    redis::cmd("XPENDING")
                        .arg(ledger)
                        .arg(GROUP)
                        .query_async(conn)
                        .await?;
                if let (n @ 1.., Some(low), Some(high), _) = summary {
                    let pending: Vec<(String, String, u64, u64)> = redis::cmd("XPENDING")
                        .arg(ledger)
                        .arg(GROUP)
                        .arg(&low)
                        .arg(&high)
                        .arg(n)
                        .query_async(conn)
                        .await?;
                    let pending: std::collections::HashSet<String> =
                        pending.into_iter().map(|p| p.0).collect();
                    entries.extend(
                        StreamEntry::range(conn, ledger, &low, &high)
                            .await?
                            .into_iter()
                            .filter(|e| pending.contains(&e.id)),
                    );
                }
                format!("({}", group.last_delivered_id)
            }
            None => "-".to_owned(),
        };
        entries.extend(StreamEntry::read(conn, ledger, &after).await?);
    }
    Ok(entries
        .into_iter()
        .flat_map(told_entries)
        .filter(|(sale, _)| *sale == keys.sale)
        .map(|(_, entry)| entry)
        .collect())
}

/// How far SQL is behind Redis for one sale.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Stream entries not yet committed to SQL (see [`unpersisted`]).
    pub entries: u64,
    /// When the oldest of them was added, ms since the Unix epoch by the
    /// Redis server's clock (its stream entry id); `None` when none is left.
    pub oldest_ms: Option<u64>,
}

impl Backlog {
    /// How long the oldest entry not yet in SQL has waited, by this
    /// machine's clock (0 when none is left).
    pub fn lag_ms(&self) -> u64 {
        let now_ms = crate::clock::now_ms();
        self.oldest_ms.map_or(0, |at| now_ms.saturating_sub(at))
    }

    /// Both backlogs as one (a sharded sale's, over its shards).
    pub fn and(self, other: Self) -> Self {
        Self {
            entries: self.entries + other.entries,
            oldest_ms: match (self.oldest_ms, other.oldest_ms) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }
    }
}

/// Sale `sale_id`'s entries not yet in SQL, and the age of the oldest: the
/// first of the oldest batch read and not committed, else the first entry
/// not yet read, or the oldest told through the ledger if older.
///
/// ```no_run
/// # async fn run(mut conn: redis::aio::MultiplexedConnection) -> seckill_orders::Result<()> {
/// let backlog = seckill_orders::backlog(&mut conn, "drop-1").await?;
/// println!("{} entries behind", backlog.entries);
/// # Ok(()) }
/// ```
pub async fn backlog(
    conn: &mut (impl ConnectionLike + Send + Sync),
    sale_id: &str,
) -> Result<Backlog> {
    let told = told(conn, sale_id).await?;
    let told = Backlog {
        entries: told.len() as u64,
        oldest_ms: told.iter().map(|e| entry_number(&e.id).0).min(),
    };
    let entries = in_stream(conn, sale_id).await?;
    if entries == 0 {
        return Ok(told);
    }
    let keys = SaleStream::new(sale_id)?;
    let read = in_flight(conn, &keys.persisting).await?;
    let oldest = match read.iter().map(|b| entry_number(&b.first)).min() {
        Some((ms, _)) => Some(ms),
        None => {
            let after = match group_info(conn, &keys.stream).await? {
                Some(g) => format!("({}", g.last_delivered_id),
                None => "-".to_owned(),
            };
            let first: Vec<(String, HashMap<String, redis::Value>)> = redis::cmd("XRANGE")
                .arg(&keys.stream)
                .arg(after)
                .arg("+")
                .arg("COUNT")
                .arg(1)
                .query_async(conn)
                .await?;
            first.first().map(|(id, _)| entry_number(id).0)
        }
    };
    Ok(told.and(Backlog {
        entries,
        oldest_ms: oldest,
    }))
}

/// The lowest entry id of sale `sale_id`'s stream not yet committed from
/// it: the first of the oldest batch read, or the one after the last
/// delivered (for an armed sale, the stream's last entry: what it told is
/// committed from the ledger, which holds it). Entries below it are safe
/// to drop. `None` if the group does not exist.
pub(crate) async fn committed_floor(
    conn: &mut (impl ConnectionLike + Send + Sync),
    sale_id: &str,
) -> Result<Option<String>> {
    let keys = SaleStream::new(sale_id)?;
    let Some(group) = group_info(conn, &keys.stream).await? else {
        return Ok(None);
    };
    let delivered = armed_end(conn, &keys.sale, &keys.stream)
        .await?
        .unwrap_or(group.last_delivered_id);
    let floor = in_flight(conn, &keys.persisting)
        .await?
        .into_iter()
        .map(|b| b.first)
        .chain([next_entry_id(&delivered)])
        .min_by_key(|id| entry_number(id));
    Ok(floor)
}

pub(crate) struct GroupInfo {
    pub last_delivered_id: String,
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
            lag: number("lag"),
        }));
    }
    Ok(None)
}

/// Drops the entries of sale `sale`'s stream below its committed floor
/// (`committed_floor`), and only those; the engine keeps those pending
/// orders still live in.
pub(crate) async fn trim(
    engine: &Engine,
    conn: &mut (impl ConnectionLike + Send + Sync),
    sale: &str,
) -> Result<()> {
    if let Some(floor) = committed_floor(conn, sale).await? {
        engine.trim_stream(sale, &floor).await?;
    }
    Ok(())
}

/// A batch read and not yet committed, as `lua/read_news.lua` records it.
#[derive(Clone, Debug)]
pub(crate) struct InFlight {
    pub first: String,
    pub last: String,
    pub entries: u64,
    pub read_ms: u64,
}

/// The batches of one sale read and not yet committed.
pub(crate) async fn in_flight(
    conn: &mut (impl ConnectionLike + Send + Sync),
    persisting: &str,
) -> Result<Vec<InFlight>> {
    let fields: HashMap<String, String> = conn.hgetall(persisting).await?;
    fields
        .into_iter()
        .map(|(first, value)| {
            let mut parts = value.split(' ');
            let mut next = || parts.next().ok_or_else(|| bad_record(&first, &value));
            let last = next()?.to_owned();
            let entries = next()?.parse().map_err(|_| bad_record(&first, &value))?;
            let read_ms = next()?.parse().map_err(|_| bad_record(&first, &value))?;
            Ok(InFlight {
                first,
                last,
                entries,
                read_ms,
            })
        })
        .collect()
}

fn bad_record(first: &str, value: &str) -> Error {
    Error::Invalid {
        what: "persisting record",
        reason: format!("{first} -> {value:?}"),
    }
}
