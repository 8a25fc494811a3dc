//! Rebuilding the parts of a sharded sale that Redis lost, from a durable
//! copy of its shards' orders.
//!
//! Units must still add up afterwards (`pool + in flight + Σ shard stock ==
//! stock`, every shard's stock what the ledger gave it), whichever parts
//! survived:
//! - **the sale's hash survived** (with its pool and ledger): a lost shard
//!   gets back the stock the ledger's finished transfers gave it, less
//!   nothing: its units held by orders SQL has are sold, the rest left. The
//!   open transfer, if any, runs again on it: the shard's markers say it
//!   has not seen it, and each step is idempotent by number;
//! - **the sale's hash is lost** (pool, ledger and open transfer with it):
//!   a lost shard gets as stock the units its orders in SQL hold, none left;
//!   the pool gets every unit no shard holds (units a transfer was moving
//!   come back to it), and the new ledger opens with one transfer per shard
//!   giving it its stock, numbered past every number a shard has seen.
//!
//! Either way the refill lock's fence counter is raised past every fence a
//! surviving part has seen, for the counter may have been lost too.

use redis::AsyncCommands;
use seckill_redis::Conn;

use super::books::{SaleState, ShardState, read_ledger};
use super::layout::Layout;
use super::refiller;
use crate::codec::ledger::Transfer;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::keys::{SaleKeys, sale_of};
use crate::restore::{Part, RestoredOrder, live_units};
use crate::sale::{Sale, SaleSpec};

/// What the ledger says of one shard: its stock and the last transfers it
/// took part in, counting finished transfers only.
#[derive(Clone, Copy, Debug, Default)]
struct Ledgered {
    stock: i128,
    given: u64,
    taken: (u64, u64),
}

impl Engine {
    /// Rebuilds the parts of sharded sale `spec` that Redis lost (the sale
    /// itself, shards, or all of it) from a durable copy of each shard's
    /// orders: `shards` holds each shard's id and orders, in the order of
    /// the sale's [`crate::Sharding::shards`] (which decides each buyer's
    /// home shard). Each part only over nothing; `SaleExists` when no part
    /// was lost.
    ///
    /// ```no_run
    /// # async fn run(engine: seckill_engine::Engine) -> seckill_engine::Result<()> {
    /// let spec = seckill_engine::SaleSpec::new("drop-1", 100).shards(2);
    /// // The shards and their orders as SQL keeps them; no orders here.
    /// let shards = [("drop-1~0".to_owned(), vec![]), ("drop-1~3".to_owned(), vec![])];
    /// let sale = engine
    ///     .restore_sharded(&spec, 1_700_000_000_000, &shards)
    ///     .await?;
    /// assert_eq!(sale.remaining, 100);
    /// # Ok(()) }
    /// ```
    pub async fn restore_sharded(
        &self,
        spec: &SaleSpec,
        generation: u64,
        shards: &[(String, Vec<RestoredOrder>)],
    ) -> Result<Sale> {
        spec.validate()?;
        let list = tags_of(&spec.id, shards.iter().map(|(id, _)| id.as_str()))?;
        let layout = Layout::new(&spec.id, generation, &list)?;
        let shards: Vec<&[RestoredOrder]> = shards.iter().map(|(_, o)| o.as_slice()).collect();
        let mut conn = self.conn.clone();
        let sale = SaleState::read(&mut conn, &layout)
            .await?
            .filter(|s| s.generation == generation);
        // The sale's hash, where it survived, is what buyers are routed by.
        let held = self.layout(&spec.id).await?;
        if let Some(now) = held.filter(|now| now.generation == generation)
            && now
                .shards
                .iter()
                .map(|k| &k.id)
                .ne(layout.shards.iter().map(|k| &k.id))
        {
            return Err(Error::Invalid {
                field: "shards",
                reason: format!("`{}` has other shards in Redis than those given", spec.id),
            });
        }
        let present = ShardState::read_all(&conn, &layout).await?;
        if sale.is_some() && present.iter().all(Option::is_some) {
            return Err(Error::SaleExists(spec.id.clone()));
        }
        let fences = self.fences(&layout, sale.is_some(), &present).await?;
        let rebuild = Rebuild {
            spec,
            layout,
            generation,
            shards,
            present,
            fences,
        };
        match sale {
            Some(_) => self.restore_lost_shards(&rebuild, &mut conn).await?,
            None => self.restore_with_pool(&rebuild, &list).await?,
        }
        let locks = self.locks().await?;
        locks
            .lock(&refiller::lock_name(&spec.id))?
            .fence_at_least(fences)
            .await?;
        self.sale(&spec.id).await
    }

    /// The sale's hash survived: each lost shard gets back the stock the
    /// ledger's finished transfers gave it, its orders' units sold.
    async fn restore_lost_shards(&self, rebuild: &Rebuild<'_>, conn: &mut Conn) -> Result<()> {
        let (layout, shards) = (&rebuild.layout, &rebuild.shards);
        let ledger = ledgered(layout, &read_ledger(conn, layout).await?);
        for (k, _) in rebuild
            .present
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_none())
        {
            let stock = u64::try_from(ledger[k].stock.max(0)).unwrap_or(0);
            let left = stock.saturating_sub(live_units(shards[k]));
            self.write_part(&rebuild.part(k, stock, left, ledger[k]))
                .await?;
            // Units its lost orders held are back: a sale found
            // drained before is not.
            if left > 0 {
                self.returned_to(&layout.shards[k].id, rebuild.generation)
                    .await?;
            }
        }
        Ok(())
    }

    /// The sale's hash is lost too: each lost shard gets the units its
    /// orders hold, none left, and the pool and a new ledger every unit
    /// no shard holds.
    async fn restore_with_pool(&self, rebuild: &Rebuild<'_>, list: &str) -> Result<()> {
        let (spec, present) = (rebuild.spec, &rebuild.present);
        // Numbered past every transfer a surviving shard has seen.
        let seen = present
            .iter()
            .flatten()
            .map(|s| s.given.max(s.taken.0))
            .max()
            .unwrap_or(0);
        let stocks: Vec<u64> = present
            .iter()
            .zip(&rebuild.shards)
            .map(|(s, orders)| s.map_or_else(|| live_units(orders), |s| s.stock))
            .collect();
        let placed: u64 = stocks.iter().sum();
        if placed > spec.stock {
            return Err(Error::Invalid {
                field: "stock",
                reason: format!(
                    "the shards of `{}` hold {placed} units, more than its stock {}",
                    spec.id, spec.stock
                ),
            });
        }
        for (k, _) in present.iter().enumerate().filter(|(_, s)| s.is_none()) {
            let given = Ledgered {
                given: seen + 1 + k as u64,
                ..Ledgered::default()
            };
            self.write_part(&rebuild.part(k, stocks[k], 0, given))
                .await?;
        }
        self.write_pool(spec, &rebuild.layout, list, seen, &stocks, rebuild.fences)
            .await
    }

    /// The highest fence a surviving part of the sale has seen: the sale's
    /// own if it survived (it sees every refiller), else its shards'.
    async fn fences(
        &self,
        layout: &Layout,
        sale: bool,
        present: &[Option<ShardState>],
    ) -> Result<u64> {
        let mut conn = self.conn.clone();
        if sale {
            let fence: Option<u64> = conn.hget(&layout.sale.sale, "fence").await?;
            return Ok(fence.unwrap_or(0));
        }
        let mut highest = 0;
        for (keys, _) in layout
            .shards
            .iter()
            .zip(present)
            .filter(|(_, s)| s.is_some())
        {
            let fence: Option<u64> = conn.hget(&keys.sale, "fence").await?;
            highest = highest.max(fence.unwrap_or(0));
        }
        Ok(highest)
    }

    /// Writes a lost sale's own hash over nothing: `stocks[k]` on shard k,
    /// every other unit in the pool, and a ledger of one transfer per shard
    /// from the pool, numbered from `seen + 1`.
    async fn write_pool(
        &self,
        spec: &SaleSpec,
        layout: &Layout,
        list: &str,
        seen: u64,
        stocks: &[u64],
        fence: u64,
    ) -> Result<()> {
        let placed: u64 = stocks.iter().sum();
        let extra = vec![
            ("shards".into(), list.to_owned()),
            ("xseq".into(), (seen + stocks.len() as u64).to_string()),
            ("xopen".into(), String::new()),
            ("fence".into(), fence.to_string()),
            ("drained".into(), "0".into()),
        ];
        let keys = SaleKeys::new(&spec.id)?;
        let ledger = keys.transfers.clone();
        self.write_part_with(
            &Part {
                keys,
                spec,
                generation: layout.generation,
                stock: spec.stock,
                left: Some(spec.stock - placed),
                extra,
                orders: &[],
            },
            |pipe| {
                for (k, units) in stocks.iter().enumerate() {
                    pipe.cmd("XADD")
                        .arg(&ledger)
                        .arg("*")
                        .arg("t")
                        .arg(seen + 1 + k as u64)
                        .arg("from")
                        .arg("p")
                        .arg("to")
                        .arg(k)
                        .arg("n")
                        .arg(units)
                        .arg("fence")
                        .arg(fence)
                        .ignore();
                }
            },
        )
        .await
    }
}

/// A sharded sale being rebuilt: what writing back a lost shard needs.
struct Rebuild<'a> {
    spec: &'a SaleSpec,
    layout: Layout,
    generation: u64,
    /// Each shard's orders, in the layout's order.
    shards: Vec<&'a [RestoredOrder]>,
    /// Each shard as Redis still holds it; `None` where it was lost.
    present: Vec<Option<ShardState>>,
    /// The highest fence a surviving part has seen.
    fences: u64,
}

impl<'a> Rebuild<'a> {
    /// Shard `k` to write back with `stock` and `left` units, and the
    /// transfer markers of `l`.
    fn part(&self, k: usize, stock: u64, left: u64, l: Ledgered) -> Part<'a> {
        Part {
            keys: self.layout.shards[k].clone(),
            spec: self.spec,
            generation: self.generation,
            stock,
            left: Some(left),
            extra: vec![
                ("xin".into(), l.given.to_string()),
                ("xout".into(), l.taken.0.to_string()),
                ("xout_n".into(), l.taken.1.to_string()),
                ("fence".into(), self.fences.to_string()),
            ],
            orders: self.shards[k],
        }
    }
}

/// Each shard's stock and markers from the finished transfers of the
/// ledger (an open transfer runs again on a rebuilt shard).
fn ledgered(layout: &Layout, transfers: &[Transfer]) -> Vec<Ledgered> {
    let mut shards = vec![Ledgered::default(); layout.shards.len()];
    for t in transfers {
        if let Some(to) = shards.get_mut(t.to) {
            to.stock += i128::from(t.units);
            to.given = to.given.max(t.number);
        }
        if let Some(from) = t.from.and_then(|j| shards.get_mut(j)) {
            from.stock -= i128::from(t.units);
            if t.number > from.taken.0 {
                from.taken = (t.number, t.units);
            }
        }
    }
    shards
}

/// The tag list (`"0,3,5"`) of sharded sale `sale` from its shards' ids
/// (`<sale>~<tag>`), kept in the order given.
fn tags_of<'a>(sale: &str, ids: impl IntoIterator<Item = &'a str>) -> Result<String> {
    let tags = ids
        .into_iter()
        .map(|id| {
            id.split_once('~')
                .filter(|_| sale_of(id) == sale)
                .map(|(_, tag)| tag.to_owned())
                .ok_or_else(|| Error::Invalid {
                    field: "shards",
                    reason: format!("`{id}` is not a shard of `{sale}`"),
                })
        })
        .collect::<Result<Vec<_>>>()?;
    if tags.is_empty() {
        return Err(Error::Invalid {
            field: "shards",
            reason: format!("no shards given for `{sale}`"),
        });
    }
    Ok(tags.join(","))
}
