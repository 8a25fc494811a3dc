//! Finished sales leave Redis: once a sale has ended and every order of it
//! is settled (paid, cancelled or expired) and in SQL, its keys are removed
//! and SQL answers for it from then on. Redis holds only what can still
//! change, so its memory follows the live sales, not every sale ever run.

use std::time::Duration;

use seckill_engine::{Engine, OrderState, Status};
use serde::Serialize;

use crate::audit::audit_with_orders;
use crate::error::{Error, Result};
use crate::failures::Failures;
use crate::news::{Follower, Learned};
use crate::store::Store;

/// What archiving a sale did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Archived {
    /// The sale archived.
    pub sale_id: String,
    /// Its orders, all in SQL.
    pub orders: usize,
    /// Units paid for.
    pub sold: u64,
}

/// Archives sale `id`: checks it ended, holds no order awaiting payment,
/// has nothing left to persist and audits clean, records it in SQL as
/// archived, then removes its Redis keys. Refused with
/// [`Error::NotArchivable`] saying why otherwise; nothing changes then.
///
/// ```no_run
/// # async fn run(engine: seckill_engine::Engine, store: seckill_orders::Store) -> seckill_orders::Result<()> {
/// let done = seckill_orders::archive(&engine, &store, "drop-1").await?;
/// println!("{} orders of {} now answered from SQL", done.orders, done.sale_id);
/// # Ok(()) }
/// ```
pub async fn archive(engine: &Engine, store: &Store, id: &str) -> Result<Archived> {
    let refuse = |reason: String| Error::NotArchivable {
        sale: id.to_owned(),
        reason,
    };
    let sale = engine.sale(id).await?;
    if sale.sharding.is_some() || seckill_engine::is_shard(id) {
        return Err(refuse(
            "a sharded sale and its shards stay in Redis: archiving them is not supported yet"
                .to_owned(),
        ));
    }
    // Ended by the clock the purchase scripts use, Redis's: by this
    // machine's, a purchase could still land between the checks below and
    // the removal.
    let now: (u64, u64) = redis::cmd("TIME")
        .query_async(&mut engine.connection())
        .await?;
    let now_ms = now.0 * 1000 + now.1 / 1000;
    if sale.status_at(now_ms) != Status::Ended {
        return Err(refuse(
            "it has not ended; end it first (POST /v1/sales/{id}/end) or wait for its end time"
                .to_owned(),
        ));
    }
    // One read of its orders serves the audit and the checks below.
    let (report, orders) = audit_with_orders(engine, store, id).await?;
    let pending = orders
        .iter()
        .filter(|o| o.state == OrderState::PendingPayment)
        .count();
    if pending > 0 {
        return Err(refuse(format!(
            "{pending} of its orders still await payment; they are paid, cancelled or expire by their pay-by time"
        )));
    }
    if report.backlog > 0 {
        return Err(refuse(format!(
            "{} of its stream entries are not in SQL yet; a persister must drain them first",
            report.backlog
        )));
    }
    if !report.clean {
        return Err(refuse(format!(
            "its audit found {} problems; see `seckill audit --sale {id}`",
            report.findings.len()
        )));
    }
    let sold: u64 = orders
        .iter()
        .filter(|o| o.state == OrderState::Paid)
        .map(|o| u64::from(o.quantity))
        .sum();
    store.upsert_sale(&sale).await?;
    let marked = store
        .mark_archived(id, sale.generation as i64, now_ms as i64, sold as i64)
        .await?;
    if !marked {
        return Err(refuse(
            "SQL holds another generation of this id; nothing was removed".to_owned(),
        ));
    }
    engine.delete_sale(id).await?;
    forget_signals(engine, id).await?;
    tracing::info!(sale = id, orders = orders.len(), "archived");
    Ok(Archived {
        sale_id: id.to_owned(),
        orders: orders.len(),
        sold,
    })
}

/// Takes a removed sale out of its master's signal keys (`news.rs`), which
/// would otherwise drop it only when its filing came due.
async fn forget_signals(engine: &Engine, id: &str) -> Result<()> {
    let topology = crate::news::Topology::read(engine.target()).await?;
    if let Some(i) = topology.of(id) {
        let keys = topology.keys(i);
        let sale = format!("seckill:{{sale:{id}}}:sale");
        let () = redis::pipe()
            .zrem(&keys.due, &sale)
            .ignore()
            .srem(&keys.news, &sale)
            .ignore()
            .query_async(&mut engine.connection())
            .await?;
    }
    Ok(())
}

/// Archives every sale that ended at least `after` ago and can be; answers
/// the ids archived. A sale that cannot be yet is left for a later pass.
pub async fn archive_due(engine: &Engine, store: &Store, after: Duration) -> Result<Vec<String>> {
    let mut archived = Vec::new();
    let now = crate::clock::now_ms();
    for id in engine.sale_ids().await? {
        let sale = match engine.sale(&id).await {
            Ok(sale) => sale,
            Err(seckill_engine::Error::SaleNotFound(_)) => continue,
            Err(e) => return Err(e.into()),
        };
        let due = sale
            .rules
            .ends_at_ms()
            .is_some_and(|end| end.saturating_add(after.as_millis() as u64) <= now);
        if !due {
            continue;
        }
        match archive(engine, store, &id).await {
            Ok(_) => archived.push(id),
            Err(Error::NotArchivable { reason, .. }) => {
                tracing::debug!(sale = id, reason, "not archived yet");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(archived)
}

/// Archives each sale once it ended at least `after` ago and can be, until
/// `shutdown` resolves, looking every `after` but at least every 10 s.
/// Errors are logged and the next look tries again.
///
/// What wakes it: it reads every sale's end once at start, then only the
/// sales the registry's log says changed (made, ended, removed), so an
/// idle sale costs it nothing; a sale due but not archivable yet (orders
/// awaiting payment, a backlog) is tried again at each look.
pub async fn archive_forever(
    engine: Engine,
    store: Store,
    after: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let interval = after.clamp(Duration::from_millis(100), Duration::from_secs(10));
    tokio::pin!(shutdown);
    let mut ends = Ends::default();
    let mut following = Failures::new("learning of sales' ends");
    let mut archiving = Failures::new("archiving");
    loop {
        let followed = ends.follow(&engine).await;
        following.record(&followed);
        if followed.is_err() {
            // Some changes read were not applied: read every sale again.
            ends.follower.restart();
        }
        for id in ends.due(after) {
            match archive(&engine, &store, &id).await {
                Ok(_) => {
                    archiving.succeeded();
                    ends.by_sale.remove(&id);
                }
                Err(Error::NotArchivable { reason, .. }) => {
                    tracing::debug!(sale = id, reason, "not archived yet");
                }
                Err(e) => archiving.failed(&format_args!("sale {id}: {e}")),
            }
        }
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

/// The end of every sale that can be archived (not sharded), as last read.
#[derive(Default)]
struct Ends {
    by_sale: std::collections::HashMap<String, u64>,
    /// Place in the registry's log.
    follower: Follower,
}

impl Ends {
    /// Reads the ends of the sales changed since the last call (of all of
    /// them, the first time or after falling behind the log).
    async fn follow(&mut self, engine: &Engine) -> Result<()> {
        let changed = match self.follower.next(engine).await? {
            Learned::All(ids) => {
                self.by_sale.clear();
                ids
            }
            Learned::Changed(ids) => ids,
        };
        for id in changed {
            self.by_sale.remove(&id);
            if seckill_engine::is_shard(&id) {
                continue;
            }
            match engine.sale(&id).await {
                Ok(sale) if sale.sharding.is_none() => {
                    if let Some(end) = sale.rules.ends_at_ms() {
                        self.by_sale.insert(id, end);
                    }
                }
                Ok(_) | Err(seckill_engine::Error::SaleNotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// The sales that ended at least `after` ago by this machine's clock.
    fn due(&self, after: Duration) -> Vec<String> {
        let now = crate::clock::now_ms();
        self.by_sale
            .iter()
            .filter(|(_, end)| end.saturating_add(after.as_millis() as u64) <= now)
            .map(|(id, _)| id.clone())
            .collect()
    }
}
