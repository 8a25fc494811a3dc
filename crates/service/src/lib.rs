//! `seckill serve`: the flash sale over HTTP (axum), with the order
//! persister and expiry sweeper running beside it.
//!
//! Modules:
//! - `server`: [`start`] and [`Config`]; the router, background tasks,
//!   graceful shutdown, the restock listener behind the sold-out fast path.
//! - `routes`: the route table and its handlers.
//! - `openapi`: the API's document (`src/openapi.json`) as this service's
//!   settings make it; tests hold it to the route table and body types.
//! - `auth`: who is calling (admin, payment side, buyer by JWT or trusted
//!   header), signed payment webhooks, the client's address.
//! - `secret`: [`Secret`], a credential never printed, compared in
//!   constant time.
//! - `state`: what handlers share: engine, store, purchasers, sold-out marks.
//! - `extract`: body and query extractors whose every rejection is a 4xx
//!   in plain words.
//! - `fields`: body fields read as JSON Schema says (`2.0` is whole;
//!   a sent optional field is never null).
//! - `time`: times in (RFC 3339 or ms) and out (RFC 3339).
//! - `rules`: a sale's purchase rules in the API, read, written and
//!   documented from the engine's list of them.
//! - `limiter`: the per-user and per-address rate limits.
//! - `locks`: poison-tolerant lock guards.
//! - `waiting`: sales whose purchases wait for a replica (`/readyz`, a gauge).
//! - `redis_settings`: the warnings at start about a Redis that does not
//!   answer, or can lose acknowledged orders (no AOF and no replica, or
//!   eviction).
//! - `listener`: accepting connections: the cap, header and idle timeouts.
//! - `metrics`: Prometheus metrics.
//! - `activity`: this instance's purchases per sale and second (answers by
//!   code, latency), kept for the last minutes.
//! - `dashboard`: `GET /dashboard`, a page embedded in the binary, fed by
//!   `GET /v1/dashboard/stream` (admin only, a frame a second).
//! - `client`: [`client::Http`], a JSON client of this API (load, demo, tests).
//! - `error`: [`ApiError`] (what clients see) and [`Error`] (start-up).
//!
//! ```no_run
//! # async fn run() -> Result<(), seckill_service::Error> {
//! let config = seckill_service::Config {
//!     listen: "127.0.0.1:8080".parse().unwrap(),
//!     redis: seckill_redis::Target::server("redis://127.0.0.1:6379/"),
//!     database_url: "seckill.db".into(),
//!     admin_token: "admin-secret".into(),
//!     auth: seckill_service::Auth::new(seckill_service::Buyers::Jwt(seckill_service::Jwt::new(
//!         seckill_service::JwtKeys::Secret("a 32-byte-or-longer HS256 secret".into()),
//!     ))),
//!     rate_per_user: 50.0,
//!     burst_per_user: 100.0,
//!     rate_limit: seckill_service::RateScope::Shared,
//!     rate_per_ip: 200.0,
//!     burst_per_ip: 400.0,
//!     background: true,
//!     limits: Default::default(),
//!     archive_after: std::time::Duration::from_secs(3600),
//!     restore_lost_sales: false,
//!     durability: Default::default(),
//! };
//! let running = seckill_service::start(config).await?;
//! println!("listening on http://{}", running.addr);
//! running.stop().await;
//! # Ok(()) }
//! ```

#![warn(missing_docs, missing_debug_implementations)]

mod activity;
mod auth;
pub mod client;
mod dashboard;
mod error;
mod extract;
mod fields;
mod limiter;
mod listener;
mod locks;
mod metrics;
mod openapi;
mod redis_settings;
mod routes;
mod rules;
mod secret;
mod server;
mod state;
mod time;
mod waiting;

pub use auth::{Auth, Buyers, Jwt, JwtKeys, webhook};
/// The name of a header (`Buyers::TrustedHeader`).
pub use axum::http::HeaderName;
pub use error::{ApiError, Code, Error};
pub use limiter::RateScope;
pub use listener::Limits;
pub use secret::Secret;
pub use server::{BODY_LIMIT, Config, Running, start};
