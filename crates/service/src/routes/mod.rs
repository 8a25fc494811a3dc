//! The HTTP API. Every answer is JSON; every error is `{code, message}`.
//! Each handler names the role it takes first (see `docs/security.md`).
//!
//! - `sales`: sales and purchases.
//! - `orders`: reading, paying, cancelling and listing orders.

pub mod orders;
pub mod sales;

use axum::http::Method;
use axum::routing::{MethodRouter, get, post};

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use seckill_engine::check_id;
use serde_json::json;

use crate::error::ApiError;
use crate::state::AppState;

type Shared = State<Arc<AppState>>;
type Answer = Result<Response, ApiError>;

/// A route: its path, its method and its handler.
pub type Route = (&'static str, Method, MethodRouter<Arc<AppState>>);

/// Every route the service answers. The router is made from this list, and
/// a test holds `openapi.json` to it: every route here is in the document
/// and nothing else is.
pub fn table() -> Vec<Route> {
    use crate::{dashboard, metrics};
    vec![
        ("/v1/sales", Method::POST, post(sales::create_sale)),
        ("/v1/sales", Method::GET, get(sales::list_sales)),
        ("/v1/sales/{id}", Method::GET, get(sales::get_sale)),
        ("/v1/sales/{id}/end", Method::POST, post(sales::end_sale)),
        (
            "/v1/sales/{id}/stock",
            Method::POST,
            post(sales::change_stock),
        ),
        (
            "/v1/sales/{id}/purchase",
            Method::POST,
            post(sales::purchase),
        ),
        (
            "/v1/sales/{id}/orders",
            Method::GET,
            get(orders::list_orders),
        ),
        ("/v1/orders", Method::GET, get(orders::my_orders)),
        ("/v1/orders/{order_id}", Method::GET, get(orders::get_order)),
        ("/v1/orders/{order_id}/pay", Method::POST, post(orders::pay)),
        (
            "/v1/orders/{order_id}/cancel",
            Method::POST,
            post(orders::cancel),
        ),
        ("/healthz", Method::GET, get(healthz)),
        ("/readyz", Method::GET, get(readyz)),
        ("/metrics", Method::GET, get(metrics::render)),
        ("/openapi.json", Method::GET, get(openapi)),
        ("/dashboard", Method::GET, get(dashboard::page)),
        ("/dashboard/app.js", Method::GET, get(dashboard::script)),
        ("/v1/dashboard/stream", Method::GET, get(dashboard::stream)),
    ]
}

/// A page size: 100 unless given, at most 1,000.
fn page_limit(limit: Option<u32>) -> Result<u32, ApiError> {
    let limit = limit.unwrap_or(100);
    if limit == 0 || limit > 1_000 {
        return Err(ApiError::invalid("limit: must be 1-1000"));
    }
    Ok(limit)
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

/// The document as this service's settings make it.
pub async fn openapi(State(state): Shared) -> Response {
    Json(crate::openapi::document(&state.auth.config)).into_response()
}

pub async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}
