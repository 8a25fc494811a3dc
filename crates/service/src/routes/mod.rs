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
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use seckill_engine::check_id;
use serde_json::json;

use crate::error::ApiError;
use crate::state::AppState;

type Shared = State<Arc<AppState>>;
type Answer = Result<Response, ApiError>;

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

pub async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        include_str!("../openapi.json"),
    )
        .into_response()
}

pub async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}
