//! [`RwLock`]: many readers or one writer, writers first.
//!
//! A reader enters only when no writer holds the lock and nobody waits:
//! a writer that waits stops new readers, so a steady stream of readers
//! cannot starve it; the readers already in finish their leases (or
//! release) and the writer goes next. Waiters are served in arrival
//! order, a run of readers together. Every grant, read or write, carries a
//! fence above every earlier one's, and each has its lease, watchdog and
//! lost signal, as a [`Guard`](crate::Guard) does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::holding::{Holding, LostSignal, Renewable};
use crate::keys;
use crate::lease::{MAX_WAIT, millis, valid_until};
use crate::locks::{DEFAULT_LEASE, Locks, check_lease};
use crate::queue::{OnDrop, Queue, wait_turn};
use crate::scripts::call;

impl Locks {
    /// A read-write lock, leased for [`DEFAULT_LEASE`] without a watchdog
    /// unless set; one server or a cluster (its keys share the name's hash
    /// slot), not Redlock.
    pub fn rwlock(&self, name: &str) -> Result<RwLock> {
        keys::check("read-write lock name", name, keys::MAX_NAME_LEN)?;
        if !matches!(self.backend(), Backend::Single(_)) {
            return Err(Error::NotOnRedlock("a read-write lock"));
        }
        let base = format!("{}:rw:{{{name}}}", self.prefix());
        Ok(RwLock {
            locks: self.clone(),
            name: name.to_owned(),
            keys: Arc::new([
                format!("{base}:readers"),
                format!("{base}:writer"),
                format!("{base}:fence"),
                format!("{base}:queue"),
                format!("{base}:waiters"),
                format!("{base}:granted"),
            ]),
            lease: DEFAULT_LEASE,
            watchdog: false,
        })
    }
}

/// Reading or writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Shared with other readers.
    Read,
    /// Alone.
    Write,
}

impl Access {
    fn arg(self) -> &'static str {
        match self {
            Self::Read => "r",
            Self::Write => "w",
        }
    }
}

/// A named read-write lock and how to take it. Clone it freely.
///
/// ```no_run
/// # async fn run(locks: seckill_lock::Locks) -> seckill_lock::Result<()> {
/// use std::time::Duration;
/// let catalog = locks.rwlock("catalog")?.lease(Duration::from_secs(5));
/// let reading = catalog.read(Duration::from_secs(1)).await?;
/// // ... read, passing reading.fence() along ...
/// reading.release().await?;
/// let writing = catalog.write(Duration::from_secs(1)).await?;
/// // ... write, fenced by writing.fence() ...
/// writing.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RwLock {
    locks: Locks,
    name: String,
    /// readers, writer, fence, queue, waiters, granted: the order every
    /// script expects.
    keys: Arc<[String; 6]>,
    lease: Duration,
    watchdog: bool,
}

impl std::fmt::Debug for RwLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RwLock")
            .field("name", &self.name)
            .field("lease", &self.lease)
            .field("watchdog", &self.watchdog)
            .finish()
    }
}

impl RwLock {
    /// How long a grant stays held if its holder disappears.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Renew each grant's lease every third of it while it is held, and
    /// report through [`RwGuard::lost`] when renewal fails.
    pub fn watchdog(mut self, on: bool) -> Self {
        self.watchdog = on;
        self
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Reads if no writer holds the lock and nobody waits; `Ok(None)` else.
    pub async fn try_read(&self) -> Result<Option<RwGuard>> {
        self.try_take(Access::Read).await
    }

    /// Writes if nobody holds the lock or waits; `Ok(None)` else.
    pub async fn try_write(&self) -> Result<Option<RwGuard>> {
        self.try_take(Access::Write).await
    }

    /// Waits up to `timeout` to read.
    pub async fn read(&self, timeout: Duration) -> Result<RwGuard> {
        self.take(Access::Read, timeout).await
    }

    /// Waits up to `timeout` to write; new readers wait behind it.
    pub async fn write(&self, timeout: Duration) -> Result<RwGuard> {
        self.take(Access::Write, timeout).await
    }

    async fn try_take(&self, access: Access) -> Result<Option<RwGuard>> {
        check_lease(self.lease)?;
        let token = keys::token();
        let asked = Instant::now();
        let waiter = Waiter {
            lock: self,
            token: &token,
            access,
        };
        let answer = waiter.enqueue(Duration::ZERO).await?;
        if answer.first() != Some(&1) {
            return Ok(None);
        }
        let fence = u64::try_from(answer[1]).unwrap_or(0);
        let left = Duration::from_millis(u64::try_from(answer[2]).unwrap_or(0));
        Ok(Some(self.guard(
            &token,
            access,
            fence,
            valid_until(asked, self.lease, left),
        )))
    }

    async fn take(&self, access: Access, timeout: Duration) -> Result<RwGuard> {
        check_lease(self.lease)?;
        let token = keys::token();
        let waiter = Waiter {
            lock: self,
            token: &token,
            access,
        };
        let mut giving_up = OnDrop::new({
            let (lock, token) = (self.clone(), token.clone());
            async move {
                let args = [token.as_str(), access.arg()];
                if let Err(e) = lock.call::<i64>("rw_withdraw", &args).await {
                    tracing::warn!(lock = %lock.name, error = %e, "clean-up of an abandoned acquire failed");
                }
            }
        });
        let notifier = self.locks.single().notifier();
        let granted = wait_turn(&waiter, notifier, &token, self.lease, timeout.min(MAX_WAIT)).await;
        if !matches!(granted, Err(Error::Redis(_))) {
            giving_up.disarm();
        }
        let granted = granted?;
        let until = valid_until(granted.asked, self.lease, granted.left);
        Ok(self.guard(&token, access, granted.fence, until))
    }

    fn guard(&self, token: &str, access: Access, fence: u64, until: Instant) -> RwGuard {
        let side = Side {
            lock: self.clone(),
            access,
        };
        RwGuard {
            holding: Holding::new(side, format!("{token}:{fence}"), until, self.watchdog),
            access,
            fence,
        }
    }

    async fn call<T: redis::FromRedisValue>(&self, name: &str, args: &[&str]) -> Result<T> {
        Ok(call(&mut self.locks.single().conn(), name, &self.keys[..], args).await?)
    }
}

/// One side of a read-write lock: what a grant renews and releases on.
#[derive(Clone)]
struct Side {
    lock: RwLock,
    access: Access,
}

impl Renewable for Side {
    fn name(&self) -> &str {
        &self.lock.name
    }

    fn lease(&self) -> Duration {
        self.lock.lease
    }

    async fn extend(&self, id: &str, lease: Duration) -> Result<bool> {
        let lease = millis(lease).to_string();
        let args = [id, self.access.arg(), &lease];
        Ok(self.lock.call::<i64>("rw_extend", &args).await? == 1)
    }

    async fn release(&self, id: &str) -> Result<bool> {
        let args = [id, self.access.arg()];
        Ok(self.lock.call::<i64>("rw_release", &args).await? == 1)
    }
}

/// A held read or write grant of an [`RwLock`]. Release it with
/// [`RwGuard::release`]; one dropped instead is released in the background.
pub struct RwGuard {
    holding: Holding<Side>,
    access: Access,
    fence: u64,
}

impl RwGuard {
    /// Reading or writing.
    pub fn access(&self) -> Access {
        self.access
    }

    /// The fencing token of this grant: above every earlier grant's of the
    /// same lock, read or write. Let the resource refuse a write carrying
    /// one below the last it saw.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// A signal that fires once the grant is lost.
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

    /// Releases it, handing the lock on. `NotHeld` if its lease had ended.
    pub async fn release(self) -> Result<()> {
        self.holding.release().await
    }
}

impl std::fmt::Debug for RwGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RwGuard")
            .field("name", &self.holding.on().lock.name)
            .field("access", &self.access)
            .field("fence", &self.fence)
            .finish_non_exhaustive()
    }
}

/// One `read` or `write` waiting its turn.
struct Waiter<'a> {
    lock: &'a RwLock,
    token: &'a str,
    access: Access,
}

impl Queue for Waiter<'_> {
    fn name(&self) -> &str {
        &self.lock.name
    }

    async fn enqueue(&self, wait: Duration) -> Result<Vec<i64>> {
        let single = self.lock.locks.single();
        let args = vec![
            self.token.to_owned(),
            self.access.arg().to_owned(),
            millis(self.lock.lease).to_string(),
            millis(wait).to_string(),
            single.notifier().channel().to_owned(),
        ];
        single
            .batches()
            .rw_acquire
            .ask(self.lock.keys.clone(), args)
            .await
    }

    async fn poll(&self) -> Result<Vec<i64>> {
        self.lock
            .call("rw_poll", &[self.token, self.access.arg()])
            .await
    }

    async fn withdraw(&self) -> Result<()> {
        let args = [self.token, self.access.arg()];
        self.lock.call::<i64>("rw_withdraw", &args).await.map(drop)
    }
}
