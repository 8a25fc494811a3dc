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

/// One pass over all sales; answers how many orders expired.
pub async fn sweep(engine: &Engine) -> seckill_engine::Result<u64> {
    let mut expired = 0;
    for sale in engine.sale_ids().await? {
        loop {
            let n = engine.expire_due(&sale, PER_CALL).await?;
            expired += n;
            if n < u64::from(PER_CALL) {
                break;
            }
        }
    }
    Ok(expired)
}
