//! [`Error`], why the service could not start or a client request got no
//! answer; and [`ApiError`], every error answer: a status and a body
//! `{"code": "...", "message": "..."}` whose `code` is stable and
//! documented in `openapi.json`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use seckill_engine::{OrderState, Outcome, Rule};

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
    /// The order store failed.
    #[error(transparent)]
    Orders(#[from] seckill_orders::Error),
    /// [`start`]: the SQL database could not be opened or migrated.
    #[error("the order database {at} cannot be opened: {source}")]
    Database {
        /// Where it is, its password left out.
        at: String,
        /// Why.
        #[source]
        source: seckill_orders::Error,
    },
    /// [`start`]: the listen address could not be bound.
    #[error("listen: {0}")]
    Io(#[from] std::io::Error),
    /// [`start`]: a setting that cannot work (a key that does not parse,
    /// a secret too short, a file that cannot be read).
    #[error("{0}")]
    Config(String),
}

/// The stable `code` of an error answer: programs branch on it, and
/// `openapi.json` lists every one (a test holds the two together).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// `invalid_request`.
    InvalidRequest,
    /// `fields_disagree`.
    FieldsDisagree,
    /// `unauthorized`.
    Unauthorized,
    /// `forbidden`.
    Forbidden,
    /// `not_found`.
    NotFound,
    /// `sale_not_found`.
    SaleNotFound,
    /// `order_not_found`.
    OrderNotFound,
    /// `method_not_allowed`.
    MethodNotAllowed,
    /// `request_timeout`.
    RequestTimeout,
    /// `payload_too_large`.
    PayloadTooLarge,
    /// `rate_limited`.
    RateLimited,
    /// `sale_exists`.
    SaleExists,
    /// `sale_conflict`.
    SaleConflict,
    /// `sold_out`.
    SoldOut,
    /// A purchase rule refused the purchase: [`Rule::code`] spells it
    /// (`limit_exceeded`, `not_started`, `ended`).
    Refused(Rule),
    /// `order_expired`.
    OrderExpired,
    /// `order_paid`.
    OrderPaid,
    /// `order_cancelled`.
    OrderCancelled,
    /// `order_pending`.
    OrderPending,
    /// `unavailable`.
    Unavailable,
    /// `sale_lost`.
    SaleLost,
    /// `stock_moving`.
    StockMoving,
}

impl Code {
    /// Every code, a rule's refusals last.
    pub fn all() -> impl Iterator<Item = Code> {
        Self::FIXED
            .into_iter()
            .chain(Rule::ALL.into_iter().map(Self::Refused))
    }

    /// Every code but the rules'.
    const FIXED: [Code; 21] = [
        Self::InvalidRequest,
        Self::FieldsDisagree,
        Self::Unauthorized,
        Self::Forbidden,
        Self::NotFound,
        Self::SaleNotFound,
        Self::OrderNotFound,
        Self::MethodNotAllowed,
        Self::RequestTimeout,
        Self::PayloadTooLarge,
        Self::RateLimited,
        Self::SaleExists,
        Self::SaleConflict,
        Self::SoldOut,
        Self::OrderExpired,
        Self::OrderPaid,
        Self::OrderCancelled,
        Self::OrderPending,
        Self::Unavailable,
        Self::SaleLost,
        Self::StockMoving,
    ];

    /// The code as answers spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::FieldsDisagree => "fields_disagree",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::SaleNotFound => "sale_not_found",
            Self::OrderNotFound => "order_not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::RequestTimeout => "request_timeout",
            Self::PayloadTooLarge => "payload_too_large",
            Self::RateLimited => "rate_limited",
            Self::SaleExists => "sale_exists",
            Self::SaleConflict => "sale_conflict",
            Self::SoldOut => "sold_out",
            Self::Refused(rule) => rule.code(),
            Self::OrderExpired => "order_expired",
            Self::OrderPaid => "order_paid",
            Self::OrderCancelled => "order_cancelled",
            Self::OrderPending => "order_pending",
            Self::Unavailable => "unavailable",
            Self::SaleLost => "sale_lost",
            Self::StockMoving => "stock_moving",
        }
    }

    /// The code of a purchase refused with `outcome`; `None` for a purchase
    /// made.
    pub fn of(outcome: &Outcome) -> Option<Self> {
        Some(match outcome {
            Outcome::SoldOut => Self::SoldOut,
            Outcome::Refused(rule) => Self::Refused(*rule),
            Outcome::Ok(_) | Outcome::Duplicate(_) => return None,
        })
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An API error: what the client sees.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    /// The HTTP status of the answer.
    pub status: StatusCode,
    /// Stable code for programs, e.g. `sold_out`; listed in `openapi.json`.
    pub code: Code,
    /// Human-readable explanation; its wording may change.
    pub message: String,
    /// With a purchase sent without a request id that may have been made
    /// (unanswered, or not confirmed by a replica): the id it was made
    /// under, to retry with.
    pub request_id: Option<String>,
}

impl ApiError {
    /// The same answer naming the request id a purchase that may have
    /// been made was made under, for a buyer who sent none to retry with.
    fn naming(mut self, request_id: Option<String>) -> Self {
        self.request_id = request_id;
        self
    }

    /// An error with any status and code.
    pub fn new(status: StatusCode, code: Code, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            request_id: None,
        }
    }

    /// 400 `invalid_request`: the request can never succeed as sent.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, Code::InvalidRequest, message)
    }

    /// 401 `unauthorized`: no credential, or one that does not verify.
    pub fn unauthorized(why: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, Code::Unauthorized, why)
    }

    /// 403 `forbidden`: known, but not allowed this.
    pub fn forbidden(why: &str) -> Self {
        Self::new(StatusCode::FORBIDDEN, Code::Forbidden, why)
    }

    /// 503 `unavailable`: Redis or SQL cannot serve now; the client may retry.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, Code::Unavailable, message)
    }

    /// 503 `sale_lost`: SQL holds sale `id` as live but Redis no longer
    /// does (a restart without persistence, a failover to an empty
    /// replica, a flush). Nothing of it is sold or settled until an admin
    /// restores it from SQL.
    pub fn sale_lost(id: &str) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            Code::SaleLost,
            format!(
                "Redis has lost sale `{id}`, which SQL holds as live: nothing of it is sold or \
                 settled until an admin restores it with `seckill audit --sale {id} \
                 --repair-from-sql`"
            ),
        )
    }

    /// 409 with `code`: the request clashes with the current state (a sale
    /// that exists, an order already settled).
    pub fn conflict(code: Code, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = serde_json::json!({ "code": self.code.as_str(), "message": self.message });
        if let Some(id) = self.request_id {
            body["request_id"] = id.into();
        }
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
                Code::SaleNotFound,
                format!("no sale `{id}`"),
            ),
            E::OrderNotFound(id) => Self::new(
                StatusCode::NOT_FOUND,
                Code::OrderNotFound,
                format!("no order `{id}`"),
            ),
            E::SaleExists(id) => {
                Self::conflict(Code::SaleExists, format!("sale `{id}` already exists"))
            }
            E::OrderConflict { order_id, state } => {
                let code = match state {
                    OrderState::Expired => Code::OrderExpired,
                    OrderState::Paid => Code::OrderPaid,
                    OrderState::Cancelled => Code::OrderCancelled,
                    OrderState::PendingPayment => Code::OrderPending,
                };
                Self::conflict(code, format!("order `{order_id}` is {}", state.as_str()))
            }
            E::Invalid { field, reason } => Self::invalid(format!("{field}: {reason}")),
            // Each field keeps the document's rules; only together do they
            // break one it states in words: not 400, which means "the
            // document forbids this".
            E::Inconsistent { .. } => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                Code::FieldsDisagree,
                e.to_string(),
            ),
            E::StateConflict { .. } => Self::conflict(Code::SaleConflict, e.to_string()),
            E::Unsupported { .. } => Self::invalid(e.to_string()),
            E::NotReplicated { ref request_id, .. } => {
                tracing::warn!(error = %e, "purchase not confirmed by a replica");
                Self::unavailable(
                    "the purchase was not confirmed by a replica in time; retry with the same request_id (the one this answer names, if you sent none)",
                )
                .naming(request_id.clone())
            }
            E::Unanswered { ref request_id, .. } => {
                tracing::warn!(error = %e, "purchase unanswered");
                Self::unavailable(
                    "the sale service got no answer from its store; the purchase may have been made: retry with the request_id this answer names",
                )
                .naming(Some(request_id.clone()))
            }
            E::SettlementNotReplicated(_) => {
                tracing::warn!(error = %e, "payment or cancellation not confirmed by a replica");
                Self::unavailable(
                    "the change was made but not confirmed by a replica in time; send it again: done already, it changes nothing",
                )
            }
            E::StockMoving(_) => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                Code::StockMoving,
                format!("{e}; nothing was bought"),
            ),
            // Redis down, slow or failing, a batch whose answer never came,
            // contention: the client should retry (with its request id).
            E::Redis(_) | E::Batch(_) | E::Lock(_) | E::LockLost(_) | E::Contention { .. } => {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_in_the_document_and_every_documented_code_is_one() {
        let doc = crate::openapi::template();
        let listed = &doc["components"]["schemas"]["Error"]["properties"]["code"]["enum"];
        let mut listed: Vec<&str> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        let mut ours: Vec<&str> = Code::all().map(|c| c.as_str()).collect();
        listed.sort_unstable();
        ours.sort_unstable();
        assert_eq!(listed, ours);
    }
}
