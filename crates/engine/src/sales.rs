//! Sale admin on [`Engine`]: create, read, delete and list sales.

use std::collections::HashMap;

use redis::AsyncCommands;

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::keys::{SALES, SaleKeys};
use crate::sale::{Sale, SaleSpec};
use crate::scripts::SCRIPTS;

impl Engine {
    /// Creates a sale; `SaleExists` if the id is taken.
    pub async fn create_sale(&self, spec: &SaleSpec) -> Result<Sale> {
        spec.validate()?;
        let keys = SaleKeys::new(&spec.id)?;
        let generation: u64 = SCRIPTS
            .create_sale
            .key(&keys.sale)
            .key(&keys.stock)
            .key(&keys.tokens)
            .arg(&spec.id)
            .arg(&spec.name)
            .arg(spec.stock)
            .arg(spec.per_user_limit.unwrap_or(0))
            .arg(spec.starts_at_ms.unwrap_or(0))
            .arg(spec.ends_at_ms.unwrap_or(0))
            .arg(spec.inventory.name())
            .arg(spec.payment_timeout_secs)
            .invoke_async(&mut self.conn.clone())
            .await?;
        if generation == 0 {
            return Err(Error::SaleExists(spec.id.clone()));
        }
        let _: i64 = self.conn.clone().sadd(SALES, &spec.id).await?;
        self.sale(&spec.id).await
    }

    /// A sale with its live counts; `SaleNotFound` if there is none.
    pub async fn sale(&self, id: &str) -> Result<Sale> {
        let keys = SaleKeys::new(id)?;
        let (values, stock, tokens): (Vec<Option<String>>, Option<i64>, i64) = redis::pipe()
            .hmget(&keys.sale, &META[..])
            .get(&keys.stock)
            .llen(&keys.tokens)
            .query_async(&mut self.conn.clone())
            .await?;
        let meta: HashMap<&str, String> = META
            .into_iter()
            .zip(values)
            .filter_map(|(k, v)| Some((k, v?)))
            .collect();
        let remaining = match meta.get("inventory").map(String::as_str) {
            Some("list") => tokens,
            Some("counter") => stock.unwrap_or(0),
            _ => meta.get("left").and_then(|v| v.parse().ok()).unwrap_or(0),
        };
        Sale::from_meta(&meta, remaining).ok_or_else(|| Error::SaleNotFound(id.to_owned()))
    }

    /// Deletes a sale and everything recorded under it. `false` if none.
    pub async fn delete_sale(&self, id: &str) -> Result<bool> {
        let keys = SaleKeys::new(id)?;
        let mut conn = self.conn.clone();
        let days: Vec<String> = conn.smembers(&keys.days).await?;
        let mut all: Vec<String> = keys.all().iter().map(|k| (*k).to_owned()).collect();
        all.extend(days.iter().map(|d| keys.day(d)));
        // UNLINK: a big sale's hash and stream are freed off Redis's thread.
        let deleted: u64 = redis::cmd("UNLINK").arg(all).query_async(&mut conn).await?;
        let _: i64 = conn.srem(SALES, id).await?;
        Ok(deleted > 0)
    }

    /// Ids of all sales, in no particular order.
    pub async fn sale_ids(&self) -> Result<Vec<String>> {
        Ok(self.conn.clone().smembers(SALES).await?)
    }
}

/// The fields of a sale's hash that describe it (the rest are per buyer,
/// per request and the expiry cursor).
const META: [&str; 10] = [
    "id",
    "name",
    "stock",
    "limit",
    "start",
    "end",
    "inventory",
    "payment_timeout",
    "gen",
    "left",
];
