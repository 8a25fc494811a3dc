//! The purchase strategies behind one interface, [`Purchaser`].
//!
//! The first four are the classic strategies (README, "The classic
//! strategies"), each done right and kept
//! as a measured baseline; `atomic` and `coalesced` are the production path.
//! Baselines sell one unit per purchase, check the sale window against this
//! process's clock, and record orders in the classic per-day hashes; they
//! do not remember request ids.

pub(crate) mod atomic;
mod coalesced;
mod list;
mod locked;
mod lua;
mod watch;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use seckill_redis::Conn;
use serde::Serialize;

pub use coalesced::CoalescerConfig;

use crate::durability::{Durability, ReplicaGate};
use crate::error::{Error, Result};
use crate::event::OrderId;
use crate::keys::SaleKeys;
use crate::order::{Order, Outcome, PurchaseRequest};
use crate::records;
use crate::sale::{Inventory, Sale, now_ms};

/// How a purchase takes stock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// The distributed lock around read stock → write stock − 1.
    Lock,
    /// `WATCH`/`MULTI` optimistic transaction, retried on conflict.
    Watch,
    /// `LPOP` of one pre-filled token per unit.
    List,
    /// The classic Lua check-and-decrement.
    Lua,
    /// One server-side script: window, limit, idempotency, stock, order event.
    Atomic,
    /// `atomic`, with concurrent purchases of this process sent as batches.
    Coalesced,
}

impl Strategy {
    /// Every strategy, baselines first.
    pub const ALL: [Strategy; 6] = [
        Self::Lock,
        Self::Watch,
        Self::List,
        Self::Lua,
        Self::Atomic,
        Self::Coalesced,
    ];

    /// The lowercase name, as serialized and as [`Strategy::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::Watch => "watch",
            Self::List => "list",
            Self::Lua => "lua",
            Self::Atomic => "atomic",
            Self::Coalesced => "coalesced",
        }
    }

    /// The strategy called `name` (as [`Strategy::name`] spells it).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The commands this strategy sends outside scripts (lowercase, as
    /// `INFO commandstats` names them), so that its Redis cost can be read
    /// from the server: script calls plus these. `lock`'s own `SET` is also
    /// what the lock's acquire script runs, so its figure includes those.
    /// `EXEC` already counts the commands it runs.
    pub fn plain_commands(self) -> &'static [&'static str] {
        match self {
            Self::Lock => &["get", "hget", "set", "hincrby", "hset", "sadd"],
            Self::Watch => &["watch", "unwatch", "get", "hget", "multi", "exec"],
            Self::List => &["lpop", "hincrby", "hset", "sadd"],
            Self::Lua => &["hincrby", "hset", "sadd"],
            Self::Atomic | Self::Coalesced => &[],
        }
    }

    /// The inventory a sale needs for this strategy.
    pub fn inventory(self) -> Inventory {
        match self {
            Self::List => Inventory::List,
            Self::Lock | Self::Watch | Self::Lua => Inventory::Counter,
            Self::Atomic | Self::Coalesced => Inventory::Hash,
        }
    }

    /// Whether it runs on a Redis Cluster: all but `watch`, whose
    /// WATCH/MULTI needs a connection of its own to one server.
    pub fn runs_on_a_cluster(self) -> bool {
        self != Self::Watch
    }
}

/// What every strategy works with: a connection and the sale it sells.
#[derive(Clone)]
pub(crate) struct Ctx {
    pub conn: Conn,
    pub keys: SaleKeys,
    pub sale: Sale,
}

impl Ctx {
    /// Baselines check the window here, against this process's clock.
    fn window(&self) -> Option<Outcome> {
        let now = now_ms();
        if self.sale.starts_at_ms.is_some_and(|s| now < s) {
            Some(Outcome::NotStarted)
        } else if self.sale.ends_at_ms.is_some_and(|e| now >= e) {
            Some(Outcome::Ended)
        } else {
            None
        }
    }

    fn limit(&self) -> Option<u64> {
        self.sale.per_user_limit.map(u64::from)
    }
}

/// The per-user limit for baselines without a lock or transaction of their
/// own (`list`, `lua`): reserve the allowance first (`HINCRBY`), then take a
/// unit with `take`, giving the allowance back when no unit was left. No user
/// ever ends above the limit. If `take` fails with an error the allowance
/// stays reserved, since the unit may have been taken.
async fn reserve_then_take<F, Fut>(ctx: &Ctx, req: &PurchaseRequest, take: F) -> Result<Outcome>
where
    F: FnOnce(Conn) -> Fut,
    Fut: Future<Output = Result<bool>>,
{
    use redis::AsyncCommands;
    if let Some(refusal) = ctx.window() {
        return Ok(refusal);
    }
    let mut conn = ctx.conn.clone();
    let user = &req.user_id;
    let bought: u64 = conn.hincr(&ctx.keys.users, user, 1).await?;
    let refusal = if ctx.limit().is_some_and(|limit| bought > limit) {
        Some(Outcome::LimitExceeded)
    } else if !take(conn.clone()).await? {
        Some(Outcome::SoldOut)
    } else {
        None
    };
    if let Some(refusal) = refusal {
        let _: i64 = conn.hincr(&ctx.keys.users, user, -1).await?;
        return Ok(refusal);
    }
    let order_id = records::order_id(&ctx.keys.id, ctx.sale.generation);
    let mut pipe = redis::pipe();
    records::record(&mut pipe, &ctx.keys, &order_id, user);
    let () = pipe.query_async(&mut conn).await?;
    Ok(Outcome::Ok(Order {
        order_id,
        quantity: 1,
    }))
}

enum Imp {
    Lock(locked::Locked),
    Watch(watch::Watch),
    List(list::List),
    Lua(lua::Lua),
    Atomic(atomic::Atomic),
    Coalesced(coalesced::Coalescer),
}

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
    per_user_limit: Option<u32>,
    kind: Kind,
    attempts: AtomicU64,
}

// One per purchaser, behind its Arc: the sizes of the variants do not matter.
#[allow(clippy::large_enum_variant)]
enum Kind {
    One(One),
    /// A sharded sale: a [`One`] per shard (see `shard/purchaser.rs`).
    Sharded(crate::shard::purchaser::Sharded),
}

/// Buys in one sale (or one shard) with one strategy.
pub(crate) struct One {
    strategy: Strategy,
    sale: String,
    /// The connection may send a purchase twice (see `Conn::may_resend`).
    may_resend: bool,
    /// With `Durability::Replica`: the sale's shared `WAIT`s.
    replica: Option<ReplicaGate>,
    imp: Imp,
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
    pub(crate) fn one(one: One, per_user_limit: Option<u32>) -> Self {
        Self::with(one.strategy, per_user_limit, Kind::One(one))
    }

    /// A sharded sale's purchaser: routing and waiting around each
    /// shard's own [`One`] (which make request ids and confirm with
    /// replicas).
    pub(crate) fn sharded(
        strategy: Strategy,
        per_user_limit: Option<u32>,
        sharded: crate::shard::purchaser::Sharded,
    ) -> Self {
        Self::with(strategy, per_user_limit, Kind::Sharded(sharded))
    }

    fn with(strategy: Strategy, per_user_limit: Option<u32>, kind: Kind) -> Self {
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
    pub fn per_user_limit(&self) -> Option<u32> {
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

impl One {
    pub(crate) fn new(
        strategy: Strategy,
        ctx: Ctx,
        locks: Option<seckill_lock::Locks>,
        client: Option<&redis::Client>,
        coalescer: CoalescerConfig,
        durability: Durability,
    ) -> Result<Self> {
        let sale = ctx.sale.id.clone();
        let one_server = || Error::Unsupported {
            strategy: strategy.name(),
            sale: sale.clone(),
            reason: "runs on one Redis server, not on a cluster",
        };
        if ctx.sale.inventory != strategy.inventory() {
            return Err(Error::Unsupported {
                strategy: strategy.name(),
                sale: ctx.sale.id.clone(),
                reason: match strategy.inventory() {
                    Inventory::List => "needs a sale created with list inventory",
                    Inventory::Counter => "needs a sale created with counter inventory",
                    Inventory::Hash => "needs a sale created with hash inventory",
                },
            });
        }
        let replica = match durability {
            Durability::Primary => None,
            // `watch` writes on connections of its own, which a `WAIT` on
            // the shared one does not cover.
            Durability::Replica { .. } if strategy == Strategy::Watch => {
                return Err(Error::Unsupported {
                    strategy: strategy.name(),
                    sale: ctx.sale.id.clone(),
                    reason: "writes on connections of its own, so replica durability cannot confirm it",
                });
            }
            Durability::Replica { timeout } => Some(ReplicaGate::new(
                ctx.conn.clone(),
                ctx.keys.sale.clone(),
                timeout,
            )),
        };
        let may_resend = ctx.conn.may_resend();
        let imp = match strategy {
            Strategy::Lock => {
                let locks = locks.ok_or_else(one_server)?;
                Imp::Lock(locked::Locked::new(ctx, &locks)?)
            }
            Strategy::Watch => Imp::Watch(watch::Watch::new(
                ctx,
                client.ok_or_else(one_server)?.clone(),
            )),
            Strategy::List => Imp::List(list::List::new(ctx)),
            Strategy::Lua => Imp::Lua(lua::Lua::new(ctx)),
            Strategy::Atomic => Imp::Atomic(atomic::Atomic::new(ctx)),
            Strategy::Coalesced => Imp::Coalesced(coalesced::Coalescer::start(ctx, coalescer)),
        };
        Ok(Self {
            strategy,
            sale,
            may_resend,
            replica,
            imp,
        })
    }

    /// Buys for `req` (validated); answers the outcome and the attempts
    /// it took.
    pub(crate) async fn purchase(&self, req: &PurchaseRequest) -> Result<(Outcome, u64)> {
        let baseline = !matches!(self.strategy, Strategy::Atomic | Strategy::Coalesced);
        if baseline && req.quantity != 1 {
            return Err(Error::Invalid {
                field: "quantity",
                reason: format!(
                    "the {} strategy sells one unit at a time",
                    self.strategy.name()
                ),
            });
        }
        // A purchase the connection may send twice gets a request id of its
        // own, so a second run answers with the first one's order.
        let made_id = req.request_id.is_none() && !baseline && self.may_resend;
        let with_id;
        let req = if made_id {
            with_id = req
                .clone()
                .request_id(&format!("auto-{:032x}", rand::random::<u128>()));
            &with_id
        } else {
            req
        };
        let (outcome, tries) = match &self.imp {
            Imp::Lock(s) => (s.purchase(req).await?, 1),
            Imp::Watch(s) => s.purchase(req).await?,
            Imp::List(s) => (s.purchase(req).await?, 1),
            Imp::Lua(s) => (s.purchase(req).await?, 1),
            Imp::Atomic(s) => (s.purchase(req).await?, 1),
            Imp::Coalesced(s) => (s.purchase(req).await?, 1),
        };
        // An order answered again (a repeated request id) may be the one a
        // replica has not confirmed yet: it waits too.
        let made = matches!(outcome, Outcome::Ok(_) | Outcome::Duplicate(_));
        if let (true, Some(replica)) = (made, &self.replica)
            && !replica.confirm().await
        {
            return Err(Error::NotReplicated(self.sale.clone()));
        }
        let outcome = match outcome {
            // Its own id seen again: the buyer's one purchase, sent twice.
            Outcome::Duplicate(order) if made_id => Outcome::Ok(order),
            outcome => outcome,
        };
        Ok((outcome, tries))
    }
}

/// One answer of the purchase scripts (see `purchase.lua`).
pub(crate) enum Answer<'a> {
    /// Order `index` of stream entry `entry` was bought.
    Bought { entry: &'a str, index: u32 },
    /// Anything the scripts answer as text.
    Text(&'a str),
}

/// Turns a purchase script's answer to `req` into its outcome.
pub(crate) fn outcome(ctx: &Ctx, req: &PurchaseRequest, answer: Answer<'_>) -> Result<Outcome> {
    let bad = |answer: &str| Error::Batch(format!("unexpected purchase script answer: {answer:?}"));
    let (sale, generation) = (&ctx.keys.id, ctx.sale.generation);
    let order = |id: OrderId, quantity: u32| Order {
        order_id: id.to_string(),
        quantity,
    };
    let text = match answer {
        Answer::Bought { entry, index } => {
            return OrderId::in_entry(sale, generation, entry, index)
                .map(|id| Outcome::Ok(order(id, req.quantity)))
                .ok_or_else(|| bad(entry));
        }
        Answer::Text(text) => text,
    };
    if let Some((local, quantity)) = text.split_once('|') {
        let id = OrderId::from_local(sale, generation, local);
        return match (id, quantity.parse()) {
            (Some(id), Ok(quantity)) => Ok(Outcome::Duplicate(order(id, quantity))),
            _ => Err(bad(text)),
        };
    }
    if text.starts_with(|c: char| c.is_ascii_digit()) {
        return outcome(
            ctx,
            req,
            Answer::Bought {
                entry: text,
                index: 0,
            },
        );
    }
    Ok(match text {
        "sold_out" => Outcome::SoldOut,
        "limit" => Outcome::LimitExceeded,
        "not_started" => Outcome::NotStarted,
        "ended" => Outcome::Ended,
        "no_sale" => return Err(Error::SaleNotFound(ctx.keys.id.clone())),
        _ => return Err(bad(text)),
    })
}
