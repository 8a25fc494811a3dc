//! Checks a finished sale against the invariants no strategy may break.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::engine::Engine;
use crate::error::Result;
use crate::order::Order;

/// What was asked of a sale and what buyers were told.
#[derive(Clone, Debug, Default)]
pub struct Demand {
    /// Units each user asked for, over all their requests.
    pub requested: HashMap<String, u64>,
    /// Every order a buyer was told it got (`Outcome::Ok`), once each.
    pub acknowledged: Vec<Order>,
}

impl Demand {
    /// Counts a request of `quantity` units by `user`.
    pub fn ask(&mut self, user: &str, quantity: u32) {
        *self.requested.entry(user.to_owned()).or_default() += u64::from(quantity);
    }
}

/// The verdict on a sale. `ok` is true only if every count below is clean.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    /// Units the sale was created with.
    pub stock: u64,
    /// Units sold according to the stock counter (or token list).
    pub sold: u64,
    /// Units in the order records.
    pub recorded: u64,
    /// `min(stock, demand the limits allow)`: what had to be sold.
    pub expected: u64,
    /// Units sold or recorded beyond the stock.
    pub oversold: u64,
    /// Units short of `expected` in the records.
    pub undersold: u64,
    /// Users whose recorded units exceed the per-user limit.
    pub limit_violations: u64,
    /// Order ids recorded more than once.
    pub duplicate_orders: u64,
    /// Acknowledged orders missing from the records.
    pub lost_orders: u64,
    /// Recorded orders no buyer was told about.
    pub phantom_orders: u64,
    /// Order events in the sale's stream (0 for the baselines, which
    /// keep per-day records instead); otherwise one per acknowledged order
    /// plus one per settled (paid, cancelled, expired) order.
    pub stream_events: u64,
    /// No overselling or underselling, `recorded == sold`, every other count
    /// zero, and the stream events add up.
    pub ok: bool,
}

/// Reads sale `id` back from Redis and checks it against `demand`.
pub async fn verify(engine: &Engine, id: &str, demand: &Demand) -> Result<Verdict> {
    let sale = engine.sale(id).await?;
    let ledger = engine.ledger(id).await?;
    let stream_events = engine.stream_events(id).await?;
    let settled = engine
        .orders(id)
        .await?
        .iter()
        .filter(|o| o.state != crate::OrderState::PendingPayment)
        .count() as u64;

    let recorded: u64 = ledger.iter().map(|e| u64::from(e.quantity)).sum();
    let mut per_user: HashMap<&str, u64> = HashMap::new();
    let mut ids = HashSet::new();
    let mut duplicate_orders = 0;
    for entry in &ledger {
        *per_user.entry(&entry.user_id).or_default() += u64::from(entry.quantity);
        if !ids.insert(entry.order_id.as_str()) {
            duplicate_orders += 1;
        }
    }
    let limit = sale.rules.per_user_limit();
    let limit_violations = per_user
        .values()
        .filter(|&&n| limit.is_some_and(|l| n > l))
        .count() as u64;
    let allowed: u64 = demand
        .requested
        .values()
        .map(|&n| limit.map_or(n, |l| n.min(l)))
        .sum();
    let expected = sale.stock.min(allowed);
    let acknowledged: HashSet<&str> = demand
        .acknowledged
        .iter()
        .map(|o| o.order_id.as_str())
        .collect();
    let lost_orders = acknowledged.iter().filter(|id| !ids.contains(*id)).count() as u64;
    let phantom_orders = ids.iter().filter(|id| !acknowledged.contains(*id)).count() as u64;
    let oversold = recorded.max(sale.sold).saturating_sub(sale.stock);
    let undersold = expected.saturating_sub(recorded);
    // Only the production path writes the stream; there it must hold one
    // event per order and per settlement, an empty stream included.
    let stream_matches = match sale.inventory {
        crate::Inventory::Hash => stream_events == demand.acknowledged.len() as u64 + settled,
        _ => stream_events == 0,
    };
    let ok = oversold == 0
        && undersold == 0
        && recorded == sale.sold
        && limit_violations == 0
        && duplicate_orders == 0
        && lost_orders == 0
        && phantom_orders == 0
        && stream_matches;
    Ok(Verdict {
        stock: sale.stock,
        sold: sale.sold,
        recorded,
        expected,
        oversold,
        undersold,
        limit_violations,
        duplicate_orders,
        lost_orders,
        phantom_orders,
        stream_events,
        ok,
    })
}
