//! Sharded sales: one hot sale's stock split over shards on different
//! masters, so no single master carries all of its purchases.
//!
//! A sharded sale `S` is:
//! - the sale itself, a sale of the usual layout (`keys.rs`) whose `left`
//!   is the **pool**: units not yet given to any shard. Its hash also holds
//!   the shards' tags, the open transfer (`xopen`), the transfer count
//!   (`xseq`), the refiller's highest fence, `drained`, and per shard the
//!   count of buyers who found it empty (`w:<index>`);
//! - one sale of the usual layout per shard, `S~<tag>`, holding the units
//!   given to it (`stock`), those left (`left`) and its buyers' orders. Tags
//!   are picked at creation so that each shard's slot is served by a
//!   different master, round robin (`place`); on one server every tag does;
//! - `transfers`, the ledger: one stream entry per transfer made.
//!
//! A buyer always buys on its home shard ([`home_shard`] of the user id),
//! with the ordinary purchase function, so the per-user limit and request
//! ids are exact and a purchase costs what an unsharded one does.
//!
//! Units move only by numbered transfers, one open at a time, made only by
//! the holder of the sale's refill lock (the `lock` crate, fenced: every
//! step refuses a fence below the highest it has seen). A transfer is
//! begun on the sale (from the pool: the units leave it there), taken from
//! the source shard (give-back), given to the destination shard, and ended
//! on the sale (recorded in the ledger). Each step is idempotent by the
//! transfer's number, and a new refiller finishes the open transfer before
//! anything else, so a crash or a retried step never loses or creates a
//! unit (`transfer.rs`). At every moment
//! `pool + in flight + Σ shard stock == stock` ([`Engine::sharding`] reads
//! that snapshot).
//!
//! A buyer whose shard is empty says so (`shard_want.lua`) and retries for
//! up to [`REFILL_WAIT`]; the refiller (`refiller.rs`) refills shards from
//! the pool before they run dry, and once the pool is empty moves units
//! from the shard with most left to shards whose buyers want them. Only a
//! sale the refiller found drained (pool and shards empty, no transfer
//! open) answers "sold out"; a buyer whose wait runs out before that gets
//! [`crate::Error::StockMoving`].

pub(crate) mod purchaser;
pub(crate) mod refiller;
mod restore;
mod transfer;

use std::collections::HashMap;
use std::time::Duration;

use futures_util::future::try_join_all;
use redis::AsyncCommands;
use seckill_redis::{Conn, Target, key_slot};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::keys::{MAX_SHARD_TAG, SaleKeys, is_shard, sale_of, shard_id};
use crate::sale::{Sale, SaleSpec, ShardStock, Sharding};
use crate::scripts::LIBRARY;

/// Longest a buyer of an empty shard waits for a refill before
/// [`crate::Error::StockMoving`].
pub const REFILL_WAIT: Duration = Duration::from_secs(1);

/// The home shard of `user_id` among `shards`: where all of that buyer's
/// purchases go. CRC16 (as Redis Cluster hashes keys), so every process
/// and every version agrees.
///
/// ```
/// let home = seckill_engine::home_shard("alice", 4);
/// assert!(home < 4);
/// assert_eq!(home, seckill_engine::home_shard("alice", 4));
/// ```
pub fn home_shard(user_id: &str, shards: usize) -> usize {
    usize::from(key_slot(user_id)) % shards.max(1)
}

/// A sharded sale's keys: the sale's own and each shard's.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    pub sale: SaleKeys,
    pub shards: Vec<SaleKeys>,
    pub generation: u64,
}

impl Layout {
    /// From a sale's `gen` and `shards` fields as read (`"1,7,12"`); `None`
    /// for a sale that is not sharded (or not there).
    pub fn from_fields(
        id: &str,
        generation: Option<u64>,
        tags: Option<&str>,
    ) -> Result<Option<Self>> {
        match (generation, tags) {
            (Some(generation), Some(tags)) => Ok(Some(Self::new(id, generation, tags)?)),
            _ => Ok(None),
        }
    }

    /// A sharded sale's layout, from the sale as [`Engine::sale`] read it.
    pub fn of(sale: &Sale) -> Result<Self> {
        let shards = sale
            .sharding
            .iter()
            .flat_map(|s| &s.shards)
            .map(|s| SaleKeys::new(&s.id))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            sale: SaleKeys::new(&sale.id)?,
            shards,
            generation: sale.generation,
        })
    }

    fn new(id: &str, generation: u64, tags: &str) -> Result<Self> {
        let shards = tags
            .split(',')
            .map(|tag| {
                let tag: u32 = tag.parse().map_err(|_| Error::Invalid {
                    field: "shards",
                    reason: format!("sale `{id}` has an unreadable shard list {tags:?}"),
                })?;
                SaleKeys::new(&shard_id(id, tag))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            sale: SaleKeys::new(id)?,
            shards,
            generation,
        })
    }
}

/// Tags for `n` shards of sale `id`, each one's slot on the next master
/// in turn, so the shards spread evenly over the masters serving now.
pub(crate) async fn place(target: &Target, id: &str, n: u32) -> Result<Vec<u32>> {
    let masters = target.masters().await?;
    if masters.is_empty() {
        return Err(Error::Invalid {
            field: "shards",
            reason: "no master serves slots now".to_owned(),
        });
    }
    let mut tags = Vec::with_capacity(n as usize);
    let mut tag = 0;
    for i in 0..n as usize {
        let master = &masters[i % masters.len()];
        loop {
            if tag > MAX_SHARD_TAG {
                return Err(Error::Invalid {
                    field: "shards",
                    reason: "no shard tag maps to every master".to_owned(),
                });
            }
            // The slot of the shard's hash tag, which all its keys share.
            let slot = key_slot(&format!("{{sale:{}}}", shard_id(id, tag)));
            tag += 1;
            if master.serves(slot) {
                tags.push(tag - 1);
                break;
            }
        }
    }
    Ok(tags)
}

/// Where a transfer takes units from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    Pool,
    Shard(usize),
}

/// The transfer open on a sale: `<t>|<from>|<to>|<units>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Open {
    pub number: u64,
    pub from: Source,
    pub to: usize,
    /// From the pool: the units taken. From a shard: the units asked (it
    /// may have fewer; what it gave is its `xout_n`).
    pub units: u64,
}

impl Open {
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('|');
        let number = parts.next()?.parse().ok()?;
        let from = match parts.next()? {
            "p" => Source::Pool,
            shard => Source::Shard(shard.parse().ok()?),
        };
        let to = parts.next()?.parse().ok()?;
        let units = parts.next()?.parse().ok()?;
        Some(Self {
            number,
            from,
            to,
            units,
        })
    }
}

/// What a sharded sale's own hash says now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SaleState {
    pub generation: u64,
    pub stock: u64,
    pub pool: u64,
    pub transfers: u64,
    pub open: Option<Open>,
    pub drained: bool,
    /// Times units came back to a shard (see `shard_restock.lua`).
    pub returns: u64,
    /// End, ms since the Unix epoch (0: none).
    pub end_ms: u64,
    /// Per shard index: buyers who found it empty, ever.
    pub wants: HashMap<usize, u64>,
}

impl SaleState {
    pub async fn read(conn: &mut Conn, layout: &Layout) -> Result<Option<Self>> {
        let hash: HashMap<String, String> = LIBRARY
            .call("shard_sale_read", &[&layout.sale.sale])
            .invoke(conn)
            .await?;
        let num = |k: &str| hash.get(k).and_then(|v| v.parse::<u64>().ok());
        let (Some(generation), Some(transfers)) = (num("gen"), num("xseq")) else {
            return Ok(None);
        };
        let wants = hash
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("w:")?.parse().ok()?, v.parse().ok()?)))
            .collect();
        Ok(Some(Self {
            generation,
            stock: num("stock").unwrap_or(0),
            pool: num("left").unwrap_or(0),
            transfers,
            open: hash.get("xopen").and_then(|o| Open::parse(o)),
            drained: hash.get("drained").is_some_and(|d| d == "1"),
            returns: num("returns").unwrap_or(0),
            end_ms: num("end").unwrap_or(0),
            wants,
        }))
    }

    /// The fields only transfers and stock changes move.
    fn transfer_fields(&self) -> (u64, u64, u64, &Option<Open>) {
        (self.stock, self.pool, self.transfers, &self.open)
    }
}

/// What one shard's hash says now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ShardState {
    pub stock: u64,
    pub left: u64,
    /// Last transfer given to it.
    pub given: u64,
    /// Last transfer taken from it, and the units taken.
    pub taken: (u64, u64),
}

impl ShardState {
    /// Every shard of `layout`, read at once; `None` for a shard whose
    /// hash is not of this generation.
    pub async fn read_all(conn: &Conn, layout: &Layout) -> Result<Vec<Option<Self>>> {
        let reads = layout.shards.iter().map(|keys| {
            let mut conn = conn.clone();
            async move {
                let v: Vec<Option<u64>> = LIBRARY
                    .call("shard_read", &[&keys.sale])
                    .invoke(&mut conn)
                    .await?;
                Ok::<_, Error>(v)
            }
        });
        let generation = layout.generation;
        Ok(try_join_all(reads)
            .await?
            .into_iter()
            .map(|v| {
                (v[0] == Some(generation)).then(|| Self {
                    stock: v[1].unwrap_or(0),
                    left: v[2].unwrap_or(0),
                    given: v[3].unwrap_or(0),
                    taken: (v[4].unwrap_or(0), v[5].unwrap_or(0)),
                })
            })
            .collect())
    }

    fn transfer_fields(&self) -> (u64, u64, (u64, u64)) {
        (self.stock, self.given, self.taken)
    }
}

/// One transfer of the ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// Its number, from 1.
    pub number: u64,
    /// The shard index it took from; `None` for the pool.
    pub from: Option<usize>,
    /// The shard index it gave to.
    pub to: usize,
    /// Units moved.
    pub units: u64,
    /// Fence of the refiller that ended it.
    pub fence: u64,
}

/// A sharded sale read at one moment (see [`Engine::sharding_check`]),
/// with what is wrong with it.
#[derive(Clone, Debug)]
pub struct ShardingCheck {
    /// Where the units are.
    pub sharding: Sharding,
    /// Units the sale was created with (or changed to).
    pub stock: u64,
    /// Every transfer recorded.
    pub transfers: Vec<Transfer>,
    /// Everything that does not add up, in plain words; empty if all does.
    pub problems: Vec<String>,
}

/// How many times a snapshot is read again when a transfer moved between
/// its two reads. Transfers are rare next to reads; this is never reached
/// but by a refiller gone wild.
const SNAPSHOT_TRIES: usize = 100;

/// A sharded sale at one moment: transfers move units across masters, so
/// the sale and its shards are read twice and kept only if no transfer
/// step landed in between (purchases may: they move units from a shard's
/// `left` to its buyers, never out of its `stock`).
pub(crate) struct Snapshot {
    pub sale: SaleState,
    pub shards: Vec<ShardState>,
    pub transfers: Vec<Transfer>,
}

impl Snapshot {
    pub async fn read(conn: &Conn, layout: &Layout, with_ledger: bool) -> Result<Self> {
        let gone = || Error::SaleNotFound(layout.sale.id.clone());
        for _ in 0..SNAPSHOT_TRIES {
            let mut c = conn.clone();
            let sale = SaleState::read(&mut c, layout).await?.ok_or_else(gone)?;
            let shards = ShardState::read_all(conn, layout).await?;
            let transfers = match with_ledger {
                true => read_ledger(&mut c, layout).await?,
                false => Vec::new(),
            };
            let sale_again = SaleState::read(&mut c, layout).await?.ok_or_else(gone)?;
            let shards_again = ShardState::read_all(conn, layout).await?;
            if sale.generation != layout.generation {
                return Err(gone());
            }
            let Some(shards) = shards.into_iter().collect::<Option<Vec<_>>>() else {
                return Err(gone());
            };
            let same = sale.transfer_fields() == sale_again.transfer_fields()
                && shards.len() == shards_again.len()
                && shards.iter().zip(&shards_again).all(|(a, b)| {
                    b.as_ref()
                        .is_some_and(|b| a.transfer_fields() == b.transfer_fields())
                });
            if same {
                return Ok(Self {
                    sale,
                    shards,
                    transfers,
                });
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Err(Error::StockMoving(layout.sale.id.clone()))
    }

    /// Units the open transfer has taken and not yet given.
    pub fn in_flight(&self) -> u64 {
        match &self.sale.open {
            Some(open) if !self.given(open) => self.taken(open),
            _ => 0,
        }
    }

    /// Units the open transfer took: from the pool at once, from a shard
    /// once its take step ran.
    fn taken(&self, open: &Open) -> u64 {
        match open.from {
            Source::Pool => open.units,
            Source::Shard(j) => self
                .shards
                .get(j)
                .filter(|s| s.taken.0 == open.number)
                .map_or(0, |s| s.taken.1),
        }
    }

    /// Whether the open transfer's units are on its destination.
    fn given(&self, open: &Open) -> bool {
        self.shards
            .get(open.to)
            .is_none_or(|d| d.given >= open.number)
    }

    pub fn sharding(&self, layout: &Layout) -> Sharding {
        Sharding {
            pool: self.sale.pool,
            in_flight: self.in_flight(),
            transfers: self.sale.transfers,
            drained: self.sale.drained,
            shards: layout
                .shards
                .iter()
                .zip(&self.shards)
                .map(|(keys, s)| ShardStock {
                    id: keys.id.clone(),
                    stock: s.stock,
                    remaining: s.left,
                    sold: s.stock.saturating_sub(s.left),
                })
                .collect(),
        }
    }

    /// What does not add up: units created or lost, and shards whose stock
    /// is not what the ledger gave them.
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let placed: u64 = self.shards.iter().map(|s| s.stock).sum();
        let in_flight = self.in_flight();
        let accounted = self.sale.pool + in_flight + placed;
        if accounted != self.sale.stock {
            problems.push(format!(
                "pool {} + in flight {in_flight} + shards' stock {placed} = {accounted}, not the stock {}",
                self.sale.pool, self.sale.stock
            ));
        }
        // Each shard's stock from the ledger, with the open transfer's steps
        // that already landed on it.
        let mut from_ledger = vec![0i128; self.shards.len()];
        let mut out_of_pool = 0u64;
        for t in &self.transfers {
            if let Some(k) = from_ledger.get_mut(t.to) {
                *k += i128::from(t.units);
            }
            match t.from {
                Some(j) => {
                    if let Some(k) = from_ledger.get_mut(j) {
                        *k -= i128::from(t.units);
                    }
                }
                None => out_of_pool += t.units,
            }
        }
        if let Some(open) = &self.sale.open {
            let moving = self.taken(open);
            match open.from {
                Source::Pool => out_of_pool += moving,
                Source::Shard(j) => from_ledger[j] -= i128::from(moving),
            }
            if self.given(open) && open.to < from_ledger.len() {
                from_ledger[open.to] += i128::from(moving);
            }
        }
        for (k, (s, expected)) in self.shards.iter().zip(&from_ledger).enumerate() {
            if i128::from(s.stock) != *expected {
                problems.push(format!(
                    "shard {k} holds a stock of {}, the ledger gave it {expected}",
                    s.stock
                ));
            }
        }
        if self.sale.pool + out_of_pool != self.sale.stock {
            problems.push(format!(
                "the pool holds {}, the stock {} less the {out_of_pool} the ledger took from it is {}",
                self.sale.pool,
                self.sale.stock,
                self.sale.stock.saturating_sub(out_of_pool)
            ));
        }
        problems
    }
}

async fn read_ledger(conn: &mut Conn, layout: &Layout) -> Result<Vec<Transfer>> {
    let entries = crate::event::StreamEntry::read(conn, &layout.sale.transfers, "-").await?;
    Ok(entries
        .iter()
        .filter_map(|e| {
            let field = |name: &str| {
                e.fields
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.as_str())
            };
            Some(Transfer {
                number: field("t")?.parse().ok()?,
                from: match field("from")? {
                    "p" => None,
                    j => Some(j.parse().ok()?),
                },
                to: field("to")?.parse().ok()?,
                units: field("n")?.parse().ok()?,
                fence: field("fence")?.parse().ok()?,
            })
        })
        .collect())
}

impl Engine {
    /// Units came back to shard `id` (a cancel, an expiry): its sale is not
    /// drained from now on. Nothing for an id that is not a shard.
    pub(crate) async fn returned_to(&self, id: &str, generation: u64) -> Result<()> {
        if !is_shard(id) {
            return Ok(());
        }
        let sale = sale_of(id);
        let keys = SaleKeys::new(sale)?;
        let _: String = LIBRARY
            .call("shard_restock", &[&keys.sale])
            .arg(generation)
            .invoke(&mut self.conn.clone())
            .await?;
        Ok(())
    }

    /// The layout of sale `id` if it is sharded (`None` if not).
    pub(crate) async fn layout(&self, id: &str) -> Result<Option<Layout>> {
        let keys = SaleKeys::new(id)?;
        let (generation, tags): (Option<u64>, Option<String>) = self
            .conn
            .clone()
            .hmget(&keys.sale, &["gen", "shards"])
            .await?;
        Layout::from_fields(id, generation, tags.as_deref())
    }

    /// The ids whose keys, streams and SQL rows hold sale `id`'s orders:
    /// its shards' if it is sharded, else its own. One read of the sale.
    ///
    /// ```no_run
    /// # async fn run(engine: seckill_engine::Engine) -> seckill_engine::Result<()> {
    /// for part in engine.parts("drop-1").await? {
    ///     println!("orders of drop-1 are kept under {part}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn parts(&self, id: &str) -> Result<Vec<String>> {
        Ok(match self.layout(id).await? {
            Some(layout) => layout.shards.into_iter().map(|k| k.id).collect(),
            None => vec![id.to_owned()],
        })
    }

    /// Sharded sale `id` read at one moment, checked: no unit created or
    /// lost (`pool + in flight + Σ shard stock == stock`), and every
    /// shard's stock and the pool what the ledger of transfers says.
    /// `Invalid` for a sale that is not sharded.
    ///
    /// ```no_run
    /// # async fn run(engine: seckill_engine::Engine) -> seckill_engine::Result<()> {
    /// let check = engine.sharding_check("drop-1").await?;
    /// assert!(check.problems.is_empty(), "{:?}", check.problems);
    /// # Ok(()) }
    /// ```
    pub async fn sharding_check(&self, id: &str) -> Result<ShardingCheck> {
        let layout = self.layout(id).await?.ok_or_else(|| Error::Invalid {
            field: "sale id",
            reason: format!("sale `{id}` is not sharded"),
        })?;
        let snapshot = Snapshot::read(&self.conn, &layout, true).await?;
        Ok(ShardingCheck {
            sharding: snapshot.sharding(&layout),
            stock: snapshot.sale.stock,
            problems: snapshot.problems(),
            transfers: snapshot.transfers,
        })
    }
}

impl Engine {
    /// Creates sharded sale `spec`: the sale (all its stock in the pool),
    /// its shards, then a first refill of every shard.
    pub(crate) async fn create_sharded(&self, spec: &SaleSpec) -> Result<()> {
        let tags = place(self.target(), &spec.id, spec.shards).await?;
        let list = tags
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let generation = self.create_keys(&spec.id, spec, None, Some(&list)).await?;
        let layout = Layout::new(&spec.id, generation, &list)?;
        for shard in &layout.shards {
            // Leftovers of a sale of this id whose deletion was cut short:
            // no live sale owns them, as the sale itself did not exist.
            self.delete_keys(&shard.id).await?;
            self.create_keys(&shard.id, spec, Some(generation), None)
                .await?;
        }
        let locks = self.locks().await?;
        let lock = locks
            .lock(&refiller::lock_name(&spec.id))?
            .lease(refiller::LEASE);
        // A refiller of an earlier sale of this id may hold it a moment
        // longer: then the first purchaser's refiller fills the shards.
        if let Some(guard) = lock.try_acquire().await? {
            let mover = transfer::Mover {
                conn: self.conn.clone(),
                layout: &layout,
                fence: guard.fence(),
            };
            // The sale exists now: a failed first refill is for the first
            // purchaser's refiller to make up, not an error of the creation.
            if let Err(e) = refiller::Refiller::new(&layout).round(&mover).await {
                tracing::warn!(sale = %spec.id, error = %e, "first refill failed");
            }
            if let Err(e) = guard.release().await {
                tracing::debug!(sale = %spec.id, error = %e, "refill lock already lost");
            }
        }
        Ok(())
    }
}
