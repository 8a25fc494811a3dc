//! `coalesced`: concurrent purchases in this process ride one script call.
//!
//! Callers queue their request on a [`seckill_redis::Coalescer`]; each batch
//! is one `purchase_batch.lua` call, which answers each purchase exactly as
//! the single-purchase script would. A batch shares one read of the sale
//! and one stock write, which is where the speed comes from.

use std::sync::Arc;

use super::ctx::Ctx;
use crate::codec::purchase::{Answer, PurchaseArgs};
use crate::error::{Error, Result};
use crate::order::{Outcome, PurchaseRequest};
use crate::scripts::LIBRARY;

pub use seckill_redis::CoalescerConfig;

/// Largest batch: the script unpacks up to four values per purchase into
/// one command, and Redis's Lua `unpack` stops at about 8,000 values.
pub const MAX_BATCH: usize = 1_000;

pub(crate) struct Coalescer {
    inner: seckill_redis::Coalescer<PurchaseRequest, Result<Outcome>>,
}

impl Coalescer {
    pub fn start(ctx: Ctx, config: CoalescerConfig) -> Self {
        let args = Arc::new(PurchaseArgs::new(&ctx.sale));
        let inner = seckill_redis::Coalescer::start(config, MAX_BATCH, move |batch| {
            let (ctx, args) = (ctx.clone(), args.clone());
            async move { send(&ctx, &args, batch).await }
        });
        Self { inner }
    }

    /// Queues `req` for the next batch (see [`seckill_redis::Coalescer::ask`]
    /// for how long it may wait).
    pub async fn purchase(&self, req: &PurchaseRequest) -> Result<Outcome> {
        self.inner.ask(req.clone()).await.unwrap_or_else(|| {
            Err(Error::Batch(format!(
                "no answer within {:?}, or the engine is shutting down",
                seckill_redis::RESPONSE_TIMEOUT
            )))
        })
    }
}

async fn send(ctx: &Ctx, args: &PurchaseArgs, batch: Vec<PurchaseRequest>) -> Vec<Result<Outcome>> {
    let mut call = LIBRARY.call("purchase_batch", &ctx.keys.purchase());
    args.write(&mut call, batch.iter());
    let answers: redis::RedisResult<Vec<redis::Value>> = call.invoke(&mut ctx.conn.clone()).await;
    let failure = match answers {
        Ok(answers) if answers.len() == batch.len() + 1 => {
            let text = |v: &redis::Value| redis::from_redis_value_ref::<String>(v).ok();
            let entry = text(&answers[0]).unwrap_or_default();
            return batch
                .iter()
                .zip(&answers[1..])
                .map(|(req, answer)| {
                    Answer::read(answer, &entry)
                        .and_then(|a| a.outcome(&ctx.keys.id, ctx.sale.generation, req))
                })
                .collect();
        }
        Ok(answers) => format!(
            "{} answers for {} purchases",
            answers.len().saturating_sub(1),
            batch.len()
        ),
        Err(e) => e.to_string(),
    };
    batch
        .iter()
        .map(|_| Err(Error::Batch(failure.clone())))
        .collect()
}
