//! The registry of sales: the set of every sale id in Redis (shards
//! included), and a log of changes to it, so that background work learns
//! of new, changed and removed sales without listing them all again.

use redis::AsyncCommands;

use crate::engine::Engine;
use crate::error::Result;
use crate::keys::{SALES, SALES_LOG, SaleKeys};

/// Entries the log keeps, about: a reader further behind than this lists
/// the sales again (see [`Engine::sale_changes`]).
const LOG_LENGTH: usize = 10_000;

impl Engine {
    /// Ids of all sales, in no particular order, each shard of a sharded
    /// sale among them (`<sale>~<tag>`, see [`crate::is_shard`]): every id
    /// whose keys hold orders.
    pub async fn sale_ids(&self) -> Result<Vec<String>> {
        Ok(self.conn.clone().smembers(SALES).await?)
    }

    /// The generation Redis holds of each sale in `ids` (`None`: it holds
    /// no such sale), in order: one `HGET` each, pipelined, so a check of
    /// thousands of sales against another record (SQL's) is one round trip
    /// per few hundred.
    ///
    /// ```no_run
    /// # async fn run(engine: seckill_engine::Engine) -> seckill_engine::Result<()> {
    /// let held = engine.generations(&["f1".to_owned()]).await?;
    /// if held[0].is_none() {
    ///     eprintln!("Redis holds no sale f1");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn generations(&self, ids: &[String]) -> Result<Vec<Option<u64>>> {
        use futures_util::StreamExt;
        let keys = ids
            .iter()
            .map(|id| SaleKeys::new(id).map(|k| k.sale))
            .collect::<Result<Vec<_>>>()?;
        let asked = futures_util::stream::iter(keys.into_iter().map(|key| {
            let mut conn = self.conn.clone();
            async move { conn.hget::<_, _, Option<u64>>(key, "gen").await }
        }));
        let held: Vec<redis::RedisResult<Option<u64>>> = asked.buffered(256).collect().await;
        Ok(held.into_iter().collect::<redis::RedisResult<_>>()?)
    }

    /// Adds `id` to the registry and logs it as changed.
    pub(crate) async fn register(&self, id: &str) -> Result<()> {
        let _: i64 = self.conn.clone().sadd(SALES, id).await?;
        self.log_change(id).await
    }

    /// Removes `id` from the registry and logs it as changed.
    pub(crate) async fn unregister(&self, id: &str) -> Result<()> {
        let _: i64 = self.conn.clone().srem(SALES, id).await?;
        self.log_change(id).await
    }

    /// Logs that sale `id` was made, removed, or changed a setting the
    /// background work reads (its end).
    pub(crate) async fn log_change(&self, id: &str) -> Result<()> {
        self.append(&["sale", id]).await.map(drop)
    }

    async fn append(&self, fields: &[&str; 2]) -> Result<String> {
        Ok(redis::cmd("XADD")
            .arg(SALES_LOG)
            .arg("MAXLEN")
            .arg("~")
            .arg(LOG_LENGTH)
            .arg("*")
            .arg(fields)
            .query_async(&mut self.conn.clone())
            .await?)
    }

    /// A place in the log of sale changes to read on from with
    /// [`Engine::sale_changes`]: taken before listing the sales, it misses
    /// no change made after the list.
    pub async fn sale_log_mark(&self) -> Result<String> {
        self.append(&["mark", "1"]).await
    }

    /// The sales changed (made, removed, ended) after place `after` in the
    /// log, at most `count`, each with its own place; `None` when `after`
    /// is gone (trimmed away, or Redis lost its data): what happened since
    /// is unknown, and the reader lists the sales again.
    ///
    /// ```no_run
    /// # async fn run(engine: seckill_engine::Engine) -> seckill_engine::Result<()> {
    /// let mut at = engine.sale_log_mark().await?;
    /// let known = engine.sale_ids().await?;
    /// // … later:
    /// match engine.sale_changes(&at, 1000).await? {
    ///     Some(changes) => for (place, sale) in changes {
    ///         println!("{sale} changed");
    ///         at = place;
    ///     },
    ///     None => { /* list the sales again */ }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn sale_changes(
        &self,
        after: &str,
        count: usize,
    ) -> Result<Option<Vec<(String, String)>>> {
        type Entries = Vec<(String, Vec<String>)>;
        // Both in one round trip: the place itself still there means
        // nothing after it was trimmed (trimming takes the oldest first).
        let (place, entries): (Entries, Entries) = redis::pipe()
            .xrange(SALES_LOG, after, after)
            .xrange_count(SALES_LOG, format!("({after}"), "+", count)
            .query_async(&mut self.conn.clone())
            .await?;
        if place.is_empty() {
            return Ok(None);
        }
        Ok(Some(
            entries
                .into_iter()
                .map(|(place, fields)| {
                    let sale = match fields.as_slice() {
                        [kind, id] if kind == "sale" => id.clone(),
                        _ => String::new(),
                    };
                    (place, sale)
                })
                .collect(),
        ))
    }
}
