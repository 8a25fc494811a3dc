//! The HTTP API. Every answer is JSON; every error is `{code, message}`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use seckill_engine::{Outcome, PurchaseRequest, Sale, SaleSpec, check_id};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::error::ApiError;
use crate::state::AppState;

type Shared = State<Arc<AppState>>;
type Answer = Result<Response, ApiError>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSale {
    id: String,
    name: String,
    stock: u64,
    per_user_limit: u32,
    /// Milliseconds since the Unix epoch.
    starts_at: Option<u64>,
    ends_at: Option<u64>,
    payment_timeout_secs: Option<u64>,
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
    starts_at: Option<u64>,
    ends_at: Option<u64>,
    payment_timeout_secs: u64,
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
        .window(body.starts_at, body.ends_at);
    if let Some(secs) = body.payment_timeout_secs {
        if secs == 0 || secs > 86_400 {
            return Err(ApiError::invalid("payment_timeout_secs: must be 1-86400"));
        }
        spec = spec.payment_timeout_secs(secs);
    }
    let sale = state.engine.create_sale(&spec).await?;
    state.forget(&sale.id);
    state.store.upsert_sale(&sale).await?;
    Ok((StatusCode::CREATED, Json(SaleBody::from(sale))).into_response())
}

pub async fn get_sale(State(state): Shared, Path(id): Path<String>) -> Answer {
    check_id("sale id", &id)?;
    Ok(Json(SaleBody::from(state.engine.sale(&id).await?)).into_response())
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
    crate::extract::Body(body): crate::extract::Body<PurchaseBody>,
) -> Answer {
    check_id("sale id", &id)?;
    let req = PurchaseRequest {
        user_id: body.user_id,
        quantity: body.quantity,
        request_id: body.request_id,
    };
    req.validate()?;
    match state.purchase(&id, &req).await? {
        Outcome::Ok(order) | Outcome::Duplicate(order) => Ok(Json(json!({
            "order_id": order.order_id,
            "status": "pending_payment",
            "quantity": order.quantity,
        }))
        .into_response()),
        refused => Err(refusal(refused)),
    }
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

pub async fn get_order(State(state): Shared, Path(order_id): Path<String>) -> Answer {
    Ok(Json(state.engine.order(&order_id).await?).into_response())
}

pub async fn pay(State(state): Shared, Path(order_id): Path<String>) -> Answer {
    let new = state.engine.pay(&order_id).await?;
    Ok(Json(json!({ "order_id": order_id, "state": new })).into_response())
}

pub async fn cancel(State(state): Shared, Path(order_id): Path<String>) -> Answer {
    let new = state.engine.cancel(&order_id).await?;
    Ok(Json(json!({ "order_id": order_id, "state": new })).into_response())
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
    query: Result<Query<Page>, axum::extract::rejection::QueryRejection>,
) -> Answer {
    state.check_admin(auth(&headers))?;
    let Query(page) = query.map_err(|e| ApiError::invalid(e.body_text()))?;
    check_id("sale id", &id)?;
    if let Some(user) = &page.user_id {
        check_id("user_id", user)?;
    }
    if let Some(after) = &page.after {
        check_id("after", after)?;
    }
    let limit = page.limit.unwrap_or(100);
    if limit == 0 || limit > 1_000 {
        return Err(ApiError::invalid("limit: must be 1-1000"));
    }
    state.engine.sale(&id).await?;
    let orders = state
        .store
        .orders_page(&id, page.user_id.as_deref(), page.after.as_deref(), limit)
        .await?;
    let next = (orders.len() == limit as usize)
        .then(|| orders.last().map(|o| o.order_id.clone()))
        .flatten();
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

fn auth(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
}
