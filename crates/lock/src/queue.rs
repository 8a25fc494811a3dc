//! Waiting in a queue kept by scripts, for the semaphore and the
//! read-write lock: ask to be queued, then wait for the hand-off's message
//! or the next re-check, whichever comes first, and ask again.
//!
//! Every queue script answers alike: `{1, fence, ms left of the lease}`
//! when granted, `{0, ms until a holder's lease ends or -1}` while
//! waiting, `{-1, 0}` when the waiter is neither queued nor holding (its
//! deadline passed by the server's clock before ours), and the
//! semaphore's `{-2, permits}` when it asks for more than that many, the
//! number set live.

use std::pin::Pin;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::notify::Notifier;

/// Longest a waiter sleeps without asking Redis, whatever it was told:
/// a lost hand-off message costs it this much at most.
pub const RECHECK: Duration = Duration::from_millis(250);

/// What a queue's scripts do for one waiter.
pub(crate) trait Queue {
    /// The name, for errors.
    fn name(&self) -> &str;
    /// Queues the waiter for `wait` (or grants at once).
    fn enqueue(&self, wait: Duration) -> impl Future<Output = Result<Vec<i64>>> + Send;
    /// Asks whether it was granted (handing on what ended meanwhile).
    fn poll(&self) -> impl Future<Output = Result<Vec<i64>>> + Send;
    /// Leaves the queue, returning a grant made meanwhile.
    fn withdraw(&self) -> impl Future<Output = Result<()>> + Send;
}

/// A grant: its fence, when it was asked for and how much of its lease
/// was left then.
pub(crate) struct Granted {
    pub fence: u64,
    pub asked: Instant,
    pub left: Duration,
}

/// Waits up to `timeout` for `token`'s turn in `queue`, told by `notifier`.
pub(crate) async fn wait_turn(
    queue: &impl Queue,
    notifier: &Notifier,
    token: &str,
    lease: Duration,
    timeout: Duration,
) -> Result<Granted> {
    let started = Instant::now();
    let deadline = started + timeout;
    let mut registration = notifier.register(token);
    let mut asked = Instant::now();
    let mut answer = queue.enqueue(timeout).await?;
    loop {
        let at = |answer: &[i64], i: usize| answer.get(i).copied().unwrap_or(0);
        match at(&answer, 0) {
            1 => {
                return Ok(Granted {
                    fence: u64::try_from(at(&answer, 1)).unwrap_or(0),
                    asked,
                    left: Duration::from_millis(u64::try_from(at(&answer, 2)).unwrap_or(0)),
                });
            }
            -1 => {
                let left = deadline.saturating_duration_since(Instant::now());
                asked = Instant::now();
                answer = queue.enqueue(left).await?;
                if matches!(answer.first(), Some(&1 | &-2)) || left.is_zero() {
                    continue;
                }
            }
            -2 => return Err(too_many(queue.name(), at(&answer, 1))),
            _ => {}
        }
        let now = Instant::now();
        if now >= deadline {
            queue.withdraw().await?;
            return Err(Error::Timeout {
                name: queue.name().to_owned(),
                waited: started.elapsed(),
            });
        }
        let lease_end = u64::try_from(at(&answer, 1)).map(Duration::from_millis);
        let nap = lease_end
            .unwrap_or(RECHECK)
            .min(RECHECK)
            .min(deadline - now);
        tokio::select! {
            told = &mut registration.rx => match told {
                // The hand-off granted it as it sent this: the lease
                // began a moment ago.
                Ok(fence) => {
                    return Ok(Granted { fence, asked: Instant::now(), left: lease });
                }
                Err(_) => registration.renew(),
            },
            () = tokio::time::sleep(nap) => {}
        }
        asked = Instant::now();
        answer = queue.poll().await?;
    }
}

/// The refusal of a waiter that asks a semaphore named `name` for more
/// than the `permits` set live.
pub(crate) fn too_many(name: &str, permits: i64) -> Error {
    Error::Invalid {
        what: "permits asked for",
        reason: format!("more than the {permits} semaphore {name} has now"),
    }
}

/// A clean-up run in the background if dropped while armed: for an
/// acquire cut short (its future dropped, or a Redis error), which may
/// have left a queue entry, or a grant nobody will use.
pub(crate) struct OnDrop(Option<Pin<Box<dyn Future<Output = ()> + Send>>>);

impl OnDrop {
    pub fn new(clean_up: impl Future<Output = ()> + Send + 'static) -> Self {
        Self(Some(Box::pin(clean_up)))
    }

    /// Nothing to clean up: the acquire ended cleanly.
    pub fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let (Some(clean_up), Ok(runtime)) =
            (self.0.take(), tokio::runtime::Handle::try_current())
        {
            runtime.spawn(clean_up);
        }
    }
}
