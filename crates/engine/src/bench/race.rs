//! The classic flash-sale simulation (docs/strategies.md),
//! done over real connections: many
//! concurrent buyers race for a sale through one [`Purchaser`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::verify::Demand;
use crate::order::{Outcome, PurchaseRequest};
use crate::purchaser::Purchaser;

/// What happened in a race.
#[derive(Debug, Default)]
pub struct Race {
    /// What was asked and acknowledged, for [`super::verify()`].
    pub demand: Demand,
    /// Answers by [`Outcome::code`], plus `"stock_moving"` (see
    /// [`crate::Error::StockMoving`]) and `"error"` for failed calls.
    pub outcomes: BTreeMap<&'static str, u64>,
    /// Latency of every purchase call, in microseconds.
    pub latencies_us: Vec<u64>,
    /// Wall time of the whole race.
    pub elapsed: Duration,
}

/// Sends `requests` through `purchaser` from `concurrency` tasks, each taking
/// the next request when done with its last. `progress` is called with the
/// number of finished purchases, now and then.
pub async fn race(
    purchaser: &Purchaser,
    requests: Vec<PurchaseRequest>,
    concurrency: usize,
    progress: impl Fn(u64) + Send + Sync + 'static,
) -> Race {
    let mut race = Race::default();
    for req in &requests {
        race.demand.ask(&req.user_id, req.quantity);
    }
    let requests = Arc::new(requests);
    let next = Arc::new(AtomicUsize::new(0));
    let progress = Arc::new(progress);
    let shared = Arc::new(Mutex::new(Race::default()));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency.max(1) {
        let (purchaser, requests, next) = (purchaser.clone(), requests.clone(), next.clone());
        let (shared, progress) = (shared.clone(), progress.clone());
        tasks.push(tokio::spawn(async move {
            let mut mine = Race::default();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(req) = requests.get(i) else { break };
                let t = Instant::now();
                let outcome = purchaser.purchase(req).await;
                mine.latencies_us.push(t.elapsed().as_micros() as u64);
                let code = match &outcome {
                    Ok(Outcome::Ok(order)) => {
                        mine.demand.acknowledged.push(order.clone());
                        "ok"
                    }
                    Ok(other) => other.code(),
                    // A sharded sale's buyer waited its bound for units
                    // still moving: nothing bought, an answer, not a fault.
                    Err(crate::Error::StockMoving(_)) => "stock_moving",
                    Err(e) => {
                        tracing::debug!(error = %e, "purchase failed");
                        "error"
                    }
                };
                *mine.outcomes.entry(code).or_default() += 1;
                if i % 1024 == 0 {
                    progress(i as u64);
                }
            }
            let mut all = shared.lock().unwrap_or_else(|e| e.into_inner());
            all.demand
                .acknowledged
                .append(&mut mine.demand.acknowledged);
            all.latencies_us.append(&mut mine.latencies_us);
            for (code, n) in mine.outcomes {
                *all.outcomes.entry(code).or_default() += n;
            }
        }));
    }
    for task in tasks {
        task.await.expect("buyer task panicked");
    }
    let mut all = std::mem::take(&mut *shared.lock().unwrap_or_else(|e| e.into_inner()));
    progress(requests.len() as u64);
    race.elapsed = started.elapsed();
    race.demand.acknowledged = all.demand.acknowledged;
    race.outcomes = std::mem::take(&mut all.outcomes);
    race.latencies_us = all.latencies_us;
    race
}
