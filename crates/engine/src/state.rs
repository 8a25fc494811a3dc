//! [`OrderState`]: where an order stands. The floor under the errors and
//! the events, which both name states.

use serde::Serialize;

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

/// For rows read from SQL, where the state is stored as its name.
impl TryFrom<String> for OrderState {
    type Error = String;

    fn try_from(name: String) -> Result<Self, String> {
        Self::parse(&name).ok_or_else(|| format!("no order state is called {name:?}"))
    }
}
