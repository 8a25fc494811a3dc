//! Buying in a sharded sale: on the buyer's home shard, with the ordinary
//! purchaser of that shard; an empty shard is waited out while the sale is
//! not drained. One unit per purchase: a shard with any unit left can sell
//! it, so a buyer never waits for units that sit one by one on other
//! shards, and "sold out" (no unit anywhere) is exact.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use seckill_lock::Locks;
use seckill_redis::Conn;

use super::layout::{Layout, REFILL_WAIT, home_shard};
use super::refiller::{self, Signals};
use crate::error::{Error, Result};
use crate::order::{Outcome, PurchaseRequest};
use crate::scripts::LIBRARY;
use crate::strategy::One;

/// First pause of a buyer waiting for its shard's refill, cut short by
/// the end of a round of this process's refiller; it doubles.
const FIRST_PAUSE: Duration = Duration::from_millis(5);
/// Longest pause between two tries.
const MAX_PAUSE: Duration = Duration::from_millis(100);

pub(crate) struct Sharded {
    conn: Conn,
    layout: Layout,
    shards: Vec<One>,
    /// To and from this process's refiller.
    signals: Arc<Signals>,
    locks: Locks,
    /// This process's refiller candidate, stopped with the purchaser.
    refiller: Mutex<tokio::task::AbortHandle>,
}

impl Drop for Sharded {
    fn drop(&mut self) {
        self.refiller().abort();
    }
}

impl Sharded {
    /// The purchaser, with this process's refiller candidate started.
    pub fn new(conn: Conn, locks: Locks, layout: Layout, shards: Vec<One>) -> Self {
        let signals = Arc::new(Signals::default());
        let refiller = Mutex::new(Self::spawn_refiller(&conn, &locks, &layout, &signals));
        Self {
            conn,
            layout,
            shards,
            signals,
            locks,
            refiller,
        }
    }

    fn spawn_refiller(
        conn: &Conn,
        locks: &Locks,
        layout: &Layout,
        signals: &Arc<Signals>,
    ) -> tokio::task::AbortHandle {
        tokio::spawn(refiller::run(
            conn.clone(),
            locks.clone(),
            layout.clone(),
            signals.clone(),
        ))
        .abort_handle()
    }

    fn refiller(&self) -> std::sync::MutexGuard<'_, tokio::task::AbortHandle> {
        self.refiller.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts the refiller candidate again if it stopped: it stops when it
    /// finds a part of the sale gone, and the sale may be back (restored
    /// from SQL) while this purchaser lives.
    fn keep_refiller(&self) {
        let mut refiller = self.refiller();
        if refiller.is_finished() {
            *refiller = Self::spawn_refiller(&self.conn, &self.locks, &self.layout, &self.signals);
        }
    }

    /// Answers the outcome and the tries it took.
    pub async fn purchase(&self, req: &PurchaseRequest) -> Result<(Outcome, u64)> {
        if req.quantity != 1 {
            return Err(Error::StateConflict {
                field: "quantity",
                reason: "a sharded sale sells one unit per purchase".to_owned(),
            });
        }
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
            // "Sold out" from the shard: asked of the sale, which knows
            // whether units are anywhere else (never remembered here, so a
            // unit given back is seen at once).
            if outcome != Outcome::SoldOut {
                return Ok((outcome, tries));
            }
            let answer: String = LIBRARY
                .call("shard_want", &[&self.layout.sale.sale])
                .arg(self.layout.generation)
                .arg(home)
                .invoke(&mut self.conn.clone())
                .await?;
            match answer.as_str() {
                "drained" => return Ok((Outcome::SoldOut, tries)),
                "no_sale" => return Err(self.gone()),
                _ => {}
            }
            if started.elapsed() + pause > REFILL_WAIT {
                return Err(Error::StockMoving(self.layout.sale.id.clone()));
            }
            self.keep_refiller();
            let round = self.signals.rounds.notified();
            tokio::pin!(round);
            round.as_mut().enable();
            self.signals.wake.notify_one();
            let _ = tokio::time::timeout(pause, round).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }

    fn gone(&self) -> Error {
        Error::SaleNotFound(self.layout.sale.id.clone())
    }
}
