//! [`Error`], why the service could not start or a client request got no
//! answer; and [`ApiError`], every error answer: a status and a body
//! `{"code": "...", "message": "..."}` whose `code` is stable and
//! documented in `openapi.json`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use seckill_engine::OrderState;

/// Why the service could not start, or a client request got no answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// [`client::Http`]: the request could not be sent or its answer read.
    #[error("http: {0}")]
    Http(String),
    /// [`client::Http`]: no answer in time.
    #[error("no answer within {0:?}")]
    Timeout(std::time::Duration),
    /// Redis answered with an error or could not be reached.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// The engine failed; at [`start`], an unusable Redis URL.
    #[error(transparent)]
    Engine(#[from] seckill_engine::Error),
    /// The order store failed; at [`start`], the SQL database could not be
    /// opened or migrated.
    #[error(transparent)]
    Orders(#[from] seckill_orders::Error),
    /// [`start`]: the listen address could not be bound.
    #[error("listen: {0}")]
    Io(#[from] std::io::Error),
    /// [`start`]: a setting that cannot work (a key that does not parse,
    /// a secret too short, a file that cannot be read).
    #[error("{0}")]
    Config(String),
}

/// An API error: what the client sees.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    /// The HTTP status of the answer.
    pub status: StatusCode,
    /// Stable snake_case code for programs, e.g. `sold_out`; listed in `openapi.json`.
    pub code: &'static str,
    /// Human-readable explanation; its wording may change.
    pub message: String,
}

impl ApiError {
    /// An error with any status and code.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400 `invalid_request`: the request can never succeed as sent.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 401 `unauthorized`: no credential, or one that does not verify.
    pub fn unauthorized(why: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", why)
    }

    /// 403 `forbidden`: known, but not allowed this.
    pub fn forbidden(why: &str) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", why)
    }

    /// 503 `unavailable`: Redis or SQL cannot serve now; the client may retry.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    /// 503 `sale_lost`: SQL holds sale `id` as live but Redis no longer
    /// does (a restart without persistence, a failover to an empty
    /// replica, a flush). Nothing of it is sold or settled until an admin
    /// restores it from SQL.
    pub fn sale_lost(id: &str) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "sale_lost",
            format!(
                "Redis has lost sale `{id}`, which SQL holds as live: nothing of it is sold or \
                 settled until an admin restores it with `seckill audit --sale {id} \
                 --repair-from-sql`"
            ),
        )
    }

    /// 409 with `code`: the request clashes with the current state (a sale
    /// that exists, an order already settled).
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "code": self.code, "message": self.message });
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            // RFC 6750: say which scheme would be taken.
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
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
            // Each field keeps the document's rules; only together do they
            // break one it states in words: not 400, which means "the
            // document forbids this".
            E::Inconsistent { .. } => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "fields_disagree",
                e.to_string(),
            ),
            E::StateConflict { .. } => Self::conflict("sale_conflict", e.to_string()),
            E::Unsupported { .. } => Self::invalid(e.to_string()),
            E::NotReplicated(_) => {
                tracing::warn!(error = %e, "purchase not confirmed by a replica");
                Self::unavailable(
                    "the purchase was not confirmed by a replica in time; retry with the same request_id",
                )
            }
            E::StockMoving(_) => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "stock_moving",
                format!("{e}; nothing was bought"),
            ),
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
            // An error this version does not know: not the client's fault,
            // and it may pass; answered as `unavailable`, the one server-side
            // code `openapi.json` documents, as unknown order-store errors are.
            _ => {
                tracing::error!(error = %e, "unexpected engine error");
                Self::unavailable(
                    "the sale service could not complete the request; retry with the same request_id",
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
