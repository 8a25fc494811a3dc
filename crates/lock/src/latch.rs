//! [`Latch`]: a count-down latch shared by every client of a name. Workers
//! count down; waiters wake when the count reaches zero, told by the last
//! count-down on each waiter's client channel, and asking Redis at least
//! every [`RECHECK`](crate::RECHECK) in case that message was lost.

use std::time::{Duration, Instant};

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::keys;
use crate::lease::{MAX_WAIT, millis};
use crate::locks::{DEFAULT_LEASE, Locks, check_lease};
use crate::queue::RECHECK;
use crate::scripts::call;

impl Locks {
    /// A count-down latch: set its count with [`Latch::try_set_count`],
    /// count down from anywhere, wait until it reaches zero. One server or
    /// a cluster, not Redlock.
    pub fn latch(&self, name: &str) -> Result<Latch> {
        keys::check("latch name", name, keys::MAX_NAME_LEN)?;
        if !matches!(self.backend(), Backend::Single(_)) {
            return Err(Error::NotOnRedlock("a latch"));
        }
        let base = format!("{}:latch:{{{name}}}", self.prefix());
        Ok(Latch {
            locks: self.clone(),
            name: name.to_owned(),
            keys: [
                format!("{base}:count"),
                format!("{base}:waiters"),
                format!("{base}:counted"),
            ],
            lease: DEFAULT_LEASE,
        })
    }
}

/// A named count-down latch. An open latch (its count reached zero, or it
/// was never set) lets every waiter through; a count nobody finishes lasts
/// at most its lease, then the latch is open.
///
/// ```no_run
/// # async fn run(locks: seckill_lock::Locks) -> seckill_lock::Result<()> {
/// use std::time::Duration;
/// let warmed = locks.latch("cache-warm")?.lease(Duration::from_secs(60));
/// warmed.try_set_count(3).await?;
/// // ... in each of three workers:
/// warmed.count_down().await?;
/// // ... where the sale opens:
/// warmed.wait(Duration::from_secs(30)).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Latch {
    locks: Locks,
    name: String,
    /// count, waiters, counted: the order every script expects.
    keys: [String; 3],
    lease: Duration,
}

impl std::fmt::Debug for Latch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Latch")
            .field("name", &self.name)
            .field("lease", &self.lease)
            .finish()
    }
}

impl Latch {
    /// How long a count lasts if it never reaches zero.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// The latch's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the count to `n` if the latch is open: true, else false (a
    /// count is running; it is left as it is).
    pub async fn try_set_count(&self, n: u64) -> Result<bool> {
        if n == 0 {
            return Err(Error::Invalid {
                what: "count",
                reason: "must be at least 1".to_owned(),
            });
        }
        check_lease(self.lease)?;
        let set: i64 = self
            .call(
                "latch_set",
                &[&n.to_string(), &millis(self.lease).to_string()],
            )
            .await?;
        Ok(set == 1)
    }

    /// Counts down by one; answers what is left (0: it opened, or was).
    pub async fn count_down(&self) -> Result<u64> {
        // A cluster's client may send it twice (Conn::may_resend): a token
        // has it counted once.
        let token = if self.locks.single().conn().may_resend() {
            keys::token()
        } else {
            String::new()
        };
        let left: i64 = self.call("latch_count_down", &[&token]).await?;
        Ok(u64::try_from(left).unwrap_or(0))
    }

    /// What is left to count down now (0 when open).
    pub async fn count(&self) -> Result<u64> {
        let left: Option<u64> = redis::cmd("GET")
            .arg(&self.keys[0])
            .query_async(&mut self.locks.single().conn())
            .await?;
        Ok(left.unwrap_or(0))
    }

    /// Waits until the latch is open, up to `timeout`.
    pub async fn wait(&self, timeout: Duration) -> Result<()> {
        let started = Instant::now();
        let deadline = started + timeout.min(MAX_WAIT);
        let token = keys::token();
        let single = self.locks.single();
        let mut registration = single.notifier().register(&token);
        let wait = millis(timeout.min(MAX_WAIT)).max(1).to_string();
        let channel = single.notifier().channel();
        let mut open: i64 = self.call("latch_wait", &[&token, channel, &wait]).await?;
        while open != 1 {
            let now = Instant::now();
            if now >= deadline {
                let _: i64 = self.call("latch_withdraw", &[&token]).await?;
                return Err(Error::Timeout {
                    name: self.name.clone(),
                    waited: started.elapsed(),
                });
            }
            tokio::select! {
                told = &mut registration.rx => {
                    if told.is_ok() {
                        return Ok(());
                    }
                    registration.renew();
                }
                () = tokio::time::sleep(RECHECK.min(deadline - now)) => {}
            }
            open = self.call("latch_wait", &[&token, channel, "0"]).await?;
        }
        Ok(())
    }

    async fn call<T: redis::FromRedisValue>(&self, name: &str, args: &[&str]) -> Result<T> {
        Ok(call(&mut self.locks.single().conn(), name, &self.keys, args).await?)
    }
}
