//! Orders: read and cancelled by their buyer (or the admin), paid only by
//! the payment side, listed for their buyer or, per sale, for the admin.
//! Another buyer's order answers as one that does not exist.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use seckill_engine::{MAX_ORDER_ID_LEN, OrderInfo, OrderState, check_id, is_order_id_shaped};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::sales::sale_body;
use super::{Answer, Shared, idempotency_key, page_limit};
use crate::auth::{Caller, OrderAccess, webhook};
use crate::error::{ApiError, Code};
use crate::extract::{Path, Query, RawBody, plain};
use crate::fields::present;
use crate::state::AppState;
use crate::time;
use seckill_orders::archived::{self, Found};

/// An order as the API shows it: times as RFC 3339.
#[derive(Serialize)]
struct OrderBody {
    order_id: String,
    sale_id: String,
    user_id: String,
    quantity: u32,
    state: OrderState,
    pay_by: String,
    /// The payment side's reference, once it paid with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    payment_ref: Option<String>,
}

impl From<OrderInfo> for OrderBody {
    fn from(o: OrderInfo) -> Self {
        Self {
            pay_by: time::format(o.pay_by_ms),
            order_id: o.order_id,
            sale_id: o.sale_id,
            user_id: o.user_id,
            quantity: o.quantity,
            state: o.state,
            payment_ref: None,
        }
    }
}

fn not_found(order_id: &str) -> ApiError {
    seckill_engine::Error::OrderNotFound(order_id.to_owned()).into()
}

/// An order of an archived sale, from SQL, if `access` sees it.
async fn archived_order(
    state: &AppState,
    order_id: &str,
    access: &OrderAccess,
) -> Result<OrderBody, ApiError> {
    match archived::order(&state.store, order_id, |user| access.sees(user)).await? {
        Found::Archived(o) => Ok(OrderBody {
            pay_by: time::format(o.pay_by_ms),
            order_id: o.order.order_id,
            sale_id: o.order.sale_id,
            user_id: o.order.user_id,
            quantity: o.order.quantity.max(0) as u32,
            state: o.state,
            payment_ref: None,
        }),
        Found::Lost { sale_id } => Err(ApiError::sale_lost(&sale_id)),
        Found::Missing => Err(not_found(order_id)),
    }
}

/// Order `order_id` if `access` sees it, from Redis or, once its sale is
/// archived, from SQL.
async fn visible_order(
    state: &AppState,
    order_id: &str,
    access: &OrderAccess,
) -> Result<OrderBody, ApiError> {
    let order = match state.engine.order(order_id).await {
        Ok(order) => OrderBody::from(order),
        Err(seckill_engine::Error::OrderNotFound(_)) => {
            archived_order(state, order_id, access).await?
        }
        Err(e) => return Err(e.into()),
    };
    if !access.sees(&order.user_id) {
        return Err(not_found(order_id));
    }
    Ok(order)
}

/// `GET /v1/orders/{id}`: its buyer, or the admin.
pub async fn get_order(
    State(state): Shared,
    caller: Caller,
    Path(order_id): Path<String>,
) -> Answer {
    let access = caller.reader()?;
    let mut order = visible_order(&state, &order_id, &access).await?;
    if order.state == OrderState::Paid {
        order.payment_ref = state.store.payment_ref(&order_id).await?;
    }
    Ok(Json(order).into_response())
}

/// Pays or cancels; an order of an archived sale is settled for good, so a
/// repeat of what settled it answers as before and anything else conflicts.
async fn settle(state: &AppState, order_id: &str, to: OrderState) -> Result<OrderState, ApiError> {
    let done = if to == OrderState::Paid {
        state.engine.pay(order_id).await
    } else {
        state.engine.cancel(order_id).await
    };
    match done {
        Ok(new) => Ok(new),
        Err(seckill_engine::Error::OrderNotFound(_)) => {
            // Whoever settles was let through already.
            let order = archived_order(state, order_id, &OrderAccess::All).await?;
            if order.state != to {
                return Err(seckill_engine::Error::OrderConflict {
                    order_id: order_id.to_owned(),
                    state: order.state,
                }
                .into());
            }
            Ok(order.state)
        }
        Err(e) => Err(e.into()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayBody {
    #[serde(default, deserialize_with = "present")]
    payment_ref: Option<String>,
}

/// A payment reference: 1-128 visible ASCII characters.
fn check_payment_ref(reference: &str) -> Result<(), ApiError> {
    if reference.is_empty()
        || reference.len() > 128
        || !reference.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(ApiError::invalid(
            "payment_ref: 1-128 visible ASCII characters (no spaces)",
        ));
    }
    Ok(())
}

/// `POST /v1/orders/{id}/pay`: the payment side (its token or a signed
/// webhook) or the admin, never a buyer. Idempotent by nature: a repeat
/// answers the state the first one made; the first reference given stays.
pub async fn pay(
    State(state): Shared,
    caller: Caller,
    Path(order_id): Path<String>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Answer {
    match headers.get(webhook::HEADER) {
        Some(signature) => {
            let secret =
                state.auth.config.webhook_secret.as_ref().ok_or_else(|| {
                    ApiError::unauthorized("this service takes no signed webhooks")
                })?;
            let signature = signature
                .to_str()
                .map_err(|_| ApiError::unauthorized("Seckill-Signature: not readable"))?;
            webhook::verify(
                secret,
                signature,
                &body,
                jsonwebtoken::get_current_timestamp(),
            )?;
        }
        None => caller.payer()?,
    }
    idempotency_key(&headers)?;
    let reference = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        serde_json::from_slice::<PayBody>(&body)
            .map_err(|e| ApiError::invalid(plain(&e.to_string())))?
            .payment_ref
    };
    if let Some(r) = &reference {
        check_payment_ref(r)?;
    }
    let new = settle(&state, &order_id, OrderState::Paid).await?;
    if let Some(r) = &reference {
        state.store.record_payment(&order_id, r).await?;
    }
    Ok(Json(json!({ "order_id": order_id, "state": new })).into_response())
}

/// `POST /v1/orders/{id}/cancel`: its buyer, the payment side or the admin.
pub async fn cancel(
    State(state): Shared,
    caller: Caller,
    Path(order_id): Path<String>,
    headers: HeaderMap,
) -> Answer {
    let access = caller.canceller()?;
    idempotency_key(&headers)?;
    if access != OrderAccess::All {
        visible_order(&state, &order_id, &access).await?;
    }
    let new = settle(&state, &order_id, OrderState::Cancelled).await?;
    Ok(Json(json!({ "order_id": order_id, "state": new })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Page {
    user_id: Option<String>,
    limit: Option<u32>,
    after: Option<String>,
}

/// `GET /v1/sales/{id}/orders`: the admin's listing of a sale's orders.
pub async fn list_orders(
    State(state): Shared,
    caller: Caller,
    Path(id): Path<String>,
    query: Result<Query<Page>, ApiError>,
) -> Answer {
    caller.admin()?;
    let Query(page) = query?;
    page_of_orders(&state, &id, page).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinePage {
    sale: String,
    user_id: Option<String>,
    limit: Option<u32>,
    after: Option<String>,
}

/// `GET /v1/orders?sale=ID`: the caller's own orders of a sale (the admin,
/// and an anonymous caller in body mode, name the user).
pub async fn my_orders(
    State(state): Shared,
    caller: Caller,
    query: Result<Query<MinePage>, ApiError>,
) -> Answer {
    let access = caller.reader()?;
    let Query(page) = query?;
    let user_id = match access {
        OrderAccess::Own(user) => match page.user_id {
            Some(named) if named != user => {
                return Err(ApiError::new(
                    axum::http::StatusCode::FORBIDDEN,
                    Code::Forbidden,
                    "a buyer lists its own orders only; leave user_id out",
                ));
            }
            _ => Some(user),
        },
        OrderAccess::All => page.user_id,
    };
    let sale = page.sale;
    let page = Page {
        user_id,
        limit: page.limit,
        after: page.after,
    };
    page_of_orders(&state, &sale, page).await
}

/// Orders of sale `id` from SQL, a page at a time, by order id.
async fn page_of_orders(state: &AppState, id: &str, page: Page) -> Answer {
    check_id("sale id", id)?;
    if let Some(user) = &page.user_id {
        check_id("user_id", user)?;
    }
    // A cursor is an order id, which names a shard in a sharded sale.
    if page
        .after
        .as_deref()
        .is_some_and(|a| !is_order_id_shaped(a))
    {
        return Err(ApiError::invalid(format!(
            "after: must be 1-{MAX_ORDER_ID_LEN} characters of A-Z a-z 0-9 _ ~ -"
        )));
    }
    let limit = page_limit(page.limit)?;
    // A sharded sale's orders are its shards': each a range of order ids
    // of its own, so a page is the first `limit` of theirs together.
    let parts = state.engine.parts(id).await?;
    if parts == [id] {
        // Not sharded: it must exist, in Redis or archived in SQL.
        sale_body(state, id, false).await?;
    }
    let mut orders = Vec::new();
    for part in &parts {
        orders.extend(
            state
                .store
                .orders_page(part, page.user_id.as_deref(), page.after.as_deref(), limit)
                .await?,
        );
    }
    orders.sort_by(|a, b| a.order_id.cmp(&b.order_id));
    orders.truncate(limit as usize);
    let next = (orders.len() == limit as usize)
        .then(|| orders.last().map(|o| o.order_id.clone()))
        .flatten();
    let orders: Vec<_> = orders
        .into_iter()
        .map(|o| {
            json!({
                "order_id": o.order_id,
                "sale_id": o.sale_id,
                "user_id": o.user_id,
                "quantity": o.quantity,
                "request_id": o.request_id,
                "state": o.state,
                "created_at": time::format(o.created_ms as u64),
                "updated_at": time::format(o.updated_ms as u64),
            })
        })
        .collect();
    Ok(Json(json!({ "orders": orders, "next_after": next })).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_is_answered_as_the_document_says() {
        let mut order = OrderBody::from(OrderInfo {
            order_id: "s-1-2-3-0".into(),
            sale_id: "s".into(),
            user_id: "u".into(),
            quantity: 1,
            state: OrderState::Paid,
            pay_by_ms: 1,
        });
        order.payment_ref = Some("ref".into());
        crate::openapi::assert_fits("Order", &serde_json::to_value(order).unwrap());
    }
}
