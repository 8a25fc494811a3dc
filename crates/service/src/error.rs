//! Every error answer: a status and a body `{"code": "...", "message": "..."}`
//! whose `code` is stable and documented in `openapi.json`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use seckill_engine::OrderState;

/// An API error: what the client sees.
#[derive(Debug, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid admin token is required: Authorization: Bearer <token>",
        )
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "code": self.code, "message": self.message });
        (self.status, Json(body)).into_response()
    }
}

impl From<seckill_engine::Error> for ApiError {
    fn from(e: seckill_engine::Error) -> Self {
        use seckill_engine::Error as E;
        match e {
            E::SaleNotFound(id) => Self::new(
                StatusCode::NOT_FOUND,
                "sale_not_found",
                format!("no sale `{id}`"),
            ),
            E::OrderNotFound(id) => Self::new(
                StatusCode::NOT_FOUND,
                "order_not_found",
                format!("no order `{id}`"),
            ),
            E::SaleExists(id) => {
                Self::conflict("sale_exists", format!("sale `{id}` already exists"))
            }
            E::OrderConflict { order_id, state } => {
                let code = match state {
                    OrderState::Expired => "order_expired",
                    OrderState::Paid => "order_paid",
                    OrderState::Cancelled => "order_cancelled",
                    OrderState::PendingPayment => "order_pending",
                };
                Self::conflict(code, format!("order `{order_id}` is {}", state.as_str()))
            }
            E::Invalid { field, reason } => Self::invalid(format!("{field}: {reason}")),
            E::Unsupported { .. } => Self::invalid(e.to_string()),
            // Redis down, slow or failing, a batch whose answer never came,
            // contention: the client should retry (with its request id).
            E::Redis(_)
            | E::Batch(_)
            | E::Lock(_)
            | E::LockLost(_)
            | E::Contention { .. }
            | E::Closed => {
                tracing::warn!(error = %e, "purchase path unavailable");
                Self::unavailable(
                    "the sale service cannot reach its store right now; retry with the same request_id",
                )
            }
        }
    }
}

impl From<seckill_orders::Error> for ApiError {
    fn from(e: seckill_orders::Error) -> Self {
        match e {
            seckill_orders::Error::Engine(e) => e.into(),
            other => {
                tracing::warn!(error = %other, "order store unavailable");
                Self::unavailable("the order database cannot be reached right now")
            }
        }
    }
}
