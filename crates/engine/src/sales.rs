//! Sale admin on [`Engine`]: create, read, delete and list sales.

use std::collections::HashMap;

use redis::AsyncCommands;

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::keys::SaleKeys;
use crate::rules::{MAX_STOCK, Rule};
use crate::sale::{Sale, SaleSpec};
use crate::scripts::LIBRARY;
use crate::shard::{Layout, Snapshot};

impl Engine {
    /// Creates a sale; `SaleExists` if the id is taken.
    ///
    /// A spec with [`SaleSpec::shards`] above 1 creates a sharded sale: the
    /// sale, its shards (each on the next master in turn), and a first
    /// refill of each shard from the pool.
    pub async fn create_sale(&self, spec: &SaleSpec) -> Result<Sale> {
        spec.validate()?;
        if spec.shards > 1 {
            self.create_sharded(spec).await?;
        } else {
            self.create_keys(&spec.id, spec, None, None).await?;
        }
        self.sale(&spec.id).await
    }

    /// Creates one sale's keys, as `id`: a sale, or (`shard_of` its sale's
    /// generation) a shard with stock 0; `shards` lists a sharded sale's
    /// tags. Answers the generation; `SaleExists` if `id` is taken.
    pub(crate) async fn create_keys(
        &self,
        id: &str,
        spec: &SaleSpec,
        shard_of: Option<u64>,
        shards: Option<&str>,
    ) -> Result<u64> {
        let keys = SaleKeys::new(id)?;
        let generation: u64 = LIBRARY
            .call(
                "create_sale",
                &[&keys.sale, &keys.stock, &keys.tokens, &keys.orders],
            )
            .arg(id)
            .arg(&spec.name)
            .arg(if shard_of.is_some() { 0 } else { spec.stock })
            .arg(spec.inventory.name())
            .arg(spec.payment_timeout_secs)
            .arg(shard_of.map(|g| g.to_string()).unwrap_or_default())
            .arg(shards.unwrap_or(""))
            .arg(spec.rules.fields().collect::<Vec<_>>())
            .invoke(&mut self.conn.clone())
            .await?;
        if generation == 0 {
            return Err(Error::SaleExists(id.to_owned()));
        }
        self.register(id).await?;
        Ok(generation)
    }

    /// A sale with its live counts; `SaleNotFound` if there is none.
    ///
    /// A sharded sale's `remaining` counts the pool, the units moving and
    /// every shard's; [`Sale::sharding`] says where they are.
    pub async fn sale(&self, id: &str) -> Result<Sale> {
        let keys = SaleKeys::new(id)?;
        let (values, stock, tokens): (Vec<Option<String>>, Option<i64>, i64) = redis::pipe()
            .hmget(&keys.sale, meta_fields())
            .get(&keys.stock)
            .llen(&keys.tokens)
            .query_async(&mut self.conn.clone())
            .await?;
        let meta: HashMap<&str, String> = meta_fields()
            .into_iter()
            .zip(values)
            .filter_map(|(k, v)| Some((k, v?)))
            .collect();
        let remaining = match meta.get("inventory").map(String::as_str) {
            Some("list") => tokens,
            Some("counter") => stock.unwrap_or(0),
            _ => meta.get("left").and_then(|v| v.parse().ok()).unwrap_or(0),
        };
        let not_found = || Error::SaleNotFound(id.to_owned());
        let generation = meta.get("gen").and_then(|g| g.parse().ok());
        let tags = meta.get("shards").map(String::as_str);
        let Some(layout) = Layout::from_fields(id, generation, tags)? else {
            return Sale::from_meta(&meta, remaining).ok_or_else(not_found);
        };
        let snapshot = Snapshot::read(&self.conn, &layout, false).await?;
        let sharding = snapshot.sharding(&layout);
        let remaining = sharding.pool
            + sharding.in_flight
            + sharding.shards.iter().map(|s| s.remaining).sum::<u64>();
        let mut sale = Sale::from_meta(&meta, remaining as i64).ok_or_else(not_found)?;
        // The stock as of the snapshot, which a change may have moved since.
        sale.stock = snapshot.sale.stock;
        sale.sold = sale.stock.saturating_sub(remaining);
        sale.sharding = Some(sharding);
        Ok(sale)
    }

    /// Deletes a sale and everything recorded under it (a sharded sale's
    /// shards too). `false` if none.
    pub async fn delete_sale(&self, id: &str) -> Result<bool> {
        not_a_shard(id)?;
        let mut deleted = false;
        if let Some(layout) = self.layout(id).await? {
            for shard in &layout.shards {
                deleted |= self.delete_keys(&shard.id).await?;
            }
        }
        Ok(self.delete_keys(id).await? || deleted)
    }

    pub(crate) async fn delete_keys(&self, id: &str) -> Result<bool> {
        let keys = SaleKeys::new(id)?;
        let mut conn = self.conn.clone();
        let days: Vec<String> = conn.smembers(&keys.days).await?;
        let mut all: Vec<String> = keys.all().iter().map(|k| (*k).to_owned()).collect();
        all.extend(days.iter().map(|d| keys.day(d)));
        // UNLINK: a big sale's hash and stream are freed off Redis's thread.
        let deleted: u64 = redis::cmd("UNLINK").arg(all).query_async(&mut conn).await?;
        self.unregister(id).await?;
        Ok(deleted > 0)
    }

    /// Ends sale `id` now: purchases are refused as `Ended` from here on,
    /// by purchasers made before too; orders awaiting payment stay payable
    /// until their pay-by time. Ending an ended sale keeps its end.
    ///
    /// ```no_run
    /// # async fn run(engine: seckill_engine::Engine) -> seckill_engine::Result<()> {
    /// let sale = engine.end_sale("drop-1").await?;
    /// assert_eq!(sale.status, seckill_engine::Status::Ended);
    /// # Ok(()) }
    /// ```
    pub async fn end_sale(&self, id: &str) -> Result<Sale> {
        not_a_shard(id)?;
        let sale = self.sale(id).await?;
        // A sharded sale's buyers read the end on their shard.
        let shards = sale.sharding.iter().flat_map(|s| &s.shards);
        let ids = shards.map(|s| s.id.as_str()).chain([id]);
        for part in ids {
            let keys = SaleKeys::new(part)?;
            let answer: String = LIBRARY
                .call("end_sale", &[&keys.sale])
                .arg(sale.generation)
                .invoke(&mut self.conn.clone())
                .await?;
            if answer == "no_sale" {
                return Err(Error::SaleNotFound(id.to_owned()));
            }
        }
        self.log_change(id).await?;
        self.sale(id).await
    }

    /// Changes the stock of sale `id` (a production-path sale) while it
    /// sells: never below the units sold, so units left never go negative.
    /// `Invalid` when the change would, and for a sale of a classic
    /// strategy.
    ///
    /// ```no_run
    /// # async fn run(engine: seckill_engine::Engine) -> seckill_engine::Result<()> {
    /// use seckill_engine::StockChange;
    /// let sale = engine.change_stock("drop-1", StockChange::Add(50)).await?;
    /// println!("{} units, {} left", sale.stock, sale.remaining);
    /// # Ok(()) }
    /// ```
    pub async fn change_stock(&self, id: &str, change: StockChange) -> Result<Sale> {
        not_a_shard(id)?;
        let (op, units) = match change {
            StockChange::Add(n) => ("add", n),
            StockChange::Set(n) => ("set", n),
        };
        if units > MAX_STOCK || (op == "add" && units == 0) {
            return Err(Error::Invalid {
                field: op,
                reason: format!("must be 1-{MAX_STOCK}"),
            });
        }
        let sale = self.sale(id).await?;
        let keys = SaleKeys::new(id)?;
        let answer: redis::Value = LIBRARY
            .call("stock", &[&keys.sale])
            .arg(sale.generation)
            .arg(op)
            .arg(units)
            .arg(MAX_STOCK)
            .invoke(&mut self.conn.clone())
            .await?;
        match redis::from_redis_value::<String>(answer.clone())
            .ok()
            .as_deref()
        {
            Some("no_sale") => Err(Error::SaleNotFound(id.to_owned())),
            Some("below_sold") => Err(Error::StateConflict {
                field: op,
                reason: format!("the stock would be below the {} units sold", sale.sold),
            }),
            Some("too_large") => Err(Error::StateConflict {
                field: op,
                reason: format!("the stock would be above {MAX_STOCK}"),
            }),
            Some("unsupported") => Err(Error::Invalid {
                field: op,
                reason: format!(
                    "the stock of a sale kept as `{}` (a classic strategy's) does not change while it runs",
                    sale.inventory.name()
                ),
            }),
            _ => self.sale(id).await,
        }
    }
}

/// Refuses a shard's id where only its sale may be changed: a shard's
/// stock moves only by the ledger's transfers.
fn not_a_shard(id: &str) -> Result<()> {
    if crate::is_shard(id) {
        return Err(Error::Invalid {
            field: "sale id",
            reason: format!(
                "`{id}` is a shard of sale `{}`; change the sale",
                crate::sale_of(id)
            ),
        });
    }
    Ok(())
}

/// A change to a running sale's stock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StockChange {
    /// Adds units.
    Add(u64),
    /// Sets the stock (units ever for sale) outright; at least what is sold.
    Set(u64),
}

/// The fields of a sale's hash that describe it besides its rules (the
/// rest are per buyer, per request and the expiry cursor).
const META: [&str; 8] = [
    "id",
    "name",
    "stock",
    "inventory",
    "payment_timeout",
    "gen",
    "left",
    "shards",
];

/// [`META`] and every rule's field.
fn meta_fields() -> Vec<&'static str> {
    META.into_iter()
        .chain(Rule::ALL.into_iter().map(Rule::field))
        .collect()
}
