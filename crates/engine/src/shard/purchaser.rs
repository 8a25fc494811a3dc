//! Buying in a sharded sale: on the buyer's home shard, with the ordinary
//! purchaser of that shard; an empty shard is waited out while the sale is
//! not drained.

use std::sync::Arc;
use std::time::{Duration, Instant};

use seckill_redis::Conn;

use super::refiller::Signals;
use super::{Layout, REFILL_WAIT, home_shard};
use crate::error::{Error, Result};
use crate::order::{Outcome, PurchaseRequest};
use crate::scripts::LIBRARY;
use crate::strategy::One;

/// First pause of a buyer waiting for its shard's refill, cut short by
/// the end of a round of this process's refiller; it doubles.
const FIRST_PAUSE: Duration = Duration::from_millis(5);
/// Longest pause between two tries.
const MAX_PAUSE: Duration = Duration::from_millis(100);
/// How long this purchaser trusts that the sale is drained: an empty shard
/// answers "sold out" without asking the sale again. A unit coming back
/// (a cancel, an expiry) reaches this process's buyers of other shards
/// within it, as the service's own memory of a sell-out does.
pub(crate) const DRAINED_TTL: Duration = Duration::from_millis(100);

pub(crate) struct Sharded {
    conn: Conn,
    layout: Layout,
    shards: Vec<One>,
    /// To and from this process's refiller.
    signals: Arc<Signals>,
    /// This process's refiller candidate, stopped with the purchaser.
    refiller: tokio::task::AbortHandle,
    /// When the sale last answered that it is drained.
    drained_at: std::sync::Mutex<Option<Instant>>,
}

impl Drop for Sharded {
    fn drop(&mut self) {
        self.refiller.abort();
    }
}

impl Sharded {
    pub fn new(
        conn: Conn,
        layout: Layout,
        shards: Vec<One>,
        signals: Arc<Signals>,
        refiller: tokio::task::AbortHandle,
    ) -> Self {
        Self {
            conn,
            layout,
            shards,
            signals,
            refiller,
            drained_at: std::sync::Mutex::new(None),
        }
    }

    /// Answers the outcome and the tries it took.
    pub async fn purchase(&self, req: &PurchaseRequest) -> Result<(Outcome, u64)> {
        let home = home_shard(&req.user_id, self.shards.len());
        let started = Instant::now();
        let mut pause = FIRST_PAUSE;
        let mut tries = 0;
        loop {
            tries += 1;
            let outcome = match self.shards[home].purchase(req).await {
                Err(Error::SaleNotFound(_)) => return Err(self.gone()),
                other => other?.0,
            };
            if outcome != Outcome::SoldOut || self.drained_lately() {
                return Ok((outcome, tries));
            }
            let answer: String = LIBRARY
                .call("shard_want", &[&self.layout.sale.sale])
                .arg(self.layout.generation)
                .arg(home)
                .invoke(&mut self.conn.clone())
                .await?;
            match answer.as_str() {
                "drained" => {
                    *self.drained_at.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(Instant::now());
                    return Ok((Outcome::SoldOut, tries));
                }
                "no_sale" => return Err(self.gone()),
                _ => {}
            }
            if started.elapsed() + pause > REFILL_WAIT {
                return Err(Error::StockMoving(self.layout.sale.id.clone()));
            }
            let round = self.signals.rounds.notified();
            tokio::pin!(round);
            round.as_mut().enable();
            self.signals.wake.notify_one();
            let _ = tokio::time::timeout(pause, round).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }

    fn drained_lately(&self) -> bool {
        self.drained_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|at| at.elapsed() < DRAINED_TTL)
    }

    fn gone(&self) -> Error {
        Error::SaleNotFound(self.layout.sale.id.clone())
    }
}
