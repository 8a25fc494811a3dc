//! [`Durability`]: when a purchase (and a payment or cancellation, see
//! [`Engine::pay`](crate::Engine::pay)) is acknowledged. Redis replicates
//! asynchronously, so a master that dies right after answering can take a
//! purchase with it when its replica is promoted. With
//! [`Durability::Replica`] a purchase is acknowledged only once every
//! replica that could take over has it (`WAIT n <ms>`, n the replicas the
//! master lists online and heard from lately:
//! [`Replicas::InTouch`]); otherwise the buyer gets an error and
//! retries with the same request id, which answers with the order if it
//! survived.
//!
//! `WAIT` holds the connection's later commands until it answers, and one
//! `WAIT` covers every write the connection sent before it. So the writes
//! of one sale share waits: at most one `WAIT` is in flight per purchaser,
//! and it confirms every purchase that finished before it was sent.
//!
//! A `WAIT` counts only its own connection's writes: one sent after a
//! reconnect, or after the sentinels named a new master, would confirm
//! nothing of what the old connection wrote. So a purchase carries the
//! connection's epoch from before it was sent, and a `WAIT` confirms it
//! only if the epoch stayed the same until the `WAIT` answered.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use seckill_redis::{Conn, Replicas};
use tokio::sync::oneshot;

/// When a purchase, a payment or a cancellation is acknowledged.
///
/// ```no_run
/// # async fn run() -> seckill_engine::Result<()> {
/// use std::time::Duration;
/// use seckill_engine::{Durability, Engine};
/// let engine = Engine::connect("redis://127.0.0.1:6379/")
///     .await?
///     .with_durability(Durability::Replica { timeout: Duration::from_millis(250) });
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// When the master has it (the default; Redis's own guarantee).
    #[default]
    Primary,
    /// When every replica that could take over has it too, confirmed
    /// within `timeout`.
    Replica {
        /// Longest wait for a replica's confirmation.
        timeout: Duration,
    },
}

/// One sale's shared `WAIT`s.
pub(crate) struct ReplicaGate {
    conn: Conn,
    /// A key of the sale: routes the `WAIT` to the sale's master.
    key: String,
    timeout: Duration,
    state: Arc<Mutex<Gate>>,
}

#[derive(Default)]
struct Gate {
    /// Whether a task is sending `WAIT`s now.
    running: bool,
    /// Purchases waiting for the next `WAIT`, each with the connection's
    /// epoch from before it was sent: told whether every replica has them.
    next: Vec<(u64, oneshot::Sender<bool>)>,
}

impl ReplicaGate {
    pub fn new(conn: Conn, key: String, timeout: Duration) -> Self {
        Self {
            conn,
            key,
            timeout,
            state: Arc::default(),
        }
    }

    /// The connection's epoch now: read before a purchase is sent, and
    /// given to [`ReplicaGate::confirm`] after.
    pub fn epoch(&self) -> u64 {
        self.conn.epoch()
    }

    /// Whether every replica has every write this connection made so far,
    /// the purchase sent at `epoch` included; called after the purchase's
    /// answer arrived, so the next `WAIT` sent covers it.
    pub async fn confirm(&self, epoch: u64) -> bool {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut gate = lock(&self.state);
            gate.next.push((epoch, tx));
            !std::mem::replace(&mut gate.running, true)
        };
        if start {
            tokio::spawn(drive(
                self.conn.clone(),
                self.key.clone(),
                self.timeout,
                self.state.clone(),
            ));
        }
        // The driver answers every waiter it took, an error as `false`.
        rx.await.unwrap_or(false)
    }
}

/// Sends `WAIT`s while purchases wait for one, each answering the
/// purchases that registered before it was sent.
async fn drive(mut conn: Conn, key: String, timeout: Duration, state: Arc<Mutex<Gate>>) {
    loop {
        let batch = {
            let mut gate = lock(&state);
            if gate.next.is_empty() {
                gate.running = false;
                return;
            }
            std::mem::take(&mut gate.next)
        };
        let before = conn.epoch();
        let confirmed = conn
            .on_every_replica(key.as_bytes(), before, timeout, Replicas::InTouch)
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "WAIT for a replica failed");
                false
            });
        for (sent_at, waiter) in batch {
            let _ = waiter.send(confirmed && sent_at == before);
        }
    }
}

fn lock(state: &Mutex<Gate>) -> std::sync::MutexGuard<'_, Gate> {
    // Nothing panics while holding it; a poisoned lock holds valid data.
    state.lock().unwrap_or_else(|e| e.into_inner())
}
