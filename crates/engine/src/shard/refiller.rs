//! The refiller of a sharded sale: keeps each shard stocked for the buyers
//! it has, from the pool while the pool lasts, then by giving units back
//! from the shard with most left to shards whose buyers found them empty.
//!
//! Every process selling a sharded sale runs a candidate; the one holding
//! the sale's refill lock acts, the others wait in the lock's queue and
//! take over (with a higher fence) when its lease lapses, a few seconds
//! after it died. It acts in rounds: every `INTERVAL`, or at once when a
//! buyer of this process finds its shard empty.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use seckill_lock::{Guard, Locks};
use seckill_redis::Conn;
use tokio::sync::Notify;

use super::books::{SaleState, ShardState};
use super::layout::Layout;
use super::transfer::Mover;
use crate::codec::ledger::Source;
use crate::error::{Error, Result};

/// Lease of the refill lock: how long a sale goes without a refiller
/// after the acting one dies. Renewed every third of it while it lives.
pub(crate) const LEASE: Duration = Duration::from_secs(3);
/// Time between rounds when no buyer asks for one.
const INTERVAL: Duration = Duration::from_millis(50);
/// Least time between rounds, however many buyers ask.
const MIN_GAP: Duration = Duration::from_millis(5);
/// Seconds of sales, at a shard's recent rate, it is stocked for.
const HORIZON_SECS: f64 = 0.25;

/// The name of sale `id`'s refill lock.
pub(crate) fn lock_name(id: &str) -> String {
    format!("refill:{id}")
}

/// How a sale's buyers and its refiller in one process signal each other.
#[derive(Debug, Default)]
pub(crate) struct Signals {
    /// A buyer found its shard empty: act now.
    pub wake: Notify,
    /// A round ended: buyers waiting for units try again.
    pub rounds: Notify,
}

/// Runs a refiller candidate for `layout` until the sale is gone or ended.
pub(crate) async fn run(conn: Conn, locks: Locks, layout: Layout, signals: Arc<Signals>) {
    let lock = match locks.lock(&lock_name(&layout.sale.id)) {
        Ok(lock) => lock.lease(LEASE).watchdog(true),
        Err(e) => {
            tracing::error!(sale = %layout.sale.id, error = %e, "no refill lock");
            return;
        }
    };
    loop {
        let guard = match lock.acquire(Duration::from_secs(10)).await {
            Ok(guard) => guard,
            Err(seckill_lock::Error::Timeout { .. }) => continue,
            Err(e) => {
                tracing::warn!(sale = %layout.sale.id, error = %e, "refill lock unavailable");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        tracing::info!(sale = %layout.sale.id, fence = guard.fence(), "refilling");
        let mut refiller = Refiller::new(&layout);
        let gone = refiller.lead(&conn, &guard, &signals).await;
        if let Err(e) = guard.release().await {
            tracing::debug!(sale = %layout.sale.id, error = %e, "refill lock already lost");
        }
        if gone {
            return;
        }
    }
}

/// What one refiller remembers between rounds.
pub(crate) struct Refiller<'a> {
    layout: &'a Layout,
    /// Per shard: units sold when last seen, and when.
    last: Vec<Option<(u64, Instant)>>,
    /// Per shard: units sold per second, smoothed.
    rate: Vec<f64>,
    /// Per shard: how many times its usual target it is stocked for,
    /// doubled each round its buyers find it empty, halved each round
    /// they do not (the rate lags a sudden rush by a round or two).
    boost: Vec<u64>,
    /// Per shard: its count of buyers who found it empty, when last seen;
    /// `None` before the first round (earlier refillers answered those).
    seen_wants: Option<HashMap<usize, u64>>,
}

impl<'a> Refiller<'a> {
    pub fn new(layout: &'a Layout) -> Self {
        let n = layout.shards.len();
        Self {
            layout,
            last: vec![None; n],
            rate: vec![0.0; n],
            boost: vec![1; n],
            seen_wants: None,
        }
    }

    /// Acts while `guard` holds; `true` once the sale is gone or ended.
    async fn lead(&mut self, conn: &Conn, guard: &Guard, signals: &Signals) -> bool {
        let mover = Mover {
            conn: conn.clone(),
            layout: self.layout,
            fence: guard.fence(),
        };
        loop {
            if guard.is_lost() {
                return false;
            }
            let round = self.round(&mover).await;
            signals.rounds.notify_waiters();
            match round {
                Ok(true) => {}
                Ok(false) | Err(Error::SaleNotFound(_)) => return true,
                Err(Error::LockLost(_)) => return false,
                Err(e) => {
                    tracing::warn!(sale = %self.layout.sale.id, error = %e, "refill round failed");
                }
            }
            tokio::time::sleep(MIN_GAP).await;
            tokio::select! {
                () = tokio::time::sleep(INTERVAL) => {}
                () = signals.wake.notified() => {}
            }
        }
    }

    /// One round: finish an open transfer, refill shards running low from
    /// the pool, give back to shards whose buyers want units, and record
    /// whether the sale is drained. `false` if the sale is gone.
    pub async fn round(&mut self, mover: &Mover<'_>) -> Result<bool> {
        let Some((sale, shards)) = self.read(mover).await? else {
            return Ok(false);
        };
        let wanted = self.demand(&sale);
        self.measure(&shards);
        let mut left: Vec<u64> = shards.iter().map(|s| s.left).collect();
        let n = left.len();
        let target = self.targets(&wanted, sale.stock, n);
        let pool = from_pool(mover, &target, &wanted, &mut left, sale.pool).await?;
        if pool == 0 {
            self.give_back(mover, &target, &wanted, &mut left).await?;
        }

        let drained = pool == 0 && left.iter().all(|&l| l == 0);
        if drained != sale.drained {
            mover.mark_drained(drained, sale.returns).await?;
        }
        Ok(true)
    }

    /// The sale and its shards as a round starts, after finishing the
    /// transfer an earlier refiller left open; `None` if the sale is gone.
    async fn read(&self, mover: &Mover<'_>) -> Result<Option<(SaleState, Vec<ShardState>)>> {
        let layout = self.layout;
        let mut conn = mover.conn.clone();
        let Some(mut sale) = SaleState::read(&mut conn, layout).await? else {
            return Ok(None);
        };
        // Gone, or ended: no purchase can take a unit any more.
        let ended = sale.end_ms != 0 && crate::sale::now_ms() >= sale.end_ms;
        if sale.generation != layout.generation || ended {
            return Ok(None);
        }
        if let Some(open) = &sale.open {
            mover.finish(open).await?;
            match SaleState::read(&mut conn, layout).await? {
                Some(again) => sale = again,
                None => return Ok(None),
            }
        }
        let Some(shards) = ShardState::read_all(&conn, layout)
            .await?
            .into_iter()
            .collect::<Option<Vec<_>>>()
        else {
            return Ok(None);
        };
        Ok(Some((sale, shards)))
    }

    /// Per shard of `n`: the units it is stocked up to this round, after
    /// doubling or halving its boost by whether its buyers found it empty.
    /// At first half the stock goes out evenly.
    fn targets(&mut self, wanted: &[bool], stock: u64, n: usize) -> Vec<u64> {
        for (boost, &wanted) in self.boost.iter_mut().zip(wanted) {
            *boost = if wanted {
                (*boost * 2).min(64)
            } else {
                (*boost / 2).max(1)
            };
        }
        let floor = (stock / (2 * n as u64)).max(1);
        (0..n)
            .map(|k| floor.max((self.rate[k] * HORIZON_SECS) as u64) * self.boost[k])
            .collect()
    }

    /// Give-back: the pool is empty, so units come from other shards,
    /// richest first: what each can spare beyond a quarter-second of its
    /// own sales, to shards whose buyers found them empty or that run
    /// low while another holds more than twice as many; and to waiting
    /// buyers, half the difference if no shard can spare more.
    async fn give_back(
        &self,
        mover: &Mover<'_>,
        target: &[u64],
        wanted: &[bool],
        left: &mut [u64],
    ) -> Result<()> {
        let n = left.len();
        // A shard given units this round gives none back in it, so a
        // unit never goes back and forth between two wanted shards.
        let mut given = vec![false; n];
        for k in 0..n {
            let low = left[k] <= target[k] / 4;
            if !wanted[k] && !low {
                continue;
            }
            let mut need = target[k].saturating_sub(left[k]).max(1);
            let mut donors: Vec<usize> = (0..n).filter(|&j| j != k && !given[j]).collect();
            donors.sort_by_key(|&j| std::cmp::Reverse(left[j]));
            for j in donors {
                if need == 0 || left[j] <= left[k] {
                    break;
                }
                if !wanted[k] && left[j] < 2 * left[k] + 2 {
                    break;
                }
                let keep = (self.rate[j] * HORIZON_SECS) as u64;
                let mut units = left[j].saturating_sub(keep).min(need);
                if !wanted[k] {
                    // Ahead of demand: never more than evens them out,
                    // so idle shards do not pass units back and forth.
                    units = units.min((left[j] - left[k]) / 2);
                } else if units == 0 {
                    units = (left[j] - left[k]).div_ceil(2);
                }
                if units == 0 {
                    continue;
                }
                let moved = mover.transfer(Source::Shard(j), k, units).await?;
                left[j] -= moved.min(left[j]);
                left[k] += moved;
                given[k] |= moved > 0;
                need = need.saturating_sub(moved);
            }
        }
        Ok(())
    }

    /// Which shards had a buyer find them empty since the last round.
    fn demand(&mut self, sale: &SaleState) -> Vec<bool> {
        let mut wanted = vec![false; self.layout.shards.len()];
        let first = self.seen_wants.is_none();
        let seen_wants = self.seen_wants.get_or_insert_with(HashMap::new);
        for (&k, &count) in &sale.wants {
            let seen = seen_wants.insert(k, count).unwrap_or(0);
            if let Some(w) = wanted.get_mut(k) {
                *w = !first && count > seen;
            }
        }
        wanted
    }

    /// Updates each shard's rate of sales.
    fn measure(&mut self, shards: &[ShardState]) {
        let now = Instant::now();
        for (k, s) in shards.iter().enumerate() {
            let sold = s.stock.saturating_sub(s.left);
            if let Some((before, at)) = self.last[k] {
                let secs = now.duration_since(at).as_secs_f64().max(1e-3);
                let rate = sold.saturating_sub(before) as f64 / secs;
                self.rate[k] = 0.5 * self.rate[k] + 0.5 * rate;
            }
            self.last[k] = Some((sold, now));
        }
    }
}

/// From the pool: every shard below half its target, emptiest first, up
/// to its target; a fair share each once the pool is short. Answers what
/// is left in the pool.
async fn from_pool(
    mover: &Mover<'_>,
    target: &[u64],
    wanted: &[bool],
    left: &mut [u64],
    mut pool: u64,
) -> Result<u64> {
    let n = left.len();
    let mut needy: Vec<usize> = (0..n)
        .filter(|&k| left[k] <= target[k] / 2 || (wanted[k] && left[k] == 0))
        .collect();
    needy.sort_by_key(|&k| left[k]);
    let asked: u64 = needy
        .iter()
        .map(|&k| target[k] - left[k].min(target[k]))
        .sum();
    for (i, &k) in needy.iter().enumerate() {
        if pool == 0 {
            break;
        }
        let mut units = target[k].saturating_sub(left[k]).max(1);
        if asked > pool {
            units = units.min(pool.div_ceil((needy.len() - i) as u64));
        }
        let moved = mover.transfer(Source::Pool, k, units).await?;
        pool -= moved.min(pool);
        left[k] += moved;
    }
    Ok(pool)
}
