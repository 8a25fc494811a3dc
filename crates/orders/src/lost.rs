//! Sales Redis lost: live in SQL (not archived) but gone from Redis, or
//! there under another generation. Redis loses data in ordinary ways (a
//! restart without persistence, a failover to a replica that had not
//! synced, a flush, an evicting `maxmemory-policy`) while SQL still knows
//! the sale and its orders; the service then answers 503 `sale_lost` for
//! it, never 404, so its units are not sold twice.
//!
//! What wakes the watch: every [`LOOK_EVERY`], one `GET` per master of its
//! mark (`news.rs`). A mark missing means that master lost its data (a
//! mark changed: another watch found it missing), and every live sale in
//! SQL is compared with Redis; so it is at start and every `FULL_LOOK` (a
//! key evicted alone leaves the mark). A sale found lost is looked at again
//! at the next look before it is reported (a sale being replaced is
//! briefly in Redis under a generation SQL has not recorded yet); then it
//! is reported once, as an ERROR naming it and the command that restores
//! it, and counted in the gauge `seckill_sales_lost_in_redis` until it is
//! back. With `restore`, a sale Redis holds nothing of is rebuilt from SQL
//! ([`repair_from_sql`]).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use seckill_engine::Engine;

use crate::error::Result;
use crate::failures::Failures;
use crate::news::Topology;
use crate::repair::repair_from_sql;
use crate::store::Store;

/// How often the masters' marks are asked for.
pub const LOOK_EVERY: Duration = Duration::from_secs(2);

/// Every live sale is compared with Redis at least this often.
const FULL_LOOK: Duration = Duration::from_secs(300);

/// The sales a watch has found lost, as it last saw them; cheap to clone,
/// for whoever shows them (the dashboard).
#[derive(Clone, Debug, Default)]
pub struct LostSales(Arc<Mutex<BTreeSet<String>>>);

impl LostSales {
    /// The ids of the sales lost now, in order.
    pub fn ids(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}

/// Watches for sales Redis lost until `shutdown` resolves, keeping `lost`
/// up to date and restoring them from SQL if `restore`.
///
/// ```no_run
/// # async fn run(engine: seckill_engine::Engine, store: seckill_orders::Store) {
/// let lost = seckill_orders::LostSales::default();
/// seckill_orders::watch_lost_forever(engine, store, false, lost.clone(), async {
///     tokio::signal::ctrl_c().await.ok();
/// })
/// .await;
/// # }
/// ```
pub async fn watch_lost_forever(
    engine: Engine,
    store: Store,
    restore: bool,
    lost: LostSales,
    shutdown: impl Future<Output = ()>,
) {
    let mut watch = Watch {
        restore,
        shown: lost,
        ..Watch::default()
    };
    tokio::pin!(shutdown);
    let mut failures = Failures::new("looking for sales Redis lost");
    loop {
        let looked = watch.look(&engine, &store).await;
        failures.record(&looked);
        if looked.is_err() {
            watch.topology = None;
        }
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(LOOK_EVERY) => {}
        }
    }
}

/// What the watch remembers between looks.
#[derive(Default)]
struct Watch {
    restore: bool,
    shown: LostSales,
    topology: Option<Arc<Topology>>,
    /// Each master's mark as last seen, by key.
    marks: HashMap<String, String>,
    next_full: Option<Instant>,
    /// Sales seen lost once (id -> SQL's generation), looked at again.
    suspects: HashMap<String, i64>,
    /// Sales (and shards) reported lost.
    lost: HashMap<String, i64>,
    /// Sales and generations a restore was tried for.
    tried: std::collections::HashSet<(String, i64)>,
}

impl Watch {
    async fn look(&mut self, engine: &Engine, store: &Store) -> Result<()> {
        let now = Instant::now();
        let marks_changed = self.marks_changed(engine).await?;
        let full = marks_changed || self.next_full.is_none_or(|at| at <= now);
        if !full && self.suspects.is_empty() && self.lost.is_empty() {
            return Ok(());
        }
        if full {
            self.next_full = Some(now + FULL_LOOK);
            // Masters may have come or gone since: their marks are read
            // from the next look on.
            self.topology = None;
        }
        let live = self.candidates(store, full).await?;
        let ids: Vec<String> = live.iter().map(|(id, _)| id.clone()).collect();
        let held = engine.generations(&ids).await?;
        let (mut suspects, mut lost) = (HashMap::new(), HashMap::new());
        let mut restored = BTreeSet::new();
        for ((id, generation), held) in live.into_iter().zip(held) {
            if held == Some(generation as u64) {
                if self.lost.contains_key(&id) {
                    tracing::info!(sale = id, generation, "a sale Redis lost is back");
                }
                continue;
            }
            let seen = self.lost.get(&id).or(self.suspects.get(&id)) == Some(&generation);
            if !seen {
                suspects.insert(id, generation);
                continue;
            }
            let sale = seckill_engine::sale_of(&id);
            if !self.lost.contains_key(&id) {
                tracing::error!(
                    sale,
                    keys = id,
                    generation,
                    held_in_redis = ?held,
                    "Redis lost a live sale (SQL holds it): purchases, reads and settlements \
                     answer 503 sale_lost until it is restored with `seckill audit --sale {sale} \
                     --repair-from-sql`"
                );
            }
            // Once per sale and generation: a restore refused is refused
            // again. A sharded sale is restored whole, whichever of its
            // parts were lost.
            let first_try = self.tried.insert((id.clone(), generation));
            if restored.contains(sale) {
                continue;
            }
            if self.restore && held.is_none() && first_try {
                match self.restore(engine, store, sale).await {
                    Ok(()) => {
                        restored.insert(sale.to_owned());
                        continue;
                    }
                    Err(e) => tracing::error!(sale, error = %e, "restoring from SQL failed"),
                }
            }
            lost.insert(id, generation);
        }
        self.suspects = suspects;
        self.lost = lost;
        self.show();
        Ok(())
    }

    /// The live sales to compare with Redis: every one on a full look, else
    /// those suspected or reported lost.
    async fn candidates(&self, store: &Store, full: bool) -> Result<Vec<(String, i64)>> {
        // Shards too: a shard's master can lose it while the sale's keeps
        // the sale; it is reported under its sale. Only the shards of the
        // generation SQL holds live: a sale made again leaves its old
        // shards' rows behind.
        let all = store.live_sales().await?;
        let current: HashMap<&str, i64> = all
            .iter()
            .filter(|(id, _)| !seckill_engine::is_shard(id))
            .map(|(id, generation)| (id.as_str(), *generation))
            .collect();
        let live: Vec<(String, i64)> = all
            .iter()
            .filter(|(id, generation)| {
                !seckill_engine::is_shard(id)
                    || current.get(seckill_engine::sale_of(id)) == Some(generation)
            })
            .filter(|(id, _)| full || self.suspects.contains_key(id) || self.lost.contains_key(id))
            .cloned()
            .collect();
        Ok(live)
    }

    /// Shows the sales reported lost (a shard under its sale): in the gauge
    /// and to whoever holds `shown`.
    fn show(&self) {
        let shown: BTreeSet<String> = self
            .lost
            .keys()
            .map(|id| seckill_engine::sale_of(id).to_owned())
            .collect();
        metrics::gauge!("seckill_sales_lost_in_redis").set(shown.len() as f64);
        *self.shown.0.lock().unwrap_or_else(|e| e.into_inner()) = shown;
    }

    async fn restore(&self, engine: &Engine, store: &Store, id: &str) -> Result<()> {
        let restored = repair_from_sql(engine, store, id).await?;
        tracing::warn!(
            sale = id,
            orders = restored.orders,
            newest_order_ms = ?restored.newest_order_ms,
            noticed_ms = crate::clock::now_ms(),
            "restored a sale Redis lost from SQL; orders acknowledged between the newest in SQL \
             (newest_order_ms) and the loss (before noticed_ms) could not be rebuilt"
        );
        Ok(())
    }

    /// Asks each master for its mark, setting one where there is none;
    /// whether any was missing or not as last seen (the first look too).
    async fn marks_changed(&mut self, engine: &Engine) -> Result<bool> {
        let topology = match &self.topology {
            Some(t) => t.clone(),
            None => {
                let t = Arc::new(Topology::read(engine.target()).await?);
                if t.complete() {
                    self.topology = Some(t.clone());
                }
                t
            }
        };
        let mut conn = engine.connection();
        let mut changed = false;
        for i in 0..topology.len() {
            let key = &topology.keys(i).mark;
            let mark: Option<String> = conn.get(key).await?;
            let mark = match mark {
                Some(mark) => mark,
                None => {
                    let token = format!("{:016x}", rand::random::<u64>());
                    // NX: another watch may have set one meanwhile.
                    let _: Option<String> = redis::cmd("SET")
                        .arg(key)
                        .arg(&token)
                        .arg("NX")
                        .query_async(&mut conn)
                        .await?;
                    conn.get::<_, Option<String>>(key).await?.unwrap_or(token)
                }
            };
            changed |= self.marks.insert(key.clone(), mark.clone()) != Some(mark);
        }
        Ok(changed)
    }
}
