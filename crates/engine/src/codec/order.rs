//! The lifecycle functions' answers (`lua/order.lua`) and the settled
//! value they leave per order in the sale's `settled` hash.

use crate::error::{Error, Result};
use crate::state::OrderState;

/// What `order` answers to a pay or a cancel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transition {
    /// The order is now in this state.
    Now(OrderState),
    /// Refused: the order is already in this state.
    Refused(OrderState),
    /// No such order in the sale.
    NotFound,
}

impl Transition {
    /// Reads `not_found`, `refused|<state>` or `<state>`.
    pub fn read(answer: &str) -> Result<Self> {
        let state = |s| {
            OrderState::parse(s)
                .ok_or_else(|| Error::Batch(format!("unexpected order script answer: {answer:?}")))
        };
        Ok(match answer {
            "not_found" => Self::NotFound,
            _ => match answer.strip_prefix("refused|") {
                Some(s) => Self::Refused(state(s)?),
                None => Self::Now(state(answer)?),
            },
        })
    }

    /// The state the order is now in, or the error a caller is told.
    pub fn into_result(self, order_id: &str) -> Result<OrderState> {
        match self {
            Self::Now(state) => Ok(state),
            Self::Refused(state) => Err(Error::OrderConflict {
                order_id: order_id.to_owned(),
                state,
            }),
            Self::NotFound => Err(Error::OrderNotFound(order_id.to_owned())),
        }
    }
}

/// A settled order as its sale's `settled` hash holds it:
/// `<state>|<user>|<quantity>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Settled {
    pub state: OrderState,
    pub user_id: String,
    pub quantity: u32,
}

impl Settled {
    pub fn read(value: &str) -> Option<Self> {
        let mut parts = value.split('|');
        let state = OrderState::parse(parts.next()?)?;
        let user_id = parts.next()?.to_owned();
        let quantity = parts.next()?.parse().ok()?;
        parts.next().is_none().then_some(Self {
            state,
            user_id,
            quantity,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_and_settled_values_read_as_they_are_written() {
        assert_eq!(
            Transition::read("paid").unwrap(),
            Transition::Now(OrderState::Paid)
        );
        assert_eq!(
            Transition::read("refused|expired").unwrap(),
            Transition::Refused(OrderState::Expired)
        );
        assert_eq!(Transition::read("not_found").unwrap(), Transition::NotFound);
        assert!(Transition::read("refused|gone").is_err());
        assert!(Transition::read("").is_err());
        let s = Settled::read("cancelled|al|2").unwrap();
        assert_eq!(
            (s.state, s.user_id.as_str(), s.quantity),
            (OrderState::Cancelled, "al", 2)
        );
        for bad in ["paid|al", "paid|al|x", "late|al|1", "paid|al|1|2"] {
            assert!(Settled::read(bad).is_none(), "{bad}");
        }
    }
}
