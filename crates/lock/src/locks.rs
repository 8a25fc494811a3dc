//! The entry points: [`Locks`] (a connection to one server or to a Redlock
//! set of masters) and [`Lock`] (one named lock with its settings).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use seckill_redis::Target;

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::keys::{self, DEFAULT_PREFIX, Keys};
use crate::rate::{Rate, RateLimiter, RateLimits};
use crate::redlock::Quorum;
use crate::single::Single;

/// Lease given to a lock unless [`Lock::lease`] says otherwise.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);
/// Shortest lease accepted: below this, clock drift and round trips eat it.
pub const MIN_LEASE: Duration = Duration::from_millis(10);
/// Longest lease accepted (a day): a longer one wants a watchdog instead.
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 3600);

/// A handle to the lock service: cheap to clone, share it across tasks.
///
/// One server or a Redis Cluster, as a [`Target`] says: on a cluster a
/// lock's keys share a hash tag, so each lock lives on one master and its
/// scripts run there; hand-off notifications reach waiters on any node.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// let redis = seckill_redis::Target::server("redis://127.0.0.1:6379/");
/// let locks = seckill_lock::Locks::new(&redis).await?;
/// let lock = locks.lock("order:42")?.lease(Duration::from_secs(5));
/// let guard = lock.acquire(Duration::from_secs(2)).await?;
/// println!("fence {}", guard.fence());
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Locks {
    shared: Arc<Shared>,
}

struct Shared {
    prefix: String,
    backend: Backend,
    /// The rate limiters, made by the first that is asked for: a `Locks`
    /// that never limits a rate starts no batching task.
    rates: OnceLock<RateLimits>,
}

impl std::fmt::Debug for Locks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = match self.shared.backend {
            Backend::Single(_) => "single server",
            Backend::Quorum(_) => "redlock",
        };
        f.debug_struct("Locks")
            .field("prefix", &self.shared.prefix)
            .field("backend", &backend)
            .finish()
    }
}

impl Locks {
    /// Locks on `redis` (a server or a cluster), with the default prefix.
    /// Connects now (a connection and a subscription).
    pub async fn new(redis: &Target) -> Result<Self> {
        Self::builder().connect(redis).await
    }

    /// Settings other than the defaults.
    pub fn builder() -> LocksBuilder {
        LocksBuilder {
            prefix: DEFAULT_PREFIX.to_owned(),
            node_timeout: Duration::from_millis(50),
        }
    }

    /// A named lock, leased for [`DEFAULT_LEASE`] without a watchdog.
    /// Names are 1–512 bytes without braces, `|`, spaces or control characters.
    pub fn lock(&self, name: &str) -> Result<Lock> {
        Ok(Lock {
            locks: self.clone(),
            keys: Arc::new(Keys::new(&self.shared.prefix, name)?),
            lease: DEFAULT_LEASE,
            watchdog: false,
        })
    }

    /// A rate limiter shared by every client of `name` (GCRA: at most
    /// `burst + rate × t` cells in any window of length `t`); one server
    /// or a cluster, not Redlock. The first one asked for on one server
    /// starts the task (on the current tokio runtime) that batches their
    /// decisions.
    pub fn rate_limiter(&self, name: &str, rate: Rate) -> Result<RateLimiter> {
        let Backend::Single(single) = &self.shared.backend else {
            return Err(Error::NotOnRedlock("a rate limiter"));
        };
        let rates = self
            .shared
            .rates
            .get_or_init(|| RateLimits::new(single.conn(), &self.shared.prefix));
        rates.limiter(name, rate)
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.shared.prefix
    }

    /// The one-server backend of a semaphore, read-write lock or latch;
    /// those refuse Redlock when they are made.
    pub(crate) fn single(&self) -> &Single {
        match &self.shared.backend {
            Backend::Single(single) => single,
            Backend::Quorum(_) => unreachable!("refused on Redlock when it was made"),
        }
    }

    pub(crate) fn backend(&self) -> &Backend {
        &self.shared.backend
    }
}

/// `lease` if it is within [`MIN_LEASE`]..=[`MAX_LEASE`], else why not.
pub(crate) fn check_lease(lease: Duration) -> Result<()> {
    if lease < MIN_LEASE || lease > MAX_LEASE {
        return Err(Error::Invalid {
            what: "lease",
            reason: format!("{lease:?} is not within {MIN_LEASE:?}..={MAX_LEASE:?}"),
        });
    }
    Ok(())
}

/// Builds a [`Locks`]: `Locks::builder().prefix("shop:lock").connect(&redis)`.
#[derive(Clone, Debug)]
pub struct LocksBuilder {
    prefix: String,
    node_timeout: Duration,
}

impl LocksBuilder {
    /// Prefix of every key (default [`DEFAULT_PREFIX`]).
    pub fn prefix(mut self, prefix: &str) -> Self {
        prefix.clone_into(&mut self.prefix);
        self
    }

    /// Redlock: how long one master may take to answer (default 50 ms).
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    /// Locks on `redis`: one server, or a cluster (each lock's keys share
    /// a hash tag, so a lock lives on one master).
    pub async fn connect(self, redis: &Target) -> Result<Locks> {
        keys::check("prefix", &self.prefix, 256)?;
        let channel = format!("{}:notify:{}", self.prefix, keys::token());
        let backend = Backend::Single(Single::connect(redis, channel).await?);
        Ok(self.build(backend))
    }

    /// Redlock over independent masters, one client each (an odd number,
    /// normally 3 or 5). Masters that are down now are retried on every call.
    pub fn redlock(self, clients: Vec<redis::Client>) -> Result<Locks> {
        keys::check("prefix", &self.prefix, 256)?;
        if clients.is_empty() {
            return Err(Error::Invalid {
                what: "redlock masters",
                reason: "at least one is needed".to_owned(),
            });
        }
        let quorum = Quorum::new(clients, self.node_timeout);
        Ok(self.build(Backend::Quorum(quorum)))
    }

    fn build(self, backend: Backend) -> Locks {
        Locks {
            shared: Arc::new(Shared {
                rates: OnceLock::new(),
                prefix: self.prefix,
                backend,
            }),
        }
    }
}

/// One named lock and how to take it. Clone it freely.
#[derive(Clone, Debug)]
pub struct Lock {
    pub(crate) locks: Locks,
    pub(crate) keys: Arc<Keys>,
    pub(crate) lease: Duration,
    pub(crate) watchdog: bool,
}

impl Lock {
    /// How long the lock stays held if its holder disappears.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Renew the lease every third of it while the guard lives, and report
    /// through [`Guard::lost`](crate::Guard::lost) when renewal fails.
    pub fn watchdog(mut self, on: bool) -> Self {
        self.watchdog = on;
        self
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.keys.name
    }

    /// Makes every fence handed out from now on greater than `floor`: for
    /// data a holder wrote with its fence that outlived the lock's counter
    /// (a Redis that lost the counter, data rebuilt from elsewhere), so the
    /// next holder's fence is not refused there.
    ///
    /// ```no_run
    /// # async fn run(locks: seckill_lock::Locks) -> seckill_lock::Result<()> {
    /// let lock = locks.lock("refill:drop-1")?;
    /// lock.fence_at_least(41).await?;
    /// let guard = lock.try_acquire().await?.expect("free");
    /// assert!(guard.fence() > 41);
    /// # Ok(()) }
    /// ```
    pub async fn fence_at_least(&self, floor: u64) -> Result<()> {
        self.locks.backend().raise_fence(&self.keys, floor).await
    }
}
