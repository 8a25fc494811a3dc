//! A persister's housekeeping, beside its reads: learning of new and
//! removed sales from the registry's log, looking for abandoned batches
//! (another persister gone quiet, a failed commit, at start, each full
//! read) and trimming streams. Each step on its own: the master holding
//! the registry (or one sale's) being down must not stop the others.

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use tokio::sync::watch;

use super::Inner;
use crate::backlog::trim;
use crate::config::REST_AFTER_FAILURE;
use crate::error::Result;
use crate::news::Learned;
use crate::takeover;

impl Inner {
    /// Housekeeping until `stopped`'s sender is dropped; the step in hand
    /// finishes first.
    pub(super) async fn keep_house(self, mut stopped: watch::Receiver<()>) {
        loop {
            let (_, pause) = self.housekeeping().await;
            tokio::select! {
                biased;
                _ = stopped.changed() => return,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Learns of new sales, takes over abandoned batches and trims the
    /// streams. Each step on its own: the master holding the sale registry
    /// (or one sale's) being down must not stop the others. A step that
    /// failed outright puts the next housekeeping off a while. Answers the
    /// events persisted and the pause until the next housekeeping.
    pub(super) async fn housekeeping(&self) -> (usize, Duration) {
        let mut pause = self.config.housekeeping;
        let followed = self.follow_registry().await;
        self.state().failing.registry.record(&followed);
        if followed.is_err() {
            // Some changes read were not applied: list the sales again.
            self.state().follower.restart();
            pause = REST_AFTER_FAILURE;
        }
        let (full, first) = {
            let mut state = self.state();
            let now = Instant::now();
            let due = state.next_full_read.is_none_or(|at| at <= now);
            if due {
                state.next_full_read = Some(now + self.config.full_read);
                state.read_every_sale();
                state.claim_all = true;
            }
            (due, !std::mem::replace(&mut state.started, true))
        };
        if full {
            self.state().topology = None;
        }
        self.watch_masters().await;
        if std::mem::take(&mut self.state().look_for_orphans) || full {
            self.look_for_orphans().await;
        }
        let looked = self.look_at_readers().await;
        self.state().failing.readers.record(&looked);
        if looked.is_err() {
            pause = REST_AFTER_FAILURE;
        }
        let mut persisted = self.claim_ledgers().await;
        persisted += if std::mem::take(&mut self.state().claim_all) {
            let claimed = self.claim_abandoned().await;
            self.state().failing.claims.record(&claimed);
            match claimed {
                Ok(n) => n,
                Err(_) => {
                    self.state().claim_all = true;
                    pause = REST_AFTER_FAILURE;
                    0
                }
            }
        } else {
            0
        };
        self.trim(first).await;
        (persisted, pause)
    }

    /// Follows the registry's log: a sale made (or made again) is recorded
    /// in SQL and read once, whatever its signals; a sale removed is
    /// forgotten. With no place in the log (at start, or fallen behind it),
    /// lists every sale instead.
    pub(super) async fn follow_registry(&self) -> Result<()> {
        let mut follower = std::mem::take(&mut self.state().follower);
        let learned = follower.next(&self.engine).await;
        self.state().follower = follower;
        let changed = match learned? {
            Learned::All(ids) => {
                self.state().known.clear();
                ids
            }
            Learned::Changed(ids) => ids,
        };
        for id in changed {
            match self.engine.sale(&id).await {
                Ok(sale) => {
                    self.store.upsert_sale(&sale).await?;
                    let mut state = self.state();
                    state.known.insert(id.clone());
                    state.to_read.insert(id);
                }
                Err(seckill_engine::Error::SaleNotFound(_)) => {
                    let mut state = self.state();
                    state.known.remove(&id);
                    state.to_read.remove(&id);
                    state.committed.remove(&id);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Looks at when every persister last read from each master: one quiet
    /// for longer than `claim_idle` (but this one) has died or hung, and
    /// its batches are looked for.
    pub(super) async fn look_at_readers(&self) -> Result<()> {
        let topology = self.topology().await?;
        let mut conn = self.conn.clone();
        let (me, idle) = (&self.config.consumer, self.config.claim_idle);
        for (readers, gone) in takeover::quiet_everywhere(&mut conn, &topology, me, idle).await {
            tracing::info!(?gone, "persisters went quiet; taking over their batches");
            self.claim_abandoned().await?;
            let _: i64 = conn.hdel(readers, gone).await?;
        }
        Ok(())
    }

    /// Persists the batches of every known sale that some persister read
    /// at least `claim_idle` ago and never committed; looks again at the
    /// next housekeeping if some were too young or unreachable.
    pub(super) async fn claim_abandoned(&self) -> Result<usize> {
        let known: Vec<String> = self.state().known.iter().cloned().collect();
        let taken = takeover::abandoned(
            &mut self.conn.clone(),
            &self.store,
            &known,
            &self.config.consumer,
            self.config.claim_idle,
            self.config.replica_wait,
        )
        .await?;
        if taken.look_again {
            self.state().claim_all = true;
        }
        Ok(taken.persisted)
    }

    /// Finds the ledgers no master's keys name, to drain them; asks again
    /// at the next housekeeping if that failed.
    async fn look_for_orphans(&self) {
        let found = match self.topology().await {
            Ok(topology) => topology.orphan_ledgers().await,
            Err(e) => Err(e),
        };
        match found {
            Ok(found) => {
                if !found.is_empty() {
                    tracing::info!(?found, "ledgers left by a change of masters; draining them");
                }
                self.state().orphans = found;
            }
            Err(e) => {
                tracing::warn!(error = %e, "looking for ledgers left by a change of masters failed");
                self.state().look_for_orphans = true;
            }
        }
    }

    /// Persists the entries of each master's ledgers that some persister
    /// read at least `claim_idle` ago and never acknowledged: one call per
    /// ledger, so it runs at every housekeeping; and all of each ledger
    /// left by a change of masters, until empty. A ledger that fails is
    /// logged and the others still looked at.
    pub(super) async fn claim_ledgers(&self) -> usize {
        let orphans = self.state().orphans.clone();
        let mut persisted = 0;
        for orphan in orphans {
            match takeover::drain_orphan(
                &mut self.conn.clone(),
                &self.store,
                &orphan,
                &self.config.consumer,
                self.config.claim_idle,
                self.config.replica_wait,
            )
            .await
            {
                Ok((n, empty)) => {
                    persisted += n;
                    // Sales armed on it tell it until read again, which
                    // arms each on its master now.
                    let mut state = self.state();
                    if empty && state.to_read.is_empty() {
                        state.orphans.retain(|o| *o != orphan);
                    }
                }
                Err(e) => {
                    tracing::warn!(ledger = orphan, error = %e, "draining a ledger left by a change of masters failed");
                }
            }
        }
        let Ok(topology) = self.topology().await else {
            return persisted;
        };
        for i in 0..topology.len() {
            let keys = topology.keys(i);
            for ledger in keys.ledgers() {
                match takeover::abandoned_in_ledger(
                    &mut self.conn.clone(),
                    &self.store,
                    (keys, ledger),
                    true,
                    &self.config.consumer,
                    self.config.claim_idle,
                    self.config.replica_wait,
                )
                .await
                {
                    Ok(n) => persisted += n,
                    Err(e) => {
                        tracing::warn!(master = topology.addr(i), ledger, error = %e, "taking over a ledger's abandoned entries failed");
                    }
                }
            }
        }
        persisted
    }

    /// Drops entries every persister has committed, and only those; the
    /// engine keeps those pending orders still live in. `all`: every sale,
    /// else those this persister committed a batch's worth to, or any,
    /// `TRIM_EVERY` (`work.rs`) ago.
    pub(super) async fn trim(&self, all: bool) {
        let due = self.state().due_for_trim(self.config.batch, all);
        for sale in due {
            if let Err(e) = trim(&self.engine, &mut self.conn.clone(), &sale).await {
                tracing::warn!(sale, error = %e, "trimming its stream failed");
            }
        }
    }
}
