//! Expires unpaid orders past their pay-by time, in every sale. Any number
//! of sweepers may run: each order expires exactly once (see `expire.lua`).

use std::time::Duration;

use seckill_engine::Engine;

/// Most orders one sale expires per script call, so a large expiry wave
/// never blocks Redis for long.
const PER_CALL: u32 = 500;

/// Sweeps every `interval` until `shutdown` resolves. Errors are logged and
/// the next sweep tries again.
pub async fn sweep_forever(engine: Engine, interval: Duration, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    loop {
        if let Err(e) = sweep(&engine).await {
            tracing::warn!(error = %e, "expiry sweep failed");
        }
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

/// One pass over all sales; answers how many orders expired. A sale whose
/// master is unreachable is skipped (and logged), so the others still
/// expire theirs; the pass fails only if no sale could be swept.
pub async fn sweep(engine: &Engine) -> seckill_engine::Result<u64> {
    let mut expired = 0;
    let (mut last_error, mut failed) = (None, 0);
    let sales = engine.sale_ids().await?;
    for sale in &sales {
        loop {
            match engine.expire_due(sale, PER_CALL).await {
                Ok(n) => {
                    expired += n;
                    if n < u64::from(PER_CALL) {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(sale, error = %e, "expiring a sale's orders failed");
                    last_error = Some(e);
                    failed += 1;
                    break;
                }
            }
        }
    }
    match last_error {
        Some(e) if failed == sales.len() => Err(e),
        _ => Ok(expired),
    }
}
