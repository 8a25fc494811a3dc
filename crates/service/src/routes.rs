//! The HTTP API. Every answer is JSON; every error is `{code, message}`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use seckill_engine::{
    OrderId, OrderInfo, OrderState, Outcome, PurchaseRequest, Sale, SaleSpec, Sharding, Status,
    StockChange, check_id, is_shard,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use seckill_orders::StoredSale;

use crate::error::ApiError;
use crate::extract::{Path, Query};
use crate::state::AppState;
use crate::time::{self, Millis};

type Shared = State<Arc<AppState>>;
type Answer = Result<Response, ApiError>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSale {
    id: String,
    name: String,
    stock: u64,
    per_user_limit: u32,
    starts_at: Option<Millis>,
    ends_at: Option<Millis>,
    payment_timeout_secs: Option<u64>,
    shards: Option<u32>,
}

#[derive(Serialize)]
struct SaleBody {
    id: String,
    name: String,
    stock: u64,
    remaining: u64,
    sold: u64,
    per_user_limit: Option<u32>,
    status: seckill_engine::Status,
    #[serde(serialize_with = "time::serialize_opt")]
    starts_at: Option<u64>,
    #[serde(serialize_with = "time::serialize_opt")]
    ends_at: Option<u64>,
    payment_timeout_secs: u64,
    /// A sharded sale's pool and shards: for admins only.
    #[serde(skip_serializing_if = "Option::is_none")]
    sharding: Option<Sharding>,
}

impl SaleBody {
    /// With a sharded sale's pool and shards, which only admins see.
    fn for_admin(sale: Sale) -> Self {
        let sharding = sale.sharding.clone();
        Self {
            sharding,
            ..Self::from(sale)
        }
    }
}

impl From<Sale> for SaleBody {
    fn from(s: Sale) -> Self {
        Self {
            id: s.id,
            name: s.name,
            stock: s.stock,
            remaining: s.remaining,
            sold: s.sold,
            per_user_limit: s.per_user_limit,
            status: s.status,
            starts_at: s.starts_at_ms,
            ends_at: s.ends_at_ms,
            payment_timeout_secs: s.payment_timeout_secs,
            sharding: None,
        }
    }
}

pub async fn create_sale(
    State(state): Shared,
    headers: HeaderMap,
    crate::extract::Body(body): crate::extract::Body<NewSale>,
) -> Answer {
    state.check_admin(auth(&headers))?;
    let mut spec = SaleSpec::new(&body.id, body.stock)
        .name(&body.name)
        .per_user_limit(body.per_user_limit)
        .window(body.starts_at.map(|t| t.0), body.ends_at.map(|t| t.0));
    if let Some(secs) = body.payment_timeout_secs {
        if secs == 0 || secs > 86_400 {
            return Err(ApiError::invalid("payment_timeout_secs: must be 1-86400"));
        }
        spec = spec.payment_timeout_secs(secs);
    }
    if let Some(shards) = body.shards {
        spec = spec.shards(shards);
    }
    let sale = state.engine.create_sale(&spec).await?;
    state.forget(&sale.id);
    state.store.upsert_sale(&sale).await?;
    Ok((StatusCode::CREATED, Json(SaleBody::for_admin(sale))).into_response())
}

impl SaleBody {
    /// An archived sale as SQL recorded it: ended, every order settled.
    fn archived(s: StoredSale) -> Self {
        let stock = s.stock.max(0) as u64;
        let sold = s.archived_sold.unwrap_or(0).max(0) as u64;
        Self {
            id: s.id,
            name: s.name,
            stock,
            remaining: stock.saturating_sub(sold),
            sold,
            per_user_limit: s.per_user_limit.map(|l| l as u32),
            status: Status::Ended,
            starts_at: s.starts_at_ms.map(|v| v as u64),
            ends_at: s.ends_at_ms.map(|v| v as u64),
            payment_timeout_secs: s.payment_timeout_secs.max(0) as u64,
            sharding: None,
        }
    }
}

/// Sale `id` from Redis, or from SQL once archived; a sharded sale's pool
/// and shards only for an `admin`.
async fn sale_body(state: &AppState, id: &str, admin: bool) -> Result<SaleBody, ApiError> {
    match state.engine.sale(id).await {
        Ok(sale) if admin => Ok(SaleBody::for_admin(sale)),
        Ok(sale) => Ok(SaleBody::from(sale)),
        Err(seckill_engine::Error::SaleNotFound(_)) => match state.store.sale(id).await? {
            Some(stored) if stored.archived_ms.is_some() => Ok(SaleBody::archived(stored)),
            _ => Err(seckill_engine::Error::SaleNotFound(id.to_owned()).into()),
        },
        Err(e) => Err(e.into()),
    }
}

/// An order of an archived sale, from SQL; `OrderNotFound` otherwise.
async fn archived_order(state: &AppState, order_id: &str) -> Result<OrderBody, ApiError> {
    let not_found = || ApiError::from(seckill_engine::Error::OrderNotFound(order_id.to_owned()));
    let Some(order) = state.store.order(order_id).await? else {
        return Err(not_found());
    };
    let Some(sale) = state.store.sale(&order.sale_id).await? else {
        return Err(not_found());
    };
    if sale.archived_ms.is_none() || sale.generation != order.generation {
        return Err(not_found());
    }
    let state = OrderState::parse(&order.state).ok_or_else(not_found)?;
    Ok(OrderBody {
        pay_by: time::format((order.created_ms + sale.payment_timeout_secs * 1000).max(0) as u64),
        order_id: order.order_id,
        sale_id: order.sale_id,
        user_id: order.user_id,
        quantity: order.quantity.max(0) as u32,
        state,
    })
}

pub async fn get_sale(State(state): Shared, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    check_id("sale id", &id)?;
    // Anyone may read a sale; a sharded one's inner workings are for admins.
    let admin = state.check_admin(auth(&headers)).is_ok();
    Ok(Json(sale_body(&state, &id, admin).await?).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SalesPage {
    status: Option<Status>,
    limit: Option<u32>,
    after: Option<String>,
}

/// The sales, by id, a page at a time; only those of `status` if given.
pub async fn list_sales(
    State(state): Shared,
    headers: HeaderMap,
    query: Result<Query<SalesPage>, ApiError>,
) -> Answer {
    state.check_admin(auth(&headers))?;
    let Query(page) = query?;
    let limit = page_limit(page.limit)?;
    if let Some(after) = &page.after {
        check_id("after", after)?;
    }
    // Live sales from Redis (not the shards of sharded ones), archived
    // ones from SQL.
    let mut ids = state.engine.sale_ids().await?;
    ids.retain(|id| !is_shard(id));
    let mut archived: std::collections::HashMap<String, StoredSale> = state
        .store
        .archived_sales()
        .await?
        .into_iter()
        .map(|s| (s.id.clone(), s))
        .collect();
    ids.extend(archived.keys().cloned());
    ids.sort_unstable();
    ids.dedup();
    let mut sales = Vec::new();
    let after = page.after.as_deref().unwrap_or("");
    for id in ids.iter().filter(|id| id.as_str() > after) {
        let sale = match state.engine.sale(id).await {
            Ok(sale) => SaleBody::for_admin(sale),
            Err(seckill_engine::Error::SaleNotFound(_)) => match archived.remove(id) {
                Some(stored) => SaleBody::archived(stored),
                // Archived since SQL was read, or deleted.
                None => match state.store.sale(id).await? {
                    Some(stored) if stored.archived_ms.is_some() => SaleBody::archived(stored),
                    _ => continue,
                },
            },
            Err(e) => return Err(e.into()),
        };
        if page.status.is_none_or(|s| s == sale.status) {
            sales.push(sale);
            if sales.len() == limit as usize {
                break;
            }
        }
    }
    let next = (sales.len() == limit as usize)
        .then(|| sales.last().map(|s| s.id.clone()))
        .flatten();
    Ok(Json(json!({ "sales": sales, "next_after": next })).into_response())
}

/// Ends a sale now; its pending orders stay payable until their pay-by time.
pub async fn end_sale(State(state): Shared, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    state.check_admin(auth(&headers))?;
    check_id("sale id", &id)?;
    let sale = match state.engine.end_sale(&id).await {
        Ok(sale) => sale,
        // Archived: ended long since.
        Err(seckill_engine::Error::SaleNotFound(_)) => {
            return Ok(Json(sale_body(&state, &id, true).await?).into_response());
        }
        Err(e) => return Err(e.into()),
    };
    state.store.upsert_sale(&sale).await?;
    Ok(Json(SaleBody::for_admin(sale)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StockBody {
    add: Option<u64>,
    set: Option<u64>,
}

/// Adds to a running sale's stock or sets it, never below what is sold.
pub async fn change_stock(
    State(state): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
    crate::extract::Body(body): crate::extract::Body<StockBody>,
) -> Answer {
    state.check_admin(auth(&headers))?;
    check_id("sale id", &id)?;
    let change = match (body.add, body.set) {
        (Some(n), None) => StockChange::Add(n),
        (None, Some(n)) => StockChange::Set(n),
        _ => {
            return Err(ApiError::invalid(
                "send exactly one of `add` (units to add) and `set` (the new stock)",
            ));
        }
    };
    let sale = state.engine.change_stock(&id, change).await?;
    state.restocked(&id);
    state.store.upsert_sale(&sale).await?;
    Ok(Json(SaleBody::for_admin(sale)).into_response())
}

/// A page size: 100 unless given, at most 1,000.
fn page_limit(limit: Option<u32>) -> Result<u32, ApiError> {
    let limit = limit.unwrap_or(100);
    if limit == 0 || limit > 1_000 {
        return Err(ApiError::invalid("limit: must be 1-1000"));
    }
    Ok(limit)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurchaseBody {
    user_id: String,
    #[serde(default = "one")]
    quantity: u32,
    request_id: Option<String>,
}

fn one() -> u32 {
    1
}

pub async fn purchase(
    State(state): Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    crate::extract::Body(body): crate::extract::Body<PurchaseBody>,
) -> Answer {
    check_id("sale id", &id)?;
    let request_id = match (idempotency_key(&headers)?, body.request_id) {
        (Some(header), Some(field)) if header != field => {
            return Err(ApiError::invalid(
                "request_id: differs from the Idempotency-Key header; send one, or both equal",
            ));
        }
        (header, field) => header.or(field),
    };
    let req = PurchaseRequest {
        user_id: body.user_id,
        quantity: body.quantity,
        request_id,
    };
    req.validate()?;
    let started = std::time::Instant::now();
    let answer = match state.purchase(&id, &req).await {
        Err(e) if e.code == "sale_not_found" => archived_purchase(&state, &id, &req).await,
        other => other,
    }
    .and_then(|outcome| match outcome {
        Outcome::Ok(order) | Outcome::Duplicate(order) => Ok(order),
        refused => Err(refusal(refused)),
    });
    let code = answer.as_ref().map_or_else(|e| e.code, |_| "ok");
    state.activity.record(&id, code, started.elapsed());
    let order = answer?;
    Ok(Json(json!({
        "order_id": order.order_id,
        "status": "pending_payment",
        "quantity": order.quantity,
    }))
    .into_response())
}

/// A purchase of a sale no longer in Redis: an archived sale has ended, and
/// a retry of a purchase it made gets that order back, as it did live.
async fn archived_purchase(
    state: &AppState,
    id: &str,
    req: &PurchaseRequest,
) -> Result<Outcome, ApiError> {
    let not_found = || ApiError::from(seckill_engine::Error::SaleNotFound(id.to_owned()));
    let sale = match state.store.sale(id).await? {
        Some(sale) if sale.archived_ms.is_some() => sale,
        _ => return Err(not_found()),
    };
    if let Some(request) = &req.request_id
        && let Some(order) = state
            .store
            .order_by_request(id, sale.generation, request)
            .await?
    {
        return Ok(Outcome::Duplicate(seckill_engine::Order {
            order_id: order.order_id,
            quantity: order.quantity.max(0) as u32,
        }));
    }
    Ok(Outcome::Ended)
}

/// The `Idempotency-Key` header (IETF httpapi draft), held to the request
/// id rules; `None` when absent.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let key = value
        .to_str()
        .map_err(|_| ApiError::invalid("Idempotency-Key: only A-Z a-z 0-9 _ - are allowed"))?;
    check_id("Idempotency-Key", key)?;
    Ok(Some(key.to_owned()))
}

fn refusal(outcome: Outcome) -> ApiError {
    let message = match outcome {
        Outcome::SoldOut => "no units left",
        Outcome::LimitExceeded => "this user has bought the most units allowed",
        Outcome::NotStarted => "the sale has not started",
        Outcome::Ended => "the sale has ended",
        Outcome::Ok(_) | Outcome::Duplicate(_) => "bought",
    };
    ApiError::conflict(outcome.code(), message)
}

/// An order as the API shows it: times as RFC 3339.
#[derive(Serialize)]
struct OrderBody {
    order_id: String,
    sale_id: String,
    user_id: String,
    quantity: u32,
    state: OrderState,
    pay_by: String,
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
        }
    }
}

pub async fn get_order(State(state): Shared, Path(order_id): Path<String>) -> Answer {
    let body = match state.engine.order(&order_id).await {
        Ok(order) => OrderBody::from(order),
        Err(seckill_engine::Error::OrderNotFound(_)) => archived_order(&state, &order_id).await?,
        Err(e) => return Err(e.into()),
    };
    Ok(Json(body).into_response())
}

/// Pays or cancels; an order of an archived sale is settled for good, so a
/// repeat of what settled it answers as before and anything else conflicts.
async fn settle(state: &AppState, order_id: &str, to: OrderState) -> Answer {
    let done = if to == OrderState::Paid {
        state.engine.pay(order_id).await
    } else {
        state.engine.cancel(order_id).await
    };
    let new = match done {
        Ok(new) => new,
        Err(seckill_engine::Error::OrderNotFound(_)) => {
            let order = archived_order(state, order_id).await?;
            if order.state != to {
                return Err(seckill_engine::Error::OrderConflict {
                    order_id: order_id.to_owned(),
                    state: order.state,
                }
                .into());
            }
            order.state
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Json(json!({ "order_id": order_id, "state": new })).into_response())
}

/// Pay and cancel are idempotent by nature (a repeat answers the state the
/// first one made); a key sent with them is held to the request id rules.
pub async fn pay(State(state): Shared, Path(order_id): Path<String>, headers: HeaderMap) -> Answer {
    idempotency_key(&headers)?;
    settle(&state, &order_id, OrderState::Paid).await
}

pub async fn cancel(
    State(state): Shared,
    Path(order_id): Path<String>,
    headers: HeaderMap,
) -> Answer {
    idempotency_key(&headers)?;
    settle(&state, &order_id, OrderState::Cancelled).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Page {
    user_id: Option<String>,
    limit: Option<u32>,
    after: Option<String>,
}

pub async fn list_orders(
    State(state): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
    query: Result<Query<Page>, ApiError>,
) -> Answer {
    state.check_admin(auth(&headers))?;
    let Query(page) = query?;
    check_id("sale id", &id)?;
    if let Some(user) = &page.user_id {
        check_id("user_id", user)?;
    }
    // A sharded sale's order ids, and so its pages' cursors, name a shard.
    if let Some(after) = page
        .after
        .as_deref()
        .filter(|a| a.parse::<OrderId>().is_err())
    {
        check_id("after", after)?;
    }
    let limit = page_limit(page.limit)?;
    // A sharded sale's orders are its shards': each a range of order ids
    // of its own, so a page is the first `limit` of theirs together.
    let parts = state.engine.parts(&id).await?;
    if parts == [id.as_str()] {
        // Not sharded: it must exist, in Redis or archived in SQL.
        sale_body(&state, &id, false).await?;
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

pub async fn healthz() -> Response {
    Json(json!({ "status": "ok" })).into_response()
}

pub async fn readyz(State(state): Shared) -> Answer {
    state
        .engine
        .ping()
        .await
        .map_err(|_| ApiError::unavailable("redis is not reachable"))?;
    state
        .store
        .ping()
        .await
        .map_err(|_| ApiError::unavailable("the order database is not reachable"))?;
    Ok(Json(json!({ "status": "ready" })).into_response())
}

pub async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        include_str!("openapi.json"),
    )
        .into_response()
}

pub async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

pub(crate) fn auth(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
}
