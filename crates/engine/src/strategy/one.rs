//! [`One`]: buying in one sale (or one shard) with one strategy, behind
//! which each strategy's own module does the buying.

use crate::durability::{Durability, ReplicaGate};
use crate::error::{Error, Result};
use crate::order::{Outcome, PurchaseRequest};
use crate::sale::Inventory;

use super::choice::Strategy;
use super::coalesced::{self, CoalescerConfig};
use super::ctx::Ctx;
use super::{atomic, list, locked, lua, watch};

enum Imp {
    Lock(locked::Locked),
    /// Boxed: its own client (with any TLS settings) makes it the largest.
    Watch(Box<watch::Watch>),
    List(list::List),
    Lua(lua::Lua),
    Atomic(atomic::Atomic),
    Coalesced(coalesced::Coalescer),
}

/// Buys in one sale (or one shard) with one strategy.
pub(crate) struct One {
    pub strategy: Strategy,
    sale: String,
    /// The connection may send a purchase twice (see `Conn::may_resend`).
    may_resend: bool,
    /// With `Durability::Replica`: the sale's shared `WAIT`s.
    replica: Option<ReplicaGate>,
    imp: Imp,
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
            Strategy::Watch => Imp::Watch(Box::new(watch::Watch::new(
                ctx,
                client
                    .ok_or_else(|| Error::Unsupported {
                        strategy: strategy.name(),
                        sale: sale.clone(),
                        reason: "opens connections of its own, to one Redis server named by \
                                 URL (not a cluster, not the master Sentinel names)",
                    })?
                    .clone(),
            ))),
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
        // own, so a second run answers with the first one's order; so does
        // one a replica must confirm, so the buyer told to retry can.
        let made_id =
            req.request_id.is_none() && !baseline && (self.may_resend || self.replica.is_some());
        let with_id;
        let req = if made_id {
            with_id = req
                .clone()
                .request_id(&format!("auto-{:032x}", rand::random::<u128>()));
            &with_id
        } else {
            req
        };
        let epoch = self.replica.as_ref().map(ReplicaGate::epoch);
        let answered = match &self.imp {
            Imp::Lock(s) => s.purchase(req).await.map(|o| (o, 1)),
            Imp::Watch(s) => s.purchase(req).await,
            Imp::List(s) => s.purchase(req).await.map(|o| (o, 1)),
            Imp::Lua(s) => s.purchase(req).await.map(|o| (o, 1)),
            Imp::Atomic(s) => s.purchase(req).await.map(|o| (o, 1)),
            Imp::Coalesced(s) => s.purchase(req).await.map(|o| (o, 1)),
        };
        // Unanswered, it may have been made: the buyer, who sent no id,
        // needs the one made for it to retry without buying twice.
        let (outcome, tries) = answered.map_err(|e| match (e, &req.request_id) {
            (e @ (Error::Redis(_) | Error::Batch(_)), Some(id)) if made_id => Error::Unanswered {
                sale: self.sale.clone(),
                request_id: id.clone(),
                reason: e.to_string(),
            },
            (e, _) => e,
        })?;
        // An order answered again (a repeated request id) may be the one a
        // replica has not confirmed yet: it waits too.
        let made = matches!(outcome, Outcome::Ok(_) | Outcome::Duplicate(_));
        if let (true, Some(replica), Some(epoch)) = (made, &self.replica, epoch)
            && !replica.confirm(epoch).await
        {
            return Err(Error::NotReplicated {
                sale: self.sale.clone(),
                request_id: req.request_id.clone(),
            });
        }
        let outcome = match outcome {
            // Its own id seen again: the buyer's one purchase, sent twice.
            Outcome::Duplicate(order) if made_id => Outcome::Ok(order),
            outcome => outcome,
        };
        Ok((outcome, tries))
    }
}
