//! The HTTP API. Every answer is JSON; every error is `{code, message}`.
//! Each handler names the role it takes first (see `docs/security.md`).
//!
//! - `sales`: sales and purchases.
//! - `orders`: reading, paying, cancelling and listing orders.

pub mod orders;
pub mod sales;

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::handler::Handler;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use seckill_engine::check_id;
use serde_json::json;

use crate::auth::Caller;
use crate::error::{ApiError, Code};
use crate::state::AppState;

type Shared = State<Arc<AppState>>;
type Answer = Result<Response, ApiError>;

/// A route: its path, its method and the router answering that method.
pub type Route = (&'static str, Method, MethodRouter<Arc<AppState>>);

/// `handler` at `path` for `method` only: the table's method is the one
/// the router answers, so the test holding the document to the table holds
/// it to the router.
fn route<H, T>(path: &'static str, method: Method, handler: H) -> Route
where
    H: Handler<T, Arc<AppState>>,
    T: 'static,
{
    let filter = MethodFilter::try_from(method.clone()).expect("a method routes can take");
    (path, method, on(filter, handler))
}

/// Every route the service answers. The router is made from this list, and
/// a test holds `openapi.json` to it: every route here is in the document
/// and nothing else is.
pub fn table() -> Vec<Route> {
    use crate::{dashboard, metrics};
    use Method as M;
    vec![
        route("/v1/sales", M::POST, sales::create_sale),
        route("/v1/sales", M::GET, sales::list_sales),
        route("/v1/sales/{id}", M::GET, sales::get_sale),
        route("/v1/sales/{id}/end", M::POST, sales::end_sale),
        route("/v1/sales/{id}/stock", M::POST, sales::change_stock),
        route("/v1/sales/{id}/purchase", M::POST, sales::purchase),
        route("/v1/sales/{id}/orders", M::GET, orders::list_orders),
        route("/v1/orders", M::GET, orders::my_orders),
        route("/v1/orders/{order_id}", M::GET, orders::get_order),
        route("/v1/orders/{order_id}/pay", M::POST, orders::pay),
        route("/v1/orders/{order_id}/cancel", M::POST, orders::cancel),
        route("/healthz", M::GET, healthz),
        route("/readyz", M::GET, readyz),
        route("/metrics", M::GET, metrics::render),
        route("/openapi.json", M::GET, openapi),
        route("/dashboard", M::GET, dashboard::page),
        route("/dashboard/app.js", M::GET, dashboard::script),
        route("/v1/dashboard/stream", M::GET, dashboard::stream),
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

/// `GET /healthz`: anyone; a credential sent is still checked.
pub async fn healthz(caller: Caller) -> Answer {
    caller.checked()?;
    Ok(Json(json!({ "status": "ok" })).into_response())
}

/// `GET /readyz`: anyone; a credential sent is still checked.
pub async fn readyz(State(state): Shared, caller: Caller) -> Answer {
    caller.checked()?;
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
    // Ready: the other sales sell. These answer 503 until a replica has
    // their master's writes again.
    let waiting = state.waiting.sales();
    if waiting.is_empty() {
        return Ok(Json(json!({ "status": "ready" })).into_response());
    }
    Ok(Json(json!({ "status": "ready", "sales_waiting_for_replica": waiting })).into_response())
}

/// `GET /openapi.json`: anyone; the document as this service's settings
/// made it at start.
pub async fn openapi(State(state): Shared, caller: Caller) -> Answer {
    caller.checked()?;
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        state.openapi.clone(),
    )
        .into_response())
}

pub async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, Code::NotFound, "no such route")
}
