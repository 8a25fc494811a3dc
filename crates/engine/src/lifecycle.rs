//! After a purchase: an order waits for payment, then is paid, cancelled or
//! expired. Each change is one script on Redis that also appends an event to
//! the sale's stream, so the SQL copy follows.

use std::collections::HashMap;

use serde::Serialize;

use seckill_redis::Replicas;

use crate::codec::order::{Settled, Transition};
use crate::durability::Durability;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::event::{Event, StreamEntry};
use crate::inspect::stream_events;
use crate::keys::SaleKeys;
use crate::order_id::OrderId;
use crate::scripts::LIBRARY;
use crate::state::OrderState;

/// Most stream entries one sale's sweep looks at in [`Engine::expire_due_in`],
/// so a large expiry wave never holds Redis long.
const EXPIRE_PER_CALL: u32 = 500;

/// An order as Redis holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OrderInfo {
    /// The order id, as [`crate::OrderId`] formats it.
    pub order_id: String,
    /// The sale it was bought from.
    pub sale_id: String,
    /// The buyer.
    pub user_id: String,
    /// Units bought.
    pub quantity: u32,
    /// Where it stands now.
    pub state: OrderState,
    /// Pay-by time, ms since the Unix epoch.
    pub pay_by_ms: u64,
}

impl OrderInfo {
    /// An order from its settled value (see `codec::order`).
    pub(crate) fn settled(order: &OrderId, value: &str, payment_timeout_ms: u64) -> Option<Self> {
        let s = Settled::read(value)?;
        Some(Self::new(
            order,
            s.user_id,
            s.quantity,
            s.state,
            payment_timeout_ms,
        ))
    }

    pub(crate) fn new(
        order: &OrderId,
        user_id: String,
        quantity: u32,
        state: OrderState,
        payment_timeout_ms: u64,
    ) -> Self {
        Self {
            order_id: order.to_string(),
            sale_id: order.sale.clone(),
            user_id,
            quantity,
            state,
            pay_by_ms: order.ms + payment_timeout_ms,
        }
    }
}

/// The id of an order asked for by a client: one written as order ids are
/// ([`crate::is_order_id_shaped`]) but not of this system's form names no
/// order (`OrderNotFound`); any other is `Invalid`.
fn known(order_id: &str) -> Result<OrderId> {
    order_id.parse().map_err(|_: Error| {
        if crate::order_id::is_order_id_shaped(order_id) {
            Error::OrderNotFound(order_id.to_owned())
        } else {
            Error::Invalid {
                field: "order_id",
                reason: format!(
                    "must be 1-{} characters of A-Z a-z 0-9 _ ~ -",
                    crate::order_id::MAX_ORDER_ID_LEN
                ),
            }
        }
    })
}

impl Engine {
    async fn settle(&self, order_id: &str, op: &str) -> Result<OrderState> {
        let id = known(order_id)?;
        let keys = SaleKeys::new(&id.sale)?;
        let mut conn = self.conn.clone();
        let epoch = conn.epoch();
        let answer: String = LIBRARY
            .call("order", &keys.lifecycle())
            .arg(&id.sale)
            .arg(id.generation)
            .arg(id.local())
            .arg(op)
            .invoke(&mut conn)
            .await?;
        let state = Transition::read(&answer)?.into_result(order_id);
        // Units went back: cancelled now, or expired by this very call (a
        // late pay or cancel expires the order first). Told whatever the
        // replicas say below: they are back on the master now.
        let returned = match &state {
            Ok(state) => *state == OrderState::Cancelled,
            Err(Error::OrderConflict { state, .. }) => *state == OrderState::Expired,
            Err(_) => false,
        };
        if returned {
            self.returned_to(&id.sale, id.generation).await?;
        }
        // Acknowledged as a purchase is: a failover must not undo a
        // payment its payer was told of. Done before, it was written again
        // (order.lua), so the wait covers it too.
        if let (Ok(_), Durability::Replica { timeout }) = (&state, self.durability)
            && !conn
                .on_every_replica(keys.sale.as_bytes(), epoch, timeout, Replicas::InTouch)
                .await?
        {
            return Err(Error::SettlementNotReplicated(order_id.to_owned()));
        }
        state
    }

    /// An order of the production path (`atomic`, `coalesced`).
    pub async fn order(&self, order_id: &str) -> Result<OrderInfo> {
        let id = known(order_id)?;
        let keys = SaleKeys::new(&id.sale)?;
        let entry = id.entry();
        let ((generation, timeout), settled, found): (
            (Option<u64>, Option<u64>),
            Option<String>,
            redis::Value,
        ) = redis::pipe()
            .hmget(&keys.sale, &["gen", "payment_timeout"])
            .hget(&keys.settled, id.local())
            .xrange(&keys.orders, &entry, &entry)
            .query_async(&mut self.conn.clone())
            .await?;
        let not_found = || Error::OrderNotFound(order_id.to_owned());
        if generation != Some(id.generation) {
            return Err(not_found());
        }
        let timeout_ms = timeout.unwrap_or(0) * 1000;
        if let Some(value) = settled {
            return OrderInfo::settled(&id, &value, timeout_ms).ok_or_else(not_found);
        }
        StreamEntry::list(found)?
            .iter()
            .flat_map(|e| Event::decode(&id.sale, e))
            .find(|e| e.order_id == order_id && e.state == OrderState::PendingPayment)
            .map(|e| pending(&id, &e, timeout_ms))
            .ok_or_else(not_found)
    }

    /// Pays an order. Paying twice is a no-op; an expired or cancelled order
    /// is refused with `OrderConflict`. With [`Durability::Replica`], a
    /// payment no replica confirmed in time is `SettlementNotReplicated`:
    /// made, and paying again is safe.
    pub async fn pay(&self, order_id: &str) -> Result<OrderState> {
        self.settle(order_id, "pay").await
    }

    /// Cancels an unpaid order, returning its units to the stock and to the
    /// buyer's allowance. Cancelling twice is a no-op; a paid or expired
    /// order is refused with `OrderConflict`; unconfirmed by a replica, as
    /// [`Engine::pay`].
    pub async fn cancel(&self, order_id: &str) -> Result<OrderState> {
        self.settle(order_id, "cancel").await
    }

    /// Expires every unpaid order of sale `id` past its pay-by time,
    /// returning its units; answers how many. Each script call looks at no
    /// more than `per_call` stream entries, so Redis is never held long.
    /// Safe to run from any number of processes at once: each order expires
    /// exactly once.
    pub async fn expire_due(&self, id: &str, per_call: u32) -> Result<u64> {
        self.expire_filing(id, per_call, None).await
    }

    /// As [`Engine::expire_due`], then files the sale in `due_index`, a
    /// sorted set of sale hash keys on the sale's master, under the time
    /// its next order comes due (or takes it out when it has none): how a
    /// sweeper learns which sales to sweep when, instead of asking each.
    ///
    /// ```no_run
    /// # async fn run(engine: seckill_engine::Engine) -> seckill_engine::Result<()> {
    /// let expired = engine.expire_due_filing("drop-1", 500, "seckill:{news:0}:due").await?;
    /// # Ok(()) }
    /// ```
    pub async fn expire_due_filing(&self, id: &str, per_call: u32, due_index: &str) -> Result<u64> {
        self.expire_filing(id, per_call, Some(due_index)).await
    }

    /// Expires what is due in every sale that `due_index` (a master's due
    /// index, see [`Engine::expire_due_filing`]) lists as due by now, at
    /// most `sales` of them, in one call to their master, refiling each.
    /// A member may also name one order of a sale, as `"<sale hash key>
    /// <ref> <generation> <quantity> <buyer>"` (`<ref>`: the order id after
    /// `<sale>-<generation>-`): that order alone expires, unless settled,
    /// with no read of the sale's stream, and its member leaves the index.
    /// Answers the orders expired, whether more sales may be due, and the
    /// sales left to [`Engine::expire_due_filing`]: shards of a sharded
    /// sale, sales with more due than one call expires, and sales whose
    /// slot is moving to another master.
    ///
    /// ```no_run
    /// # async fn run(engine: seckill_engine::Engine) -> seckill_engine::Result<()> {
    /// let (expired, more, left) = engine.expire_due_in("seckill:{news:0}:due", 500).await?;
    /// # Ok(()) }
    /// ```
    pub async fn expire_due_in(
        &self,
        due_index: &str,
        sales: usize,
    ) -> Result<(u64, bool, Vec<String>)> {
        let (expired, more, left): (u64, u8, Vec<String>) = LIBRARY
            .call("expire", &[due_index])
            .arg("")
            .arg(sales.max(1))
            .arg(EXPIRE_PER_CALL)
            .arg(if self.target().is_cluster() { "1" } else { "" })
            .invoke(&mut self.conn.clone())
            .await?;
        let more = more == 1;
        Ok((expired, more, left))
    }

    async fn expire_filing(&self, id: &str, per_call: u32, due_index: Option<&str>) -> Result<u64> {
        let keys = SaleKeys::new(id)?;
        let mut expired = 0;
        let swept = loop {
            let mut call = LIBRARY.call("expire", &keys.lifecycle());
            call.arg(id).arg(per_call.max(1));
            if let Some(index) = due_index {
                call.arg(index);
            }
            let call = call.invoke::<(u64, u8)>(&mut self.conn.clone()).await;
            match call {
                Ok((n, more)) => {
                    expired += n;
                    if more == 0 {
                        break Ok(());
                    }
                }
                Err(e) => break Err(e),
            }
        };
        // Units that went back before a later call failed count too.
        if expired > 0 && crate::is_shard(id) {
            let generation: Option<u64> =
                redis::AsyncCommands::hget(&mut self.conn.clone(), &keys.sale, "gen").await?;
            if let Some(generation) = generation {
                self.returned_to(id, generation).await?;
            }
        }
        swept?;
        Ok(expired)
    }

    /// All orders of the production path of sale `id`, as Redis holds them:
    /// the settled ones, and the pending ones from the stream past the
    /// expiry cursor. A sharded sale's are its shards'.
    pub async fn orders(&self, id: &str) -> Result<Vec<OrderInfo>> {
        let mut orders = Vec::new();
        for part in self.parts(id).await? {
            orders.extend(self.orders_of(&part).await?);
        }
        Ok(orders)
    }

    pub(crate) async fn orders_of(&self, id: &str) -> Result<Vec<OrderInfo>> {
        let keys = SaleKeys::new(id)?;
        let mut conn = self.conn.clone();
        type Head = (Option<u64>, Option<u64>, Option<String>);
        let ((generation, timeout, swept), settled): (Head, HashMap<String, String>) =
            redis::pipe()
                .hmget(&keys.sale, &["gen", "payment_timeout", "swept"])
                .hgetall(&keys.settled)
                .query_async(&mut conn)
                .await?;
        let Some(generation) = generation else {
            return Ok(Vec::new());
        };
        let timeout_ms = timeout.unwrap_or(0) * 1000;
        let mut orders: Vec<OrderInfo> = settled
            .iter()
            .filter_map(|(local, value)| {
                let order = OrderId::from_local(id, generation, local)?;
                OrderInfo::settled(&order, value, timeout_ms)
            })
            .collect();
        let from = swept.map_or_else(|| "-".to_owned(), |s| format!("({s}"));
        for event in stream_events(&mut conn, &keys, &from).await? {
            if event.state != OrderState::PendingPayment || event.generation as u64 != generation {
                continue;
            }
            let order: OrderId = event.order_id.parse()?;
            if !settled.contains_key(&order.local()) {
                orders.push(pending(&order, &event, timeout_ms));
            }
        }
        Ok(orders)
    }
}

/// A pending order from its purchase event.
fn pending(order: &OrderId, event: &Event, timeout_ms: u64) -> OrderInfo {
    OrderInfo::new(
        order,
        event.user_id.clone(),
        u32::try_from(event.quantity).unwrap_or(u32::MAX),
        OrderState::PendingPayment,
        timeout_ms,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_restock_channel_in_lua_is_the_published_one() {
        let lua = include_str!("lua/lifecycle_common.lua");
        assert!(lua.contains(&format!("'{}'", crate::keys::RESTOCK_CHANNEL)));
    }
}
