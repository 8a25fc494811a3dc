//! Moves order events from every sale's Redis Stream into SQL.
//!
//! Each sale stream has one consumer group, `persister`; every running
//! persister is a consumer of it, so an entry goes to one of them. A batch
//! is recorded in the sale's persisting hash instead of a per-entry pending
//! list; the record is deleted only after the transaction holding the
//! batch committed, and inserting an order twice is a no-op, so a crash in
//! between only means a harmless second write. Once a sale is armed, its
//! entries reach the persisters through its master's ledger instead (see
//! `news.rs`), whose own group keeps each read entry pending until it is
//! committed. Streams are trimmed only below the oldest entry not yet
//! committed, so nothing unpersisted is ever dropped.
//!
//! What wakes it, so that idle sales cost nothing:
//! - Reads: every `poll` (up to `idle_poll` when rounds find nothing), two
//!   calls per master, sent together: an `XREADGROUP` of that master's
//!   ledger, the events of every armed sale, and `lua/read_news.lua`, the
//!   sales in its news set (see `news.rs`): idle, that is two calls per
//!   master, whatever the number of sales. A sale also is read from its
//!   own stream once when it appears in the registry's log of changes,
//!   which arms it, and every sale once per `full_read` (a safety net for
//!   a signal lost with a master; an armed sale's stream is not read, as
//!   all it holds past the group was told, but the sale is armed again on
//!   its master's ledger). What came from the ledger is
//!   acknowledged there once committed (`lua/ledger_done.lua`), which
//!   files each sale told a purchase in the due index for the sweeper.
//! - Taking over abandoned batches: ledger entries unacknowledged for
//!   `claim_idle`, at each housekeeping (one call per master); batches of
//!   a sale's stream when a persister's mark in its master's readers hash
//!   goes stale (it died), when this one's commit failed, at start, and
//!   once per `full_read`.
//! - Trimming: a sale whose batches this persister committed, once it
//!   committed a batch's worth or `TRIM_EVERY` passed; every sale at start.
//!
//! Masters are independent: each one's read is sent at once, and a round
//! waits at most `READ_WAIT` for the answers; a read left unanswered (its
//! master frozen) stays in flight while the others are read again, and
//! when it fails its master rests a while. Housekeeping
//! (`persister/housekeeping.rs`) runs beside the reads, so a frozen master
//! costs it, not them, a response timeout.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use seckill_engine::{Engine, Event, StreamEntry};
use seckill_redis::{Conn, Target};
use tokio::sync::watch;

use crate::commit::{Acks, commit, on_every_replica};
use crate::config::{
    GROUP, LIBRARY, PersisterConfig, READ_WAIT, REST_AFTER_FAILURE, WATCH_MASTERS_EVERY,
};
use crate::error::{Error, Result};
use crate::failures::Failures;
use crate::ledger::{Told, make_ledger_group, read_ledgers};
use crate::news::{MasterKeys, Topology};
use crate::store::Store;
use crate::work::{SALES_PER_READ, State};

mod housekeeping;

/// One master's read: its address and keys, the sales named in it, what
/// its ledgers told (per ledger) and what its sales' own streams held (the answer of
/// `lua/read_news.lua`), and the error of a part that failed: what the
/// other part read is committed all the same.
struct Read {
    addr: String,
    keys: MasterKeys,
    sales: Vec<String>,
    told: Vec<(String, Vec<StreamEntry>)>,
    own: Vec<String>,
    failed: Option<Error>,
}

/// Reads sent and not yet answered, kept from one round to the next.
type Reads = FuturesUnordered<BoxFuture<'static, Read>>;

/// One persister. Run it with [`Persister::run`] until shutdown, or step it
/// with [`Persister::round`].
pub struct Persister {
    inner: Inner,
    reads: Reads,
    /// When housekeeping is due next, for [`Persister::round`].
    next_housekeeping: Instant,
}

/// What the read loop and housekeeping share; cheap to clone, so that
/// [`Persister::run`] can give housekeeping a task of its own.
#[derive(Clone)]
struct Inner {
    engine: Engine,
    store: Store,
    /// The engine's connection (its own: the engine is this persister's).
    conn: Conn,
    target: Target,
    config: PersisterConfig,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Persister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let known = self.inner.state().known.len();
        f.debug_struct("Persister")
            .field("consumer", &self.inner.config.consumer)
            .field("engine", &self.inner.engine)
            .field("store", &self.inner.store)
            .field("sales", &known)
            .finish_non_exhaustive()
    }
}

impl Persister {
    /// A persister on `redis_url`. It does not wait for Redis: while Redis
    /// is away its rounds fail and are retried, and it reconnects by itself.
    pub async fn new(redis_url: &str, store: Store, config: PersisterConfig) -> Result<Self> {
        Self::with_target(&seckill_redis::Target::server(redis_url), store, config).await
    }

    /// A persister on `target`, one server or a cluster; as
    /// [`Persister::new`] otherwise.
    pub async fn with_target(
        target: &seckill_redis::Target,
        store: Store,
        config: PersisterConfig,
    ) -> Result<Self> {
        let engine = Engine::connect_target_lazy(target)?;
        let conn = engine.connection();
        let inner = Inner {
            engine,
            store,
            conn,
            target: target.clone(),
            config,
            state: Arc::default(),
        };
        Ok(Self {
            inner,
            reads: Reads::new(),
            next_housekeeping: Instant::now(),
        })
    }

    /// Runs until `shutdown` resolves, then returns: the reads in flight
    /// are answered first, so what they read is committed (each Redis and
    /// SQL call is bounded by a timeout). Errors are logged and retried
    /// after a pause, never fatal.
    ///
    /// Housekeeping runs beside the reads, in a task of its own: its steps
    /// go to the master holding the registry of sales and to each sale's,
    /// and one of them frozen costs a whole response timeout, which the
    /// reads of the other sales must not wait for.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        let Self {
            inner, mut reads, ..
        } = self;
        let (stop, stopped) = watch::channel(());
        let keeper = tokio::spawn(inner.clone().keep_house(stopped));
        tokio::pin!(shutdown);
        let mut quiet = inner.config.poll;
        let mut rounds = Failures::new("persister round");
        loop {
            let pause = match inner.read_round(&mut reads, Some(READ_WAIT)).await {
                // Nothing at all: wait longer each time, up to `idle_poll`,
                // so quiet sales cost next to nothing.
                Ok((0, false)) => {
                    // A round that skipped resting masters proves nothing.
                    if inner.state().resting.is_empty() {
                        rounds.succeeded();
                    }
                    quiet = (quiet * 2).min(inner.config.idle_poll.max(inner.config.poll));
                    quiet
                }
                // Nothing more waiting: let the next batch grow for a
                // while, as a small batch costs more per order.
                Ok((_, false)) => {
                    rounds.succeeded();
                    quiet = inner.config.poll;
                    quiet
                }
                Ok((_, true)) => {
                    rounds.succeeded();
                    Duration::ZERO
                }
                Err(e) => {
                    rounds.failed(&e);
                    Duration::from_millis(200)
                }
            };
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = tokio::time::sleep(pause) => {}
            }
        }
        if let Err(e) = inner.answers(&mut reads, None).await {
            tracing::warn!(error = %e, "the last reads failed; another persister takes them over");
        }
        drop(stop);
        if let Err(e) = keeper.await {
            tracing::warn!(error = %e, "the persister's housekeeping task failed");
        }
    }

    /// One round: housekeeping when due, then the news of every master,
    /// each committed to SQL. Answers how many events were persisted; 0
    /// when there was nothing new.
    pub async fn round(&mut self) -> Result<usize> {
        let mut persisted = 0;
        if Instant::now() >= self.next_housekeeping {
            let (n, pause) = self.inner.housekeeping().await;
            persisted += n;
            self.next_housekeeping = Instant::now() + pause;
        }
        match self.inner.read_round(&mut self.reads, None).await {
            Ok((n, _)) => Ok(persisted + n),
            Err(_) if persisted > 0 => Ok(persisted),
            Err(e) => Err(e),
        }
    }
}

impl Inner {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves the state whole (each
        // change is one insert, remove or assignment).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The masters, read if not known.
    async fn topology(&self) -> Result<Arc<Topology>> {
        if let Some(t) = self.state().topology.clone() {
            return Ok(t);
        }
        let topology = Arc::new(Topology::read(&self.target).await?);
        let mut state = self.state();
        // Incomplete (a failover under way): used once, then asked again.
        if topology.complete() {
            state.topology = Some(topology.clone());
        }
        Ok(topology)
    }

    /// Forgets the masters (read again next time), reads every sale (a
    /// signal may have been lost with a master) and looks for ledgers left
    /// behind.
    fn masters_changed(&self) {
        let mut state = self.state();
        state.topology = None;
        state.look_for_orphans = true;
        state.read_every_sale();
    }

    /// Asks which masters serve which slots: when that changed (a slot
    /// moved, a failover), the sales armed on a master that no longer
    /// serves them would never be heard of, so every sale is read again,
    /// which arms each on its master now.
    async fn watch_masters(&self) {
        {
            let mut state = self.state();
            let now = Instant::now();
            if !self.target.is_cluster() || state.next_watch.is_some_and(|at| at > now) {
                return;
            }
            state.next_watch = Some(now + WATCH_MASTERS_EVERY);
        }
        let Ok(now) = Topology::read(&self.target).await else {
            return;
        };
        let known = self.state().topology.clone();
        if known.is_some_and(|known| !known.same_as(&now)) {
            tracing::info!("the cluster's masters or slots changed; reading every sale again");
            self.masters_changed();
        }
    }

    /// Sends a read to every master not resting and not still reading: its
    /// news, and up to [`SALES_PER_READ`] of the sales to read anyway; then
    /// commits the answers as they come (see [`Inner::answers`]). Answers
    /// the events persisted and whether more waits.
    async fn read_round(&self, reads: &mut Reads, wait: Option<Duration>) -> Result<(usize, bool)> {
        let topology = self.topology().await?;
        let (named, more) = self.state().take_named(&topology);
        for (i, sales) in named.into_iter().enumerate() {
            let Some(sales) = sales else { continue };
            let keys = topology.keys(i).clone();
            let mut call = LIBRARY.call("read_news", &[&keys.news, &keys.readers, &keys.ledger]);
            call.arg(GROUP)
                .arg(&self.config.consumer)
                .arg(self.config.batch)
                .arg(SALES_PER_READ)
                .arg(if self.target.is_cluster() { "1" } else { "" });
            for sale in &sales {
                call.arg(format!("seckill:{{sale:{sale}}}:sale"));
            }
            let addr = topology.addr(i);
            self.state().reading.insert(addr.clone());
            let (mut conn, consumer) = (self.conn.clone(), self.config.consumer.clone());
            let (batch, replica_wait) = (self.config.batch, self.config.replica_wait);
            reads.push(Box::pin(async move {
                let epoch = conn.epoch();
                let mut other = conn.clone();
                let (told, own) = tokio::join!(
                    read_told(&mut conn, &keys, &consumer, batch),
                    call.invoke::<Vec<String>>(&mut other),
                );
                let (mut told, mut own, mut failed) = match (told, own) {
                    (Ok(told), Ok(own)) => (told, own, None),
                    (Ok(told), Err(e)) => (told, Vec::new(), Some(e.into())),
                    (Err(e), own) => (Vec::new(), own.unwrap_or_default(), Some(e)),
                };
                // Anything read is committed only once every replica has
                // the read too: a failover must not undo it behind SQL.
                if let Some(timeout) = replica_wait
                    && (!told.is_empty() || own.len() > 1)
                    && let Err(e) = on_every_replica(&mut conn, &keys.news, epoch, timeout).await
                {
                    (told, own) = (Vec::new(), Vec::new());
                    failed.get_or_insert(e.into());
                }
                Read {
                    addr,
                    keys,
                    sales,
                    told,
                    own,
                    failed,
                }
            }));
        }
        let (persisted, more_read) = self.answers(reads, wait).await?;
        Ok((persisted, more || more_read))
    }

    /// Commits each read's answer as it comes, one master's at a time, so
    /// a frozen master holds up no other's; waits for answers at most
    /// `wait` (`None`: until every read is answered). A failed read puts
    /// its sales back to be read, and its master to rest if unreachable.
    /// Answers the events persisted and whether more waits.
    async fn answers(&self, reads: &mut Reads, wait: Option<Duration>) -> Result<(usize, bool)> {
        let until = wait.map(|wait| tokio::time::Instant::now() + wait);
        let (mut persisted, mut more, mut failed) = (0, false, None);
        loop {
            let next = match until {
                Some(until) => match tokio::time::timeout_at(until, reads.next()).await {
                    Ok(next) => next,
                    Err(_) => break,
                },
                None => reads.next().await,
            };
            let Some(Read {
                addr,
                keys,
                sales,
                told,
                own,
                failed: read_failed,
            }) = next
            else {
                break;
            };
            self.state().reading.remove(&addr);
            if let Some(e) = read_failed {
                // The round fails with it, and its failures are logged.
                tracing::debug!(master = addr, error = %e, "reading news failed");
                let mut state = self.state();
                state.to_read.extend(sales);
                // A read timed out may yet run: its batches are found by
                // the look for abandoned ones.
                state.claim_all = true;
                if e.is_unreachable() {
                    state
                        .resting
                        .insert(addr, Instant::now() + REST_AFTER_FAILURE);
                    drop(state);
                    // Perhaps a failover: news written just before it may
                    // be gone with the old master.
                    self.masters_changed();
                }
                failed.get_or_insert(e);
            }
            more |= told.iter().any(|(_, e)| e.len() >= self.config.batch)
                || own.first().is_some_and(|m| m == "1");
            match self
                .persist_reply(&keys, Told::new(told), &own[1.min(own.len())..])
                .await
            {
                Ok(n) => persisted += n,
                Err(e) => {
                    tracing::debug!(error = %e, "committing a batch failed");
                    self.state().claim_all = true;
                    failed.get_or_insert(e);
                }
            }
        }
        match failed {
            // Nothing moved: the run loop pauses before the next round.
            Some(e) if persisted == 0 => Err(e),
            _ => Ok((persisted, more)),
        }
    }

    /// Commits one master's batches to SQL in one transaction, then
    /// deletes their records and acknowledges what its ledger `told`:
    /// `pairs` are sale ids and the entries read from their own streams.
    async fn persist_reply(
        &self,
        keys: &MasterKeys,
        told: Told,
        pairs: &[String],
    ) -> Result<usize> {
        let (mut batches, mut entries) = (Vec::new(), Vec::new());
        let mut events = Vec::new();
        for pair in pairs.chunks_exact(2) {
            let (sale, text) = (&pair[0], &pair[1]);
            if let Some(error) = text.strip_prefix('!') {
                // Its slot is moving or moved: read it again, from the
                // master the cluster names once it settled.
                tracing::warn!(sale, error, "reading a sale's orders failed");
                let mut state = self.state();
                state.topology = None;
                state.to_read.insert(sale.clone());
                continue;
            }
            if let Some(first) = Event::decode_lines(sale, text, &mut events) {
                batches.push((sale.clone(), first.to_owned()));
                entries.push((sale.clone(), text.split('\n').count()));
            }
        }
        if entries.is_empty() && told.is_empty() {
            return Ok(0);
        }
        // What came through the ledger has no record in the sale.
        entries.extend(told.sales().map(|(sale, n)| (sale.to_owned(), n)));
        events.extend_from_slice(&told.events);
        let acks = Acks {
            keys,
            told: &told,
            file: true,
        };
        commit(&self.store, &self.conn, &events, &batches, Some(acks)).await?;
        let mut state = self.state();
        for (sale, entries) in entries {
            state.committed(sale, entries);
        }
        Ok(events.len())
    }
}

/// Up to `count` entries of each of the ledgers of `keys` for `consumer`;
/// their groups are made when missing, from their start, so nothing told
/// before is skipped.
async fn read_told(
    conn: &mut Conn,
    keys: &MasterKeys,
    consumer: &str,
    count: usize,
) -> Result<Vec<(String, Vec<StreamEntry>)>> {
    let ledgers = keys.ledgers();
    match read_ledgers(conn, &ledgers, consumer, count).await {
        Err(Error::Redis(e)) if e.code() == Some("NOGROUP") => {
            for ledger in ledgers {
                make_ledger_group(conn, ledger).await?;
            }
            read_ledgers(conn, &ledgers, consumer, count).await
        }
        read => read,
    }
}
