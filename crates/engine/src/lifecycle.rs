//! After a purchase: an order waits for payment, then is paid, cancelled or
//! expired. Each change is one script on Redis that also appends an event to
//! the sale's stream, so the SQL copy follows.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::keys::check_id;

/// Where an order stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderState {
    PendingPayment,
    Paid,
    Cancelled,
    Expired,
}

impl OrderState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PendingPayment => "pending_payment",
            Self::Paid => "paid",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
        }
    }

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
    pub order_id: String,
    pub sale_id: String,
    pub user_id: String,
    pub quantity: u32,
    pub state: OrderState,
    /// Pay-by time, ms since the Unix epoch.
    pub pay_by_ms: u64,
}

impl OrderInfo {
    /// Parses a value of the sale's states hash.
    pub(crate) fn parse(sale_id: &str, order_id: &str, value: &str) -> Option<Self> {
        let mut parts = value.split('|');
        let state = OrderState::parse(parts.next()?)?;
        let user_id = parts.next()?.to_owned();
        let quantity = parts.next()?.parse().ok()?;
        let pay_by_ms = parts.next()?.parse().ok()?;
        Some(Self {
            order_id: order_id.to_owned(),
            sale_id: sale_id.to_owned(),
            user_id,
            quantity,
            state,
            pay_by_ms,
        })
    }
}

/// The sale an order id belongs to: ids are `<sale>-<generation>-<number>`.
pub fn sale_of(order_id: &str) -> Result<&str> {
    let invalid = || Error::Invalid {
        field: "order_id",
        reason: "not an order id of this system".to_owned(),
    };
    check_id("order_id", order_id)?;
    let (rest, number) = order_id.rsplit_once('-').ok_or_else(invalid)?;
    let (sale, generation) = rest.rsplit_once('-').ok_or_else(invalid)?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(number) || !digits(generation) || sale.is_empty() {
        return Err(invalid());
    }
    Ok(sale)
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
    use super::sale_of;

    #[test]
    fn order_ids_name_their_sale() {
        assert_eq!(sale_of("drop-1-1795392000000-17").unwrap(), "drop-1");
        assert_eq!(sale_of("a-1-2").unwrap(), "a");
        for bad in ["a-b-c", "a-1", "-1-2", "a-1-", "x y-1-2", ""] {
            assert!(sale_of(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_restock_channel_in_lua_is_the_published_one() {
        let lua = include_str!("lua/lifecycle_common.lua");
        assert!(lua.contains(&format!("'{}'", crate::keys::RESTOCK_CHANNEL)));
    }
}
