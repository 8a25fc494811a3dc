//! [`Semaphore`]: up to N holders at once, each permit leased on its own.
//!
//! Each permit is a member of a sorted set scored by the end of its lease,
//! so a crashed holder's permits return when their leases end, counted by
//! the server's clock, with nothing left to clean up. Waiters queue in
//! arrival order; a release (or a lease that ended) hands permits to the
//! oldest waiters that fit and tells each on the client's notification
//! channel. Pub/sub may lose a message, so a waiter also asks Redis when
//! the first lease would end and at least every
//! [`RECHECK`](crate::RECHECK): no waiter sleeps past a release for longer
//! than that.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::holding::{Holding, LostSignal, Renewable};
use crate::keys::{self, FourKeys};
use crate::lease::{MAX_WAIT, millis, valid_until};
use crate::locks::{DEFAULT_LEASE, Locks, check_lease};
use crate::queue::{OnDrop, Queue, too_many, wait_turn};
use crate::scripts::call;

/// Most permits a semaphore may have.
pub const MAX_PERMITS: u64 = 100_000;

impl Locks {
    /// A semaphore of `permits` permits (1 to [`MAX_PERMITS`]), leased for
    /// [`DEFAULT_LEASE`] without a watchdog unless set; one server or a
    /// cluster (its keys share the name's hash slot), not Redlock.
    pub fn semaphore(&self, name: &str, permits: u64) -> Result<Semaphore> {
        keys::check("semaphore name", name, keys::MAX_NAME_LEN)?;
        check_permits(permits)?;
        if !matches!(self.backend(), Backend::Single(_)) {
            return Err(Error::NotOnRedlock("a semaphore"));
        }
        let base = format!("{}:sem:{{{name}}}", self.prefix());
        Ok(Semaphore {
            locks: self.clone(),
            name: name.to_owned(),
            keys: Arc::new([
                format!("{base}:holders"),
                format!("{base}:queue"),
                format!("{base}:waiters"),
                format!("{base}:limit"),
            ]),
            permits: Arc::new(AtomicU64::new(permits)),
            lease: DEFAULT_LEASE,
            watchdog: false,
        })
    }
}

/// A count of milliseconds from a script, negative as zero.
fn ms(n: i64) -> Duration {
    Duration::from_millis(u64::try_from(n).unwrap_or(0))
}

fn check_permits(n: u64) -> Result<()> {
    if n == 0 || n > MAX_PERMITS {
        return Err(Error::Invalid {
            what: "permits",
            reason: format!("{n} is not within 1..={MAX_PERMITS}"),
        });
    }
    Ok(())
}

/// A named semaphore and how to take it. Clone it freely; clones share
/// the number of permits this client passes.
///
/// ```no_run
/// # async fn run(locks: seckill_lock::Locks) -> seckill_lock::Result<()> {
/// use std::time::Duration;
/// let printers = locks.semaphore("printers", 3)?.lease(Duration::from_secs(5)).watchdog(true);
/// let permits = printers.acquire(1, Duration::from_secs(2)).await?;
/// let mut lost = permits[0].lost();
/// tokio::select! {
///     reason = lost.wait() => eprintln!("permit lost: {reason:?}, stop"),
///     () = tokio::time::sleep(Duration::from_millis(100)) => {}
/// }
/// for permit in permits {
///     permit.release().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    locks: Locks,
    name: String,
    /// holders, queue, waiters, limit: the order every script expects.
    keys: FourKeys,
    permits: Arc<AtomicU64>,
    lease: Duration,
    watchdog: bool,
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name)
            .field("permits", &self.permits())
            .field("lease", &self.lease)
            .field("watchdog", &self.watchdog)
            .finish()
    }
}

impl Semaphore {
    /// How long a permit stays held if its holder disappears.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Renew each permit's lease every third of it while it is held, and
    /// report through [`Permit::lost`] when renewal fails.
    pub fn watchdog(mut self, on: bool) -> Self {
        self.watchdog = on;
        self
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The number of permits this client passes (a number set live with
    /// [`Semaphore::set_permits`] by any client wins while it lasts).
    pub fn permits(&self) -> u64 {
        self.permits.load(Ordering::Relaxed)
    }

    /// Changes the number of permits for every client, live: kept in Redis
    /// while the semaphore has holders or waiters, and at least a lease
    /// long; after that each client's own number applies again. Raising it
    /// hands the new permits to waiters at once; lowering it takes none
    /// back, it only stops new grants until enough are returned, and a
    /// waiter (or a new request) wanting more than the new number is
    /// refused with [`Error::Invalid`]. Answers the permits held now.
    pub async fn set_permits(&self, n: u64) -> Result<u64> {
        check_permits(n)?;
        self.permits.store(n, Ordering::Relaxed);
        let args = [n.to_string(), millis(self.lease).to_string()];
        self.call("sem_set_limit", &args).await
    }

    /// Takes `n` permits if they are free now and nobody waits before.
    pub async fn try_acquire(&self, n: u64) -> Result<Option<Vec<Permit>>> {
        self.check(n)?;
        let token = keys::token();
        let asked = Instant::now();
        let answer = self.take(&token, n, Duration::ZERO).await?;
        let at = |i: usize| answer.get(i).copied().unwrap_or(0);
        if at(0) == -2 {
            return Err(too_many(&self.name, at(1)));
        }
        Ok((at(0) == 1).then(|| self.permits_of(&token, n, asked, ms(at(2)))))
    }

    /// Waits up to `timeout` for `n` permits, in arrival order: a waiter
    /// wanting many is not passed by later ones wanting few.
    pub async fn acquire(&self, n: u64, timeout: Duration) -> Result<Vec<Permit>> {
        self.check(n)?;
        let token = keys::token();
        let mut giving_up = OnDrop::new({
            let semaphore = self.clone();
            let args = [token.clone(), n.to_string(), self.permits().to_string()];
            async move {
                if let Err(e) = semaphore.call::<i64>("sem_withdraw", &args).await {
                    tracing::warn!(semaphore = %semaphore.name, error = %e, "clean-up of an abandoned acquire failed");
                }
            }
        });
        let waiter = Waiter {
            semaphore: self,
            token: &token,
            n,
        };
        let notifier = self.locks.single().notifier();
        let granted = wait_turn(&waiter, notifier, &token, self.lease, timeout.min(MAX_WAIT)).await;
        if !matches!(granted, Err(Error::Redis(_))) {
            giving_up.disarm();
        }
        let granted = granted?;
        Ok(self.permits_of(&token, n, granted.asked, granted.left))
    }

    fn check(&self, n: u64) -> Result<()> {
        check_lease(self.lease)?;
        if n == 0 || n > self.permits() {
            return Err(Error::Invalid {
                what: "permits asked for",
                reason: format!("{n} is not within 1..={}", self.permits()),
            });
        }
        Ok(())
    }

    /// `sem_acquire`: takes `n` permits for `token`, or queues for up to
    /// `wait` (zero: does not queue); batched on one server.
    async fn take(&self, token: &str, n: u64, wait: Duration) -> Result<Vec<i64>> {
        let single = self.locks.single();
        let args = vec![
            token.to_owned(),
            n.to_string(),
            millis(self.lease).to_string(),
            millis(wait).to_string(),
            single.notifier().channel().to_owned(),
            self.permits().to_string(),
        ];
        single
            .batches()
            .sem_acquire
            .ask(self.keys.clone(), args)
            .await
    }

    fn permits_of(&self, token: &str, n: u64, asked: Instant, left: Duration) -> Vec<Permit> {
        let until = valid_until(asked, self.lease, left);
        (1..=n)
            .map(|i| Permit {
                holding: Holding::new(self.clone(), format!("{token}:{i}"), until, self.watchdog),
            })
            .collect()
    }

    async fn call<T: redis::FromRedisValue>(&self, name: &str, args: &[String]) -> Result<T> {
        Ok(call(&mut self.locks.single().conn(), name, &self.keys[..], args).await?)
    }
}

impl Renewable for Semaphore {
    fn name(&self) -> &str {
        &self.name
    }

    fn lease(&self) -> Duration {
        self.lease
    }

    async fn extend(&self, permit: &str, lease: Duration) -> Result<bool> {
        let extended: i64 = self
            .call(
                "sem_extend",
                &[permit.to_owned(), millis(lease).to_string()],
            )
            .await?;
        Ok(extended == 1)
    }

    async fn release(&self, permit: &str) -> Result<bool> {
        let args = vec![permit.to_owned(), self.permits().to_string()];
        let batches = self.locks.single().batches();
        let returned = batches.sem_release.ask(self.keys.clone(), args).await?;
        Ok(returned.first() == Some(&1))
    }
}

/// One permit of a [`Semaphore`], leased on its own. Release it with
/// [`Permit::release`]; a permit dropped instead is released in the
/// background, and one whose holder died returns when its lease ends.
pub struct Permit {
    holding: Holding<Semaphore>,
}

impl Permit {
    /// A signal that fires once this permit is lost.
    pub fn lost(&self) -> LostSignal {
        self.holding.lost()
    }

    /// Whether it is known or presumed lost.
    pub fn is_lost(&self) -> bool {
        self.lost().is_lost()
    }

    /// Resets its lease to `lease` from now. `NotHeld` if it was lost.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        self.holding.extend(lease).await
    }

    /// Returns it, handing it to the oldest waiter that fits. `NotHeld` if
    /// its lease had ended: whatever was done after that was not counted.
    pub async fn release(self) -> Result<()> {
        self.holding.release().await
    }
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permit")
            .field("semaphore", &self.holding.on().name)
            .finish_non_exhaustive()
    }
}

/// One `acquire` of `n` permits waiting its turn.
struct Waiter<'a> {
    semaphore: &'a Semaphore,
    token: &'a str,
    n: u64,
}

impl Queue for Waiter<'_> {
    fn name(&self) -> &str {
        &self.semaphore.name
    }

    async fn enqueue(&self, wait: Duration) -> Result<Vec<i64>> {
        self.semaphore.take(self.token, self.n, wait).await
    }

    async fn poll(&self) -> Result<Vec<i64>> {
        let args = [self.token.to_owned(), self.semaphore.permits().to_string()];
        self.semaphore.call("sem_poll", &args).await
    }

    async fn withdraw(&self) -> Result<()> {
        let args = [
            self.token.to_owned(),
            self.n.to_string(),
            self.semaphore.permits().to_string(),
        ];
        self.semaphore
            .call::<i64>("sem_withdraw", &args)
            .await
            .map(drop)
    }
}
