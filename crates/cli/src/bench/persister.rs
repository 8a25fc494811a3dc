//! The order persister of a `--persist-to` run: started beside the race
//! on a thread of its own, then drained, stopped and costed per order.

use anyhow::Result;
use seckill_engine::Engine;
use seckill_orders::{Persister, PersisterConfig, Store, wait_drained};

use super::rows::Persisted;
use crate::redis_cost::{Meter, threads_cpu_us};

/// The persister's share of Redis time in a run: its plain commands but the
/// three the bench's own wait for the drain sends too (`XINFO GROUPS`,
/// `HGETALL`, `HGET`; the persister sends them twice a second or at a
/// trim), and its reads'
/// `XREADGROUP`s: its ledger's, plain, and those its read script runs,
/// counted under their own name as well.
/// The script call around it, once a batch, is counted with the purchases.
fn persister_commands() -> Vec<&'static str> {
    seckill_orders::PLAIN_COMMANDS
        .into_iter()
        .filter(|c| !["xinfo|groups", "hgetall", "hget"].contains(c))
        .chain(["xreadgroup"])
        .collect()
}

/// Names of the threads the persister runs on in `bench`: its own, and
/// sqlx's SQLite connection workers (`sqlx-sqlite-worker-N`, truncated).
pub(super) const PERSISTER_THREADS: &[&str] = &["seckill-persist", "sqlx-sqlite-wor"];

/// A persister started for a run: its stop signal and its thread.
pub(super) type Running = (
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
);

/// Starts a persister on a thread and runtime of its own, as a separate
/// `seckill persist` process would run, so it does not queue behind buyers.
pub(super) async fn start_persister(
    store: &Store,
    redis: &seckill_redis::Target,
) -> Result<Running> {
    let (store, redis) = (store.clone(), redis.clone());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (ready, started) = tokio::sync::oneshot::channel::<Result<()>>();
    let thread = std::thread::Builder::new()
        .name("seckill-persist".to_owned())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => return drop(ready.send(Err(e.into()))),
            };
            runtime.block_on(async move {
                match Persister::with_target(&redis, store, PersisterConfig::default()).await {
                    Ok(persister) => {
                        let _ = ready.send(Ok(()));
                        persister.run(async { drop(stopped.await) }).await;
                    }
                    Err(e) => drop(ready.send(Err(e.into()))),
                }
            });
        })?;
    started.await??;
    Ok((stop, thread))
}

/// Where the persister of a `--persist-to` run writes the sale's orders.
pub(super) struct Drain<'a> {
    pub(super) engine: &'a Engine,
    pub(super) store: &'a Store,
    /// The sale, or each of its shards.
    pub(super) parts: &'a [String],
    pub(super) generation: u64,
}

impl Drain<'_> {
    /// Once the buyers stop: how long the persister takes to empty every
    /// part's backlog, then (stopped) what it cost per order it wrote.
    pub(super) async fn measure(
        &self,
        (stop, task): Running,
        meter: &mut Meter,
        cpu_before: Option<f64>,
    ) -> Result<Persisted> {
        let started = std::time::Instant::now();
        for part in self.parts {
            wait_drained(
                &mut self.engine.connection(),
                part,
                std::time::Duration::from_secs(60),
            )
            .await?;
        }
        let drain = started.elapsed();
        let redis_us = meter.read_only(&persister_commands()).await?.command_us;
        let cpu_us = cpu_before
            .zip(threads_cpu_us(PERSISTER_THREADS))
            .map(|(a, b)| b - a);
        let _ = stop.send(());
        tokio::task::spawn_blocking(move || task.join())
            .await?
            .map_err(|_| anyhow::anyhow!("the persister thread panicked"))?;
        let mut orders = 0;
        for part in self.parts {
            orders += self.store.orders(part, self.generation as i64).await?.len() as u64;
        }
        let per_order = |us: f64| (orders > 0).then(|| us / orders as f64);
        Ok(Persisted {
            drain_ms: drain.as_secs_f64() * 1000.0,
            orders,
            redis_us_per_order: per_order(redis_us),
            cpu_us_per_order: cpu_us.and_then(per_order),
        })
    }
}
