//! [`Purchaser`]: buys units of one sale, unsharded (one [`One`]) or sharded
//! (a [`One`] per shard behind [`Sharded`]), and [`Engine::purchaser`], which
//! makes one. The top floor of the engine: it imports the strategies and
//! the sharded purchaser, which know nothing of it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::future::try_join_all;

use crate::engine::Engine;
use crate::error::Result;
use crate::keys::SaleKeys;
use crate::order::{Outcome, PurchaseRequest};
use crate::sale::Sale;
use crate::shard::Layout;
use crate::shard::purchaser::Sharded;
use crate::strategy::{Ctx, One, Strategy};

/// Buys units of one sale with one strategy. Cheap to clone; share it.
///
/// ```no_run
/// # async fn run(engine: seckill_engine::Engine) -> seckill_engine::Result<()> {
/// use seckill_engine::{Outcome, PurchaseRequest, Strategy};
/// let buy = engine.purchaser(Strategy::Atomic, "drop-1").await?;
/// match buy.purchase(&PurchaseRequest::new("alice").request_id("r-1")).await? {
///     Outcome::Ok(order) => println!("order {}", order.order_id),
///     other => println!("refused: {}", other.code()),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Purchaser {
    shared: Arc<Shared>,
}

struct Shared {
    strategy: Strategy,
    per_user_limit: Option<u64>,
    kind: Kind,
    attempts: AtomicU64,
}

// One per purchaser, behind its Arc: the sizes of the variants do not matter.
#[allow(clippy::large_enum_variant)]
enum Kind {
    One(One),
    /// A sharded sale: a [`One`] per shard (see `shard/purchaser.rs`).
    Sharded(Sharded),
}

impl std::fmt::Debug for Purchaser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Purchaser")
            .field("strategy", &self.shared.strategy)
            .field("per_user_limit", &self.shared.per_user_limit)
            .field("attempts", &self.attempts())
            .finish_non_exhaustive()
    }
}

impl Purchaser {
    /// The purchaser of one unsharded sale.
    pub(crate) fn one(one: One, per_user_limit: Option<u64>) -> Self {
        Self::with(one.strategy, per_user_limit, Kind::One(one))
    }

    /// A sharded sale's purchaser: routing and waiting around each
    /// shard's own [`One`] (which make request ids and confirm with
    /// replicas).
    pub(crate) fn sharded(
        strategy: Strategy,
        per_user_limit: Option<u64>,
        sharded: Sharded,
    ) -> Self {
        Self::with(strategy, per_user_limit, Kind::Sharded(sharded))
    }

    fn with(strategy: Strategy, per_user_limit: Option<u64>, kind: Kind) -> Self {
        Self {
            shared: Arc::new(Shared {
                strategy,
                per_user_limit,
                kind,
                attempts: AtomicU64::new(0),
            }),
        }
    }

    /// The strategy this purchaser buys with.
    pub fn strategy(&self) -> Strategy {
        self.shared.strategy
    }

    /// The sale's per-user limit, as read when this purchaser was made.
    pub fn per_user_limit(&self) -> Option<u64> {
        self.shared.per_user_limit
    }

    /// Tries to buy. Refusals are `Ok(outcome)`; `Err` means the answer is
    /// unknown (retry with the same request id where the strategy keeps them).
    pub async fn purchase(&self, req: &PurchaseRequest) -> Result<Outcome> {
        req.validate()?;
        let (outcome, tries) = match &self.shared.kind {
            Kind::One(one) => one.purchase(req).await?,
            Kind::Sharded(sharded) => sharded.purchase(req).await?,
        };
        self.shared.attempts.fetch_add(tries, Ordering::Relaxed);
        Ok(outcome)
    }

    /// Attempts made so far: purchases, plus `watch`'s retries on conflict.
    pub fn attempts(&self) -> u64 {
        self.shared.attempts.load(Ordering::Relaxed)
    }
}

impl Engine {
    /// A purchaser of sale `id` with `strategy`. Reads the sale once: the
    /// baselines check its window against this snapshot.
    ///
    /// For a sharded sale (`atomic` or `coalesced` only): one purchaser per
    /// shard behind one, and this process's refiller candidate for the
    /// sale, which runs as long as the purchaser lives.
    pub async fn purchaser(&self, strategy: Strategy, id: &str) -> Result<Purchaser> {
        let sale = self.sale(id).await?;
        if sale.sharding.is_some() {
            return self.sharded_purchaser(strategy, &sale).await;
        }
        let ctx = Ctx {
            conn: self.conn.clone(),
            keys: SaleKeys::new(id)?,
            sale,
        };
        let locks = match strategy {
            Strategy::Lock => Some(self.locks().await?),
            _ => None,
        };
        let per_user_limit = ctx.sale.rules.per_user_limit();
        let one = One::new(
            strategy,
            ctx,
            locks,
            self.client.as_ref(),
            self.coalescer,
            self.durability,
        )?;
        Ok(Purchaser::one(one, per_user_limit))
    }

    async fn sharded_purchaser(&self, strategy: Strategy, sale: &Sale) -> Result<Purchaser> {
        if !matches!(strategy, Strategy::Atomic | Strategy::Coalesced) {
            return Err(crate::Error::Unsupported {
                strategy: strategy.name(),
                sale: sale.id.clone(),
                reason: "a sharded sale sells through `atomic` or `coalesced`",
            });
        }
        let layout = Layout::of(sale)?;
        let reads = layout.shards.iter().map(|keys| self.sale(&keys.id));
        let mut shards = Vec::with_capacity(layout.shards.len());
        for (keys, shard) in layout.shards.iter().zip(try_join_all(reads).await?) {
            let ctx = Ctx {
                conn: self.conn.clone(),
                keys: keys.clone(),
                sale: shard,
            };
            shards.push(One::new(
                strategy,
                ctx,
                None,
                None,
                self.coalescer,
                self.durability,
            )?);
        }
        let sharded = Sharded::new(self.conn.clone(), self.locks().await?, layout, shards);
        Ok(Purchaser::sharded(
            strategy,
            sale.rules.per_user_limit(),
            sharded,
        ))
    }
}
