//! Order events as the sale streams carry them.

use seckill_engine::OrderState;

/// One stream entry, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The stream entry id (`<ms>-<n>`), for XACK.
    pub entry_id: String,
    pub order_id: String,
    pub sale_id: String,
    pub generation: i64,
    pub user_id: String,
    pub quantity: i64,
    pub request_id: Option<String>,
    /// `PendingPayment` for a purchase; the new state for pay, cancel, expiry.
    pub state: OrderState,
    /// When Redis appended it (from the entry id).
    pub at_ms: i64,
}

impl Event {
    /// Parses an entry of sale `sale_id`'s stream; `None` for an entry that
    /// is not an order event (it is acknowledged and skipped).
    pub fn parse(sale_id: &str, entry: &redis::streams::StreamId) -> Option<Self> {
        let field = |k: &str| entry.get::<String>(k);
        let state = match field("type") {
            None => OrderState::PendingPayment,
            Some(t) => OrderState::parse(&t)?,
        };
        let order_id = field("order")?;
        let generation = order_id.rsplit('-').nth(1)?.parse().ok()?;
        Some(Self {
            entry_id: entry.id.clone(),
            sale_id: sale_id.to_owned(),
            generation,
            user_id: field("user")?,
            quantity: field("qty")?.parse().ok()?,
            request_id: field("req").filter(|r| !r.is_empty()),
            state,
            at_ms: entry.id.split('-').next()?.parse().ok()?,
            order_id,
        })
    }
}
