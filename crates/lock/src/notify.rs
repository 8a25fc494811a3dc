//! Hand-off notifications for waiters in this process.
//!
//! Why pub/sub on one channel per client rather than BLPOP on a signal list:
//! the release script hands the lock straight to the oldest waiter (FIFO, no
//! thundering herd, no newcomer barging in) and only has to *tell* that
//! waiter. A blocking pop would need one dedicated connection per waiting
//! task; one subscription per client serves any number of waiters. Pub/sub is
//! at-most-once, so a waiter never depends on it alone: it also wakes when the
//! holder's lease would end and asks Redis (`poll.lua`), which also covers a
//! holder that died without releasing.
//!
//! On a cluster the channel is classic pub/sub, not sharded: a `PUBLISH`
//! (from a script too) reaches the subscribers of every node, so one
//! subscription per client, on any node, hears the hand-offs of locks in
//! every slot, slot moves and failovers included. Sharded pub/sub would
//! need a subscription per lock name on the master that owns its slot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use seckill_redis::Target;
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

type Waiters = Arc<Mutex<HashMap<String, oneshot::Sender<u64>>>>;

/// Pause between attempts to re-subscribe after the subscription dropped.
const RESUBSCRIBE_DELAY: Duration = Duration::from_millis(100);

/// One subscription per client, routing `token:fence` messages to waiters.
pub(crate) struct Notifier {
    channel: String,
    waiters: Waiters,
    task: AbortHandle,
}

impl Notifier {
    /// Subscribes to `channel` and returns once the subscription is active,
    /// so no hand-off sent after this can be missed while connected.
    pub async fn start(target: Target, channel: String) -> redis::RedisResult<Self> {
        let waiters = Waiters::default();
        let pubsub = subscribe(&target, &channel, 0).await?;
        let task = tokio::spawn(dispatch(target, channel.clone(), pubsub, waiters.clone()));
        Ok(Self {
            channel,
            waiters,
            task: task.abort_handle(),
        })
    }

    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// Registers `token` before it is queued; the receiver gets its fence
    /// when the lock is handed to it. Dropping the returned value unregisters.
    pub fn register(&self, token: &str) -> Registration {
        let (tx, rx) = oneshot::channel();
        lock(&self.waiters).insert(token.to_owned(), tx);
        Registration {
            waiters: self.waiters.clone(),
            token: token.to_owned(),
            rx,
        }
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(crate) struct Registration {
    waiters: Waiters,
    token: String,
    pub rx: oneshot::Receiver<u64>,
}

impl Registration {
    /// A fresh receiver for the same token, after the old one was used up.
    pub fn renew(&mut self) {
        let (tx, rx) = oneshot::channel();
        lock(&self.waiters).insert(self.token.clone(), tx);
        self.rx = rx;
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        lock(&self.waiters).remove(&self.token);
    }
}

fn lock(waiters: &Waiters) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<u64>>> {
    // A panic while holding this lock cannot leave the map inconsistent.
    waiters.lock().unwrap_or_else(|e| e.into_inner())
}

async fn dispatch(
    target: Target,
    channel: String,
    mut pubsub: redis::aio::PubSub,
    waiters: Waiters,
) {
    loop {
        let mut messages = pubsub.into_on_message();
        while let Some(msg) = messages.next().await {
            let Ok(payload) = msg.get_payload::<String>() else {
                continue;
            };
            let Some((token, fence)) = payload.split_once(':') else {
                continue;
            };
            let Ok(fence) = fence.parse() else { continue };
            // Taken out first: the map's guard must not live across the
            // yield below (it would in an `if let` on it).
            let tx = lock(&waiters).remove(token);
            if let Some(tx) = tx {
                let _ = tx.send(fence);
                // The new holder runs before the next message is handed
                // out, so its release leaves while Redis can work on it,
                // not after every buffered hand-off was read (a hot
                // semaphore shared by 32 tasks: 1.3 to 1.5 times the ops/s).
                tokio::task::yield_now().await;
            }
        }
        // Disconnected: waiters fall back to their lease timers until we are back.
        let mut attempt = 0;
        pubsub = loop {
            tokio::time::sleep(RESUBSCRIBE_DELAY).await;
            attempt += 1;
            match subscribe(&target, &channel, attempt).await {
                Ok(p) => break p,
                Err(e) => tracing::debug!(error = %e, "lock notifications: re-subscribe failed"),
            }
        };
    }
}

/// Subscribes on the server, or on a cluster on the `attempt`-th seed node
/// (the next one answers when this one is down).
async fn subscribe(
    target: &Target,
    channel: &str,
    attempt: usize,
) -> redis::RedisResult<redis::aio::PubSub> {
    let client = target.pubsub_client(attempt).await?;
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(channel).await?;
    Ok(pubsub)
}
