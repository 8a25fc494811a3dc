//! After a purchase: an order waits for payment, then is paid, cancelled or
//! expired. Each change is one script on Redis that also appends an event to
//! the sale's stream, so the SQL copy follows.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::event::OrderId;

/// Where an order stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderState {
    /// Bought, holding its units, waiting to be paid by its pay-by time.
    PendingPayment,
    /// Paid: the units are the buyer's for good.
    Paid,
    /// Cancelled before payment; its units went back to the sale.
    Cancelled,
    /// Not paid in time; its units went back to the sale.
    Expired,
}

impl OrderState {
    /// The snake_case name, as stored in Redis and serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PendingPayment => "pending_payment",
            Self::Paid => "paid",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
        }
    }

    /// The state [`OrderState::as_str`] names; `None` for any other text.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending_payment" => Self::PendingPayment,
            "paid" => Self::Paid,
            "cancelled" => Self::Cancelled,
            "expired" => Self::Expired,
            _ => return None,
        })
    }

    /// Whether the order still holds its units.
    pub fn is_live(self) -> bool {
        matches!(self, Self::PendingPayment | Self::Paid)
    }
}

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
    /// An order from its settled value `<state>|<user>|<qty>`.
    pub(crate) fn settled(order: &OrderId, value: &str, payment_timeout_ms: u64) -> Option<Self> {
        let mut parts = value.split('|');
        let state = OrderState::parse(parts.next()?)?;
        let user_id = parts.next()?.to_owned();
        let quantity = parts.next()?.parse().ok()?;
        Some(Self::new(
            order,
            user_id,
            quantity,
            state,
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

/// Turns a lifecycle script's answer into the order's state or an error.
pub(crate) fn transition(order_id: &str, answer: &str) -> Result<OrderState> {
    if answer == "not_found" {
        return Err(Error::OrderNotFound(order_id.to_owned()));
    }
    if let Some(state) = answer.strip_prefix("refused|") {
        let state = OrderState::parse(state).ok_or_else(|| unexpected(answer))?;
        return Err(Error::OrderConflict {
            order_id: order_id.to_owned(),
            state,
        });
    }
    OrderState::parse(answer).ok_or_else(|| unexpected(answer))
}

fn unexpected(answer: &str) -> Error {
    Error::Batch(format!("unexpected order script answer: {answer:?}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_restock_channel_in_lua_is_the_published_one() {
        let lua = include_str!("lua/lifecycle_common.lua");
        assert!(lua.contains(&format!("'{}'", crate::keys::RESTOCK_CHANNEL)));
    }
}
