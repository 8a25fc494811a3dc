//! Expires unpaid orders past their pay-by time, in every sale. Any number
//! of sweepers may run: each order expires exactly once (see `expire.lua`).
//!
//! What wakes it: every `interval`, one call per master expires what is
//! due in the sales its due index (`news.rs`) lists as due by now; only
//! those are swept, and each sweep files the sale again under its next
//! order's pay-by time.
//! A sale is filed by the persister that reads its purchases, so idle sales
//! cost nothing. Once per [`FULL_SWEEP`] (and at start) every sale is
//! swept and filed, whatever the index says: a safety net for a filing
//! lost with a master.

use std::time::{Duration, Instant};

use seckill_engine::Engine;

use crate::config::{LIBRARY, WATCH_MASTERS_EVERY};
use crate::failures::Failures;
use crate::news::Topology;

/// Most orders one sale expires per script call, so a large expiry wave
/// never blocks Redis for long.
const PER_CALL: u32 = 500;

/// How often a service's sweeper looks at the due indexes: an order
/// expires at most this long after its pay-by time (plus the moment its
/// purchase takes to be read and committed by a persister, which files
/// it).
pub const SWEEP_EVERY: Duration = Duration::from_millis(500);

/// How often every sale is swept, whatever the due index says.
pub const FULL_SWEEP: Duration = Duration::from_secs(300);

/// How soon after a failed sweep every sale is swept.
const AFTER_FAILURE: Duration = Duration::from_secs(10);

/// Most due sales one look at a master's index answers.
const DUE_PER_LOOK: usize = 1_000;

/// Sweeps every `interval` until `shutdown` resolves. Errors are logged and
/// the next sweep tries again.
pub async fn sweep_forever(engine: Engine, interval: Duration, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    let mut topology: Option<Topology> = None;
    let mut next_full = Instant::now();
    let mut next_watch = Instant::now();
    let mut masters = Failures::new("learning the masters");
    let mut sweeps = Failures::new("expiry sweep");
    loop {
        if topology.is_none() {
            match Topology::read(engine.target()).await {
                // Incomplete (a failover under way): every sale is swept
                // once it is whole.
                Ok(t) if !t.complete() => next_full = next_full.min(Instant::now() + AFTER_FAILURE),
                Ok(t) => {
                    masters.succeeded();
                    topology = Some(t);
                }
                Err(e) => masters.failed(&e),
            }
        }
        if let (Some(t), true) = (&topology, engine.target().is_cluster())
            && Instant::now() >= next_watch
        {
            next_watch = Instant::now() + WATCH_MASTERS_EVERY;
            // A slot moved or a master failed over: sweep every sale, which
            // files each in the index of its master now.
            if let Ok(now) = Topology::read(engine.target()).await
                && !now.same_as(t)
            {
                topology = None;
                next_full = Instant::now();
                continue;
            }
        }
        if let Some(t) = &topology {
            let full = Instant::now() >= next_full;
            let swept = if full {
                sweep_filing(&engine, t).await
            } else {
                sweep_due(&engine, t).await
            };
            sweeps.record(&swept);
            match swept {
                Ok(_) if full => next_full = Instant::now() + FULL_SWEEP,
                Ok(_) => {}
                Err(_) => {
                    // Perhaps the masters changed (a failover may lose the
                    // last filings): learn them again, and sweep everything
                    // a little later, once a new master serves.
                    topology = None;
                    next_full = next_full.min(Instant::now() + AFTER_FAILURE);
                }
            }
        }
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

/// Sweeps the sales each master's due index says have an order due: one
/// call per master expires them all, then the sales it left (shards, and
/// sales with more due) are swept one by one. A master whose call failed
/// (a sale's slot moved away, say) is swept sale by sale. A master or sale
/// that fails is logged and the others still swept; the last error is
/// answered then.
async fn sweep_due(engine: &Engine, topology: &Topology) -> seckill_engine::Result<u64> {
    let (mut expired, mut failed) = (0, None);
    for i in 0..topology.len() {
        let due = &topology.keys(i).due;
        let left = loop {
            match engine.expire_due_in(due, DUE_PER_LOOK).await {
                Ok((n, more, left)) => {
                    expired += n;
                    if !more || !left.is_empty() {
                        break Ok(left);
                    }
                }
                Err(e) => break Err(e),
            }
        };
        let sales = match left {
            Ok(left) => left,
            Err(e) => {
                // The sweep's failures are logged by its loop.
                tracing::debug!(master = topology.addr(i), error = %e, "expiring a master's due sales at once failed; one by one");
                match LIBRARY
                    .call("due", &[due])
                    .arg(DUE_PER_LOOK)
                    .invoke(&mut engine.connection())
                    .await
                {
                    Ok(sales) => sales,
                    Err(e) => {
                        failed = Some(e.into());
                        continue;
                    }
                }
            }
        };
        for sale in &sales {
            let due = match topology.of(sale) {
                Some(j) if j != i => {
                    // Filed on a master that no longer serves it (its slot
                    // moved): out of there, into its own.
                    let sale_key = format!("seckill:{{sale:{sale}}}:sale");
                    let _: redis::RedisResult<i64> =
                        redis::AsyncCommands::zrem(&mut engine.connection(), due, sale_key).await;
                    &topology.keys(j).due
                }
                _ => due,
            };
            match expire(engine, sale, due).await {
                Ok(n) => expired += n,
                Err(e) => {
                    // The sweep fails with it, logged by its loop.
                    tracing::debug!(sale, error = %e, "expiring a sale's orders failed");
                    failed = Some(e);
                }
            }
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(expired),
    }
}

/// Sweeps every sale, filing each in its master's due index.
async fn sweep_filing(engine: &Engine, topology: &Topology) -> seckill_engine::Result<u64> {
    sweep_with(engine, |sale| {
        topology.of(sale).map(|i| topology.keys(i).due.clone())
    })
    .await
}

async fn expire(engine: &Engine, sale: &str, due: &str) -> seckill_engine::Result<u64> {
    engine.expire_due_filing(sale, PER_CALL, due).await
}

/// One pass over all sales; answers how many orders expired. A sale whose
/// master is unreachable is skipped (and logged), so the others still
/// expire theirs; the pass fails only if no sale could be swept.
pub async fn sweep(engine: &Engine) -> seckill_engine::Result<u64> {
    sweep_with(engine, |_| None).await
}

/// One pass over all sales, filing each in the due index `index` names.
async fn sweep_with(
    engine: &Engine,
    index: impl Fn(&str) -> Option<String>,
) -> seckill_engine::Result<u64> {
    let mut expired = 0;
    let (mut last_error, mut failed) = (None, 0);
    let sales = engine.sale_ids().await?;
    for sale in &sales {
        let swept = match index(sale) {
            Some(due) => expire(engine, sale, &due).await,
            None => engine.expire_due(sale, PER_CALL).await,
        };
        match swept {
            Ok(n) => expired += n,
            Err(e) => {
                tracing::warn!(sale, error = %e, "expiring a sale's orders failed");
                last_error = Some(e);
                failed += 1;
            }
        }
    }
    match last_error {
        Some(e) if failed == sales.len() => Err(e),
        _ => Ok(expired),
    }
}
