//! `coalesced`: concurrent purchases in this process ride one script call.
//!
//! Callers queue their request; a worker takes whatever is queued (up to
//! `max_batch`, waiting at most `max_wait` for more) and sends it as one
//! `purchase_batch.lua` call, which answers each purchase exactly as the
//! single-purchase script would. Up to `max_in_flight` batches are on the wire
//! at once, so batching never leaves the connection idle. A batch shares one
//! read of the sale and one stock write, which is where the speed comes from.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, oneshot};

use super::ctx::Ctx;
use crate::codec::purchase::{Answer, PurchaseArgs};
use crate::error::{Error, Result};
use crate::order::{Outcome, PurchaseRequest};
use crate::scripts::LIBRARY;

/// Largest batch: the script unpacks up to four values per purchase into
/// one command, and Redis's Lua `unpack` stops at about 8,000 values.
pub const MAX_BATCH: usize = 1_000;

/// Batching bounds of a coalesced purchaser.
#[derive(Clone, Copy, Debug)]
pub struct CoalescerConfig {
    /// Most purchases in one script call (at most 1,000, what the batch
    /// script can unpack).
    pub max_batch: usize,
    /// Longest the first purchase of a batch waits for company. Zero: send
    /// what is queued at once (batches still form while others are in flight).
    pub max_wait: Duration,
    /// Batches on the wire at once.
    pub max_in_flight: usize,
}

impl Default for CoalescerConfig {
    fn default() -> Self {
        Self {
            max_batch: 256,
            max_wait: Duration::ZERO,
            max_in_flight: 4,
        }
    }
}

type Job = (PurchaseRequest, oneshot::Sender<Result<Outcome>>);

pub(crate) struct Coalescer {
    tx: mpsc::Sender<Job>,
}

impl Coalescer {
    pub fn start(ctx: Ctx, config: CoalescerConfig) -> Self {
        let config = CoalescerConfig {
            max_batch: config.max_batch.clamp(1, MAX_BATCH),
            max_in_flight: config.max_in_flight.max(1),
            ..config
        };
        let (tx, rx) = mpsc::channel(config.max_batch * config.max_in_flight * 4);
        tokio::spawn(gather(ctx, config, rx));
        Self { tx }
    }

    /// Queues `req` for the next batch. A purchase waits for its batch
    /// no longer than one Redis call may take: queued behind batches that
    /// hang on a frozen master, it answers an error then (and is dropped
    /// from the queue unsent), so no buyer waits for two timeouts in a row.
    pub async fn purchase(&self, req: &PurchaseRequest) -> Result<Outcome> {
        let (reply, answer) = oneshot::channel();
        let queued = async {
            self.tx
                .send((req.clone(), reply))
                .await
                .map_err(|_| Error::Closed)?;
            answer.await.map_err(|_| Error::Closed)?
        };
        match tokio::time::timeout(seckill_redis::RESPONSE_TIMEOUT, queued).await {
            Ok(answer) => answer,
            Err(_) => Err(Error::Batch(format!(
                "no answer within {:?}",
                seckill_redis::RESPONSE_TIMEOUT
            ))),
        }
    }
}

/// Ends when every `Coalescer` handle is dropped and the queue is drained.
async fn gather(ctx: Ctx, config: CoalescerConfig, mut rx: mpsc::Receiver<Job>) {
    let slots = Arc::new(Semaphore::new(config.max_in_flight));
    let args = Arc::new(PurchaseArgs::new(&ctx.sale));
    while let Some(first) = rx.recv().await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut batch = vec![first];
        // Everything that queued while we waited for a slot joins this batch.
        while batch.len() < config.max_batch {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        if batch.len() < config.max_batch && !config.max_wait.is_zero() {
            let deadline = tokio::time::Instant::now() + config.max_wait;
            while batch.len() < config.max_batch {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(job)) => batch.push(job),
                    _ => break,
                }
            }
        }
        // Purchases whose buyer stopped waiting are not sent at all.
        batch.retain(|(_, reply)| !reply.is_closed());
        if batch.is_empty() {
            continue;
        }
        let (ctx, args) = (ctx.clone(), args.clone());
        tokio::spawn(async move {
            send(&ctx, &args, batch).await;
            drop(slot);
        });
    }
}

async fn send(ctx: &Ctx, args: &PurchaseArgs, batch: Vec<Job>) {
    let mut call = LIBRARY.call("purchase_batch", &ctx.keys.purchase());
    args.write(&mut call, batch.iter().map(|(req, _)| req));
    let answers: redis::RedisResult<Vec<redis::Value>> = call.invoke(&mut ctx.conn.clone()).await;
    let failure = match answers {
        Ok(answers) if answers.len() == batch.len() + 1 => {
            let text = |v: &redis::Value| redis::from_redis_value_ref::<String>(v).ok();
            let entry = text(&answers[0]).unwrap_or_default();
            for ((req, reply), answer) in batch.into_iter().zip(&answers[1..]) {
                let result = Answer::read(answer, &entry)
                    .and_then(|a| a.outcome(&ctx.keys.id, ctx.sale.generation, &req));
                let _ = reply.send(result);
            }
            return;
        }
        Ok(answers) => format!(
            "{} answers for {} purchases",
            answers.len().saturating_sub(1),
            batch.len()
        ),
        Err(e) => e.to_string(),
    };
    for (_, reply) in batch {
        let _ = reply.send(Err(Error::Batch(failure.clone())));
    }
}
