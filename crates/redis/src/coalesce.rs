//! [`Coalescer`]: concurrent requests of one process ride one call.
//!
//! Without a `max_wait`, a request that finds no call out and nothing
//! queued is sent at once, by its caller, as a batch of one: alone, it pays
//! no hop to a worker. Otherwise it queues; a worker takes whatever is
//! queued (up to `max_batch`, waiting at most `max_wait` for more) and
//! hands the batch to the sender, which makes one call of it and answers
//! each request. Up to `max_in_flight` calls are out at once, so batching
//! never leaves the connection idle, and while they are the next batch
//! grows. What a batch shares (one `FCALL`, one
//! read of a hot key) is where the speed comes from. A batch's answers go
//! out in rounds, its callers running between them, so their next
//! requests reach Redis while the rest are answered (`ANSWER_ROUND`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::settings::RESPONSE_TIMEOUT;

/// Answers handed out before the callers that got them run. Their next
/// requests then leave while the rest of the batch is still being
/// answered, and Redis works on them meanwhile, where, with a whole batch
/// answered first, Redis and this process would take turns, each idle
/// while the other works: `lock-bench --connections shared --mode spread`
/// and `bench --strategy coalesced` ran 1.3 to 2 times as many operations
/// a second, at less CPU per operation, with rounds of 8 than with none
/// (rounds of 2 and 4 fell between).
const ANSWER_ROUND: usize = 8;

/// Batching bounds of a [`Coalescer`].
#[derive(Clone, Copy, Debug)]
pub struct CoalescerConfig {
    /// Most requests in one call (cut to what the user of the coalescer
    /// can send at once).
    pub max_batch: usize,
    /// Longest the first request of a batch waits for company. Zero: send
    /// what is queued at once (batches still form while others are in flight).
    pub max_wait: Duration,
    /// Batches on the wire at once.
    pub max_in_flight: usize,
}

impl Default for CoalescerConfig {
    fn default() -> Self {
        Self {
            max_batch: 256,
            max_wait: Duration::ZERO,
            max_in_flight: 4,
        }
    }
}

type Job<Q, A> = (Q, oneshot::Sender<A>);

/// The sender given to [`Coalescer::start`], boxed.
type Sender<Q, A> = dyn Fn(Vec<Q>) -> Pin<Box<dyn Future<Output = Vec<A>> + Send>> + Send + Sync;

/// Requests of type `Q` answered with an `A` each, sent in batches by the
/// function given to [`Coalescer::start`]. Clones share the queue; the
/// worker ends when every clone is dropped and the queue is drained.
///
/// ```
/// # #[tokio::main] async fn main() {
/// use seckill_redis::{Coalescer, CoalescerConfig};
/// // Each batch: one call that answers every request in order.
/// let doubler = Coalescer::start(CoalescerConfig::default(), 1_000, |batch: Vec<u64>| async move {
///     batch.into_iter().map(|n| n * 2).collect()
/// });
/// let asks: Vec<_> = (0..100).map(|n| { let d = doubler.clone(); tokio::spawn(async move { d.ask(n).await }) }).collect();
/// for (n, ask) in asks.into_iter().enumerate() {
///     assert_eq!(ask.await.unwrap(), Some(2 * n as u64));
/// }
/// # }
/// ```
pub struct Coalescer<Q, A> {
    tx: mpsc::Sender<Job<Q, A>>,
    /// Calls out: a permit each, `max_in_flight` in all.
    slots: Arc<Semaphore>,
    most_in_flight: usize,
    /// Whether a lone request may skip the queue (no `max_wait` to honour).
    direct: bool,
    send: Arc<Sender<Q, A>>,
}

impl<Q, A> Clone for Coalescer<Q, A> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
            slots: self.slots.clone(),
            most_in_flight: self.most_in_flight,
            direct: self.direct,
            send: self.send.clone(),
        }
    }
}

impl<Q, A> std::fmt::Debug for Coalescer<Q, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coalescer")
            .field("queued", &(self.tx.max_capacity() - self.tx.capacity()))
            .finish()
    }
}

impl<Q: Send + 'static, A: Send + 'static> Coalescer<Q, A> {
    /// Starts the worker (on the current tokio runtime). `send` gets each
    /// batch, at most `config.max_batch` and never more than `most`
    /// requests, and answers them in order; a request it leaves without an
    /// answer gets `None` from [`Coalescer::ask`].
    pub fn start<F, Fut>(config: CoalescerConfig, most: usize, send: F) -> Self
    where
        F: Fn(Vec<Q>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<A>> + Send + 'static,
    {
        let config = CoalescerConfig {
            max_batch: config.max_batch.clamp(1, most.max(1)),
            max_in_flight: config.max_in_flight.max(1),
            ..config
        };
        let (tx, rx) = mpsc::channel(config.max_batch * config.max_in_flight * 4);
        let slots = Arc::new(Semaphore::new(config.max_in_flight));
        let send: Arc<Sender<Q, A>> = Arc::new(move |batch| Box::pin(send(batch)));
        tokio::spawn(gather(config, rx, slots.clone(), send.clone()));
        Self {
            tx,
            slots,
            most_in_flight: config.max_in_flight,
            direct: config.max_wait.is_zero(),
            send,
        }
    }

    /// Queues `request` for the next batch and waits for its answer. It
    /// waits no longer than one Redis call may take, sent alone or queued
    /// behind batches that hang on a frozen master: it answers `None` then
    /// (a queued request is dropped unsent), so no caller waits for two
    /// timeouts in a row. `None` too once the worker is gone.
    pub async fn ask(&self, request: Q) -> Option<A> {
        let answer = async {
            if self.direct
                && self.tx.capacity() == self.tx.max_capacity()
                && self.slots.available_permits() == self.most_in_flight
                && let Ok(slot) = self.slots.clone().try_acquire_owned()
            {
                let answer = (self.send)(vec![request]).await.into_iter().next();
                drop(slot);
                return answer;
            }
            let (reply, answer) = oneshot::channel();
            self.tx.send((request, reply)).await.ok()?;
            answer.await.ok()
        };
        tokio::time::timeout(RESPONSE_TIMEOUT, answer)
            .await
            .ok()
            .flatten()
    }
}

async fn gather<Q: Send + 'static, A: Send + 'static>(
    config: CoalescerConfig,
    mut rx: mpsc::Receiver<Job<Q, A>>,
    slots: Arc<Semaphore>,
    send: Arc<Sender<Q, A>>,
) {
    while let Some(first) = rx.recv().await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut batch = vec![first];
        // Everything that queued while we waited for a slot joins this batch.
        while batch.len() < config.max_batch {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        if batch.len() < config.max_batch && !config.max_wait.is_zero() {
            let deadline = tokio::time::Instant::now() + config.max_wait;
            while batch.len() < config.max_batch {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(job)) => batch.push(job),
                    _ => break,
                }
            }
        }
        // Requests whose caller stopped waiting are not sent at all.
        batch.retain(|(_, reply)| !reply.is_closed());
        if batch.is_empty() {
            continue;
        }
        let (requests, replies): (Vec<Q>, Vec<oneshot::Sender<A>>) = batch.into_iter().unzip();
        let answers = send(requests);
        tokio::spawn(async move {
            for (i, (reply, answer)) in replies.into_iter().zip(answers.await).enumerate() {
                let _ = reply.send(answer);
                if i % ANSWER_ROUND == ANSWER_ROUND - 1 {
                    tokio::task::yield_now().await;
                }
            }
            drop(slot);
        });
    }
}
