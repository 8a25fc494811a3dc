//! What SQL answers for a sale no longer in Redis: an archived sale's
//! orders, and a purchase of it sent again. A sale SQL still holds as live
//! is not archived but lost from Redis, which a caller must say.

use seckill_engine::{Order, OrderState, Outcome, Rule};

use crate::error::Result;
use crate::store::{Store, StoredOrder};

/// What SQL knows of something asked for outside Redis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found<T> {
    /// Its sale is archived, and this is the answer.
    Archived(T),
    /// Its sale is live in SQL, so Redis lost it: sale `sale_id`.
    Lost {
        /// The (unsharded) sale's id.
        sale_id: String,
    },
    /// Nothing of the kind, or nothing the caller may see.
    Missing,
}

/// An order of an archived sale.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchivedOrder {
    /// The order as SQL holds it.
    pub order: StoredOrder,
    /// Its state.
    pub state: OrderState,
    /// Its pay-by time, ms since the Unix epoch.
    pub pay_by_ms: u64,
}

/// Order `order_id` from SQL, if `sees` its buyer.
///
/// ```no_run
/// # async fn run(store: seckill_orders::Store) -> seckill_orders::Result<()> {
/// use seckill_orders::archived::{self, Found};
/// if let Found::Archived(o) = archived::order(&store, "drop-1-17-1-0-0", |_| true).await? {
///     println!("{:?} by {}", o.state, o.order.user_id);
/// }
/// # Ok(()) }
/// ```
pub async fn order(
    store: &Store,
    order_id: &str,
    sees: impl Fn(&str) -> bool,
) -> Result<Found<ArchivedOrder>> {
    let Some(order) = store.order(order_id).await? else {
        return Ok(Found::Missing);
    };
    let Some(sale) = store.sale(&order.sale_id).await? else {
        return Ok(Found::Missing);
    };
    if sale.generation != order.generation || !sees(&order.user_id) {
        return Ok(Found::Missing);
    }
    if sale.archived_ms.is_none() {
        return Ok(Found::Lost {
            sale_id: seckill_engine::sale_of(&sale.id).to_owned(),
        });
    }
    let state = order.state;
    let pay_by_ms = (order.created_ms + sale.payment_timeout_secs * 1000).max(0) as u64;
    Ok(Found::Archived(ArchivedOrder {
        order,
        state,
        pay_by_ms,
    }))
}

/// A purchase of sale `sale_id` by `user_id` with `request_id`, answered
/// from SQL: an archived sale has ended, and a purchase the buyer made
/// with this request id gets that order back, as it did live.
pub async fn purchase(
    store: &Store,
    sale_id: &str,
    user_id: &str,
    request_id: Option<&str>,
) -> Result<Found<Outcome>> {
    let sale = match store.sale(sale_id).await? {
        Some(sale) if sale.archived_ms.is_some() => sale,
        Some(_) => {
            return Ok(Found::Lost {
                sale_id: sale_id.to_owned(),
            });
        }
        None => return Ok(Found::Missing),
    };
    if let Some(request) = request_id
        && let Some(order) = store
            .order_by_request(sale_id, sale.generation, user_id, request)
            .await?
    {
        return Ok(Found::Archived(Outcome::Duplicate(Order {
            order_id: order.order_id,
            quantity: order.quantity.max(0) as u32,
        })));
    }
    Ok(Found::Archived(Outcome::Refused(Rule::EndsAt)))
}
