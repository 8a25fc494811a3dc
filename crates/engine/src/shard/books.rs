//! What a sharded sale's hashes and ledger say, read at one moment
//! ([`Snapshot`]), and what does not add up in them: the books every
//! refiller round, `sharding_check` and the audit rely on.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::future::try_join_all;
use seckill_redis::Conn;

use super::layout::Layout;
use crate::codec::ledger::{Open, Source, Transfer};
use crate::error::{Error, Result};
use crate::sale::{ShardStock, Sharding};
use crate::scripts::LIBRARY;

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
            open: hash.get("xopen").and_then(|o| Open::read(o)),
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

/// A sharded sale read at one moment (see [`crate::Engine::sharding_check`]),
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
    pub fn problems(&self) -> Vec<String> {
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

pub(crate) async fn read_ledger(conn: &mut Conn, layout: &Layout) -> Result<Vec<Transfer>> {
    let entries = crate::event::StreamEntry::read(conn, &layout.sale.transfers, "-").await?;
    Ok(entries.iter().filter_map(Transfer::read).collect())
}
