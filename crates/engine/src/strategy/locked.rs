//! `lock`: the classic lock around the stock (docs/strategies.md), done right. Take the sale's lock, read
//! the stock and the buyer's count, write stock − 1 and the record, release.
//! Unlike the usual recipe, acquire is atomic, release checks the token, and the
//! write is skipped if the lock was lost meanwhile.

use std::time::Duration;

use seckill_lock::{Lock, Locks};

use super::ctx::Ctx;
use crate::error::{Error, Result};
use crate::order::{Order, Outcome, PurchaseRequest};
use crate::records;

/// Lease of the sale lock: far above one purchase's few round trips.
const LEASE: Duration = Duration::from_secs(5);
/// Longest a purchase queues for the sale lock.
const WAIT: Duration = Duration::from_secs(30);

pub(crate) struct Locked {
    ctx: Ctx,
    lock: Lock,
}

impl Locked {
    pub fn new(ctx: Ctx, locks: &Locks) -> Result<Self> {
        let lock = locks.lock(&ctx.keys.lock_name())?.lease(LEASE);
        Ok(Self { ctx, lock })
    }

    pub async fn purchase(&self, req: &PurchaseRequest) -> Result<Outcome> {
        if let Some(refusal) = self.ctx.broken(None) {
            return Ok(refusal);
        }
        let guard = self.lock.acquire(WAIT).await?;
        let outcome = self.locked(req, &guard).await;
        let released = guard.release().await;
        let outcome = outcome?;
        // A purchase written after the lock was lost is reported, not hidden.
        if outcome.order().is_some() {
            released?;
        }
        Ok(outcome)
    }

    async fn locked(&self, req: &PurchaseRequest, guard: &seckill_lock::Guard) -> Result<Outcome> {
        let keys = &self.ctx.keys;
        let mut conn = self.ctx.conn.clone();
        let (stock, bought): (Option<i64>, Option<u64>) = redis::pipe()
            .get(&keys.stock)
            .hget(&keys.users, &req.user_id)
            .query_async(&mut conn)
            .await?;
        let stock = stock.unwrap_or(0);
        if let Some(refusal) = self.ctx.broken(Some(bought.unwrap_or(0) + 1)) {
            return Ok(refusal);
        }
        if stock < 1 {
            return Ok(Outcome::SoldOut);
        }
        if guard.is_lost() {
            return Err(Error::LockLost(keys.id.clone()));
        }
        let order_id = records::order_id(&keys.id, self.ctx.sale.generation);
        let mut pipe = redis::pipe();
        pipe.set(&keys.stock, stock - 1)
            .ignore()
            .hincr(&keys.users, &req.user_id, 1)
            .ignore();
        records::record(&mut pipe, keys, &order_id, &req.user_id);
        let () = pipe.query_async(&mut conn).await?;
        Ok(Outcome::Ok(Order {
            order_id,
            quantity: 1,
        }))
    }
}
