//! Purchase requests and their typed answers.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::keys::check_id;
use crate::rules::Rule;

/// Most units one purchase may ask for.
pub const MAX_QUANTITY: u32 = 1_000;

/// One buyer asking for units of a sale.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PurchaseRequest {
    /// The buyer; counted against the sale's per-user limit.
    pub user_id: String,
    /// Units asked for, 1 to [`MAX_QUANTITY`] (baseline strategies: only 1).
    pub quantity: u32,
    /// Retrying with the same id returns the first purchase instead of
    /// buying again (`atomic` and `coalesced` strategies).
    pub request_id: Option<String>,
}

impl PurchaseRequest {
    /// One unit for `user_id`, without a request id.
    pub fn new(user_id: &str) -> Self {
        Self {
            user_id: user_id.to_owned(),
            quantity: 1,
            request_id: None,
        }
    }

    /// Asks for `quantity` units instead of one.
    pub fn quantity(mut self, quantity: u32) -> Self {
        self.quantity = quantity;
        self
    }

    /// Sets the idempotency key: a retry with the same id is answered
    /// `Duplicate` with the first order.
    pub fn request_id(mut self, id: &str) -> Self {
        self.request_id = Some(id.to_owned());
        self
    }

    /// Checks the ids and the quantity; `Invalid` names the field.
    /// [`crate::Purchaser::purchase`] does this itself.
    pub fn validate(&self) -> Result<()> {
        check_id("user_id", &self.user_id)?;
        if let Some(id) = &self.request_id {
            check_id("request_id", id)?;
        }
        if self.quantity == 0 || self.quantity > MAX_QUANTITY {
            return Err(Error::Invalid {
                field: "quantity",
                reason: format!("must be 1-{MAX_QUANTITY}"),
            });
        }
        Ok(())
    }
}

/// An order the engine created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Order {
    /// The order id: a [`crate::OrderId`] for `atomic` and `coalesced`,
    /// `<sale>-<generation>-<random hex>` for the baselines.
    pub order_id: String,
    /// Units bought.
    pub quantity: u32,
}

/// How a purchase was answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Bought: the new order.
    Ok(Order),
    /// This request id already bought: the original order, nothing sold now.
    Duplicate(Order),
    /// Not enough units left for the quantity asked.
    SoldOut,
    /// A rule of the sale refused it: the per-user limit, the start or
    /// the end ([`Rule::code`] names it).
    Refused(Rule),
}

impl Outcome {
    /// The order, for `Ok` and `Duplicate`.
    pub fn order(&self) -> Option<&Order> {
        match self {
            Self::Ok(o) | Self::Duplicate(o) => Some(o),
            _ => None,
        }
    }

    /// A stable snake_case name (for metrics, JSON and logs).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Ok(_) => "ok",
            Self::Duplicate(_) => "duplicate",
            Self::SoldOut => "sold_out",
            Self::Refused(rule) => rule.code(),
        }
    }
}
