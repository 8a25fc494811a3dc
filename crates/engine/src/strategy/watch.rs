//! `watch`: optimistic transaction (docs/strategies.md). `WATCH` the stock and the
//! buyers, read, then `MULTI`/`EXEC` the write; `EXEC` fails if anyone wrote
//! them meanwhile, and the purchase starts over. `WATCH` state belongs to a
//! connection, so each attempt runs on a connection no other task uses
//! meanwhile, checked out of a small pool.

use std::sync::Mutex;

use redis::aio::MultiplexedConnection;

use super::ctx::Ctx;
use crate::error::{Error, Result};
use crate::order::{Order, Outcome, PurchaseRequest};
use crate::records;

/// Attempts before a purchase gives up under contention.
const MAX_ATTEMPTS: u64 = 10_000;

pub(crate) struct Watch {
    ctx: Ctx,
    client: redis::Client,
    idle: Mutex<Vec<MultiplexedConnection>>,
}

impl Watch {
    pub fn new(ctx: Ctx, client: redis::Client) -> Self {
        Self {
            ctx,
            client,
            idle: Mutex::default(),
        }
    }

    /// Answers the outcome and the attempts it took.
    pub async fn purchase(&self, req: &PurchaseRequest) -> Result<(Outcome, u64)> {
        if let Some(refusal) = self.ctx.broken(None) {
            return Ok((refusal, 1));
        }
        let pooled = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut conn = match pooled {
            Some(conn) => conn,
            None => self.client.get_multiplexed_async_connection().await?,
        };
        // On an error the connection's WATCH state is unknown: it is dropped.
        let answer = self.attempts(&mut conn, req).await?;
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(conn);
        Ok(answer)
    }

    async fn attempts(
        &self,
        conn: &mut MultiplexedConnection,
        req: &PurchaseRequest,
    ) -> Result<(Outcome, u64)> {
        let keys = &self.ctx.keys;
        for attempt in 1..=MAX_ATTEMPTS {
            let () = redis::cmd("WATCH")
                .arg(&keys.stock)
                .arg(&keys.users)
                .query_async(conn)
                .await?;
            let (stock, bought): (Option<i64>, Option<u64>) = redis::pipe()
                .get(&keys.stock)
                .hget(&keys.users, &req.user_id)
                .query_async(conn)
                .await?;
            let refusal = if let Some(refusal) = self.ctx.broken(Some(bought.unwrap_or(0) + 1)) {
                Some(refusal)
            } else if stock.unwrap_or(0) < 1 {
                Some(Outcome::SoldOut)
            } else {
                None
            };
            if let Some(refusal) = refusal {
                let () = redis::cmd("UNWATCH").query_async(conn).await?;
                return Ok((refusal, attempt));
            }
            let order_id = records::order_id(&keys.id, self.ctx.sale.generation);
            let mut pipe = redis::pipe();
            pipe.atomic()
                .decr(&keys.stock, 1)
                .ignore()
                .hincr(&keys.users, &req.user_id, 1)
                .ignore();
            records::record(&mut pipe, keys, &order_id, &req.user_id);
            let committed: Option<()> = pipe.query_async(conn).await?;
            if committed.is_some() {
                let order = Order {
                    order_id,
                    quantity: 1,
                };
                return Ok((Outcome::Ok(order), attempt));
            }
        }
        Err(Error::Contention {
            attempts: MAX_ATTEMPTS,
        })
    }
}
