//! What every request handler shares.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use seckill_engine::{Engine, Outcome, PurchaseRequest, Purchaser, Rule, Strategy};
use seckill_orders::Store;

use crate::activity::Activity;
use crate::auth::Checker;
use crate::error::{ApiError, Code};
use crate::limiter::{Limiter, UserLimiter};
use crate::locks::{read, write};

/// How long this instance trusts "sold out" without asking Redis again, in
/// case a restock announcement was missed.
const SOLD_OUT_TTL: Duration = Duration::from_secs(1);

pub struct AppState {
    pub engine: Engine,
    pub store: Store,
    /// Who may call what.
    pub auth: Checker,
    /// `GET /openapi.json`, as the auth settings make it.
    pub openapi: bytes::Bytes,
    /// Purchases per user.
    limiter: UserLimiter,
    /// Purchases per client address.
    ip_limiter: Limiter<IpAddr>,
    /// One coalescing purchaser per sale.
    purchasers: RwLock<HashMap<String, Purchaser>>,
    /// Sales this instance saw sell out, and when.
    sold_out: RwLock<HashMap<String, Instant>>,
    /// For the stream backlog gauge.
    pub redis: seckill_redis::Conn,
    /// How long a request body may take once its header is in: the
    /// connections' header timeout.
    pub body_deadline: Duration,
    /// This instance's purchases per sale and second, for the dashboard.
    pub activity: Activity,
    /// Sales Redis lost while SQL holds them live, for the dashboard.
    pub lost: seckill_orders::LostSales,
    /// Sales whose purchases wait for a replica (`--durability replica`).
    pub waiting: crate::waiting::Waiting,
    /// Turns true when the service stops: long-lived answers (the
    /// dashboard's stream) end then.
    pub stopped: tokio::sync::watch::Receiver<bool>,
}

impl AppState {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        engine: Engine,
        store: Store,
        auth: Checker,
        limiter: UserLimiter,
        ip_limiter: Limiter<IpAddr>,
        redis: seckill_redis::Conn,
        body_deadline: Duration,
        stopped: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        let openapi = serde_json::to_vec(&crate::openapi::document(&auth.config))
            .expect("a JSON value serializes")
            .into();
        Self {
            engine,
            store,
            openapi,
            auth,
            limiter,
            ip_limiter,
            body_deadline,
            activity: Activity::default(),
            lost: Default::default(),
            waiting: Default::default(),
            stopped,
            purchasers: RwLock::default(),
            sold_out: RwLock::default(),
            redis,
        }
    }

    /// Buys for `req` (already validated) in sale `id`: the per-address and per-user rates,
    /// the sale's limit, this instance's memory of a sell-out, then Redis.
    pub async fn purchase(
        &self,
        id: &str,
        req: &PurchaseRequest,
        ip: Option<IpAddr>,
    ) -> Result<Outcome, ApiError> {
        if ip.is_some_and(|ip| !self.ip_limiter.allow(&ip)) {
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                Code::RateLimited,
                "too many requests from this address; slow down",
            ));
        }
        if !self.limiter.allow(&req.user_id).await {
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                Code::RateLimited,
                "too many requests from this user; slow down",
            ));
        }
        let purchaser = self.purchaser(id).await?;
        if let Some(limit) = purchaser.per_user_limit()
            && u64::from(req.quantity) > limit
        {
            return Err(ApiError::conflict(
                Code::Refused(Rule::PerUserLimit),
                format!(
                    "quantity: {} is above the per-user limit of {limit}",
                    req.quantity
                ),
            ));
        }
        // Sold out here already: answer without Redis. Requests carrying a
        // request id still go through, so a retry gets its original order.
        if req.request_id.is_none() && self.is_sold_out(id) {
            return Ok(Outcome::SoldOut);
        }
        let outcome = match purchaser.purchase(req).await {
            Err(seckill_engine::Error::SaleNotFound(_)) => {
                self.forget(id);
                return Err(seckill_engine::Error::SaleNotFound(id.to_owned()).into());
            }
            Err(e @ seckill_engine::Error::NotReplicated { .. }) => {
                self.waiting.unconfirmed(id);
                return Err(e.into());
            }
            other => other?,
        };
        if outcome.order().is_some() {
            self.waiting.confirmed(id);
        }
        metrics::counter!("seckill_purchase_outcomes_total", "outcome" => outcome.code())
            .increment(1);
        // Only a one-unit refusal proves nothing is left.
        if matches!(outcome, Outcome::SoldOut) && req.quantity == 1 {
            self.mark_sold_out(id);
        }
        Ok(outcome)
    }

    /// The purchaser of sale `id`, made on first use.
    async fn purchaser(&self, id: &str) -> Result<Purchaser, ApiError> {
        if let Some(p) = read(&self.purchasers).get(id) {
            return Ok(p.clone());
        }
        let purchaser = self.engine.purchaser(Strategy::Coalesced, id).await?;
        self.activity.track(id);
        let mut all = write(&self.purchasers);
        Ok(all.entry(id.to_owned()).or_insert(purchaser).clone())
    }

    /// Forgets a sale that no longer exists (or was recreated).
    pub fn forget(&self, id: &str) {
        write(&self.purchasers).remove(id);
        write(&self.sold_out).remove(id);
        self.activity.forget(id);
    }

    fn is_sold_out(&self, id: &str) -> bool {
        read(&self.sold_out)
            .get(id)
            .is_some_and(|at| at.elapsed() < SOLD_OUT_TTL)
    }

    fn mark_sold_out(&self, id: &str) {
        write(&self.sold_out).insert(id.to_owned(), Instant::now());
    }

    /// Stock came back (cancel, expiry; a drained sharded sale announces
    /// its own id): ask Redis again.
    pub fn restocked(&self, id: &str) {
        write(&self.sold_out).remove(id);
    }
}
