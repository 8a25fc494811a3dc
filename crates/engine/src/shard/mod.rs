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
//! Modules: `books` reads the sale at one moment and checks its books;
//! `transfer` moves units; `refiller` decides what to move; `purchaser`
//! buys on a buyer's home shard; `restore` rebuilds lost parts from SQL.
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

mod books;
mod layout;
pub(crate) mod purchaser;
pub(crate) mod refiller;
mod restore;
mod transfer;

use redis::AsyncCommands;

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::keys::{SaleKeys, is_shard, sale_of};
use crate::sale::SaleSpec;
use crate::scripts::LIBRARY;

pub use crate::codec::ledger::Transfer;
pub use books::ShardingCheck;
pub(crate) use books::Snapshot;
pub(crate) use layout::{Layout, place};
pub use layout::{REFILL_WAIT, home_shard};

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
