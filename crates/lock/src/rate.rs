//! [`RateLimiter`]: a rate and a burst shared by every client of one name,
//! decided by GCRA (the generic cell rate algorithm) in one function call
//! per decision.
//!
//! GCRA keeps one number per limiter: the theoretical arrival time (TAT),
//! when the limiter would be full again. A request for `n` cells is
//! admitted if the TAT after it is at most `burst` intervals ahead of now.
//! Where a fixed window admits twice the rate across a window's edge and a
//! bucket refilled by a timer drifts or stops with the timer, GCRA admits
//! at most `burst + rate × t` cells in any window of length `t`, with
//! nothing running between decisions. Its key expires when the TAT passes,
//! so an idle limiter keeps nothing in Redis.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use seckill_redis::Conn;

use crate::error::{Error, Result};
use crate::keys;
use crate::scripts::call;

/// A rate and a burst: `per_second` cells a second on average, and up to
/// `burst` at once from idle.
///
/// ```
/// let rate = seckill_lock::Rate::per_second(100.0).burst(20);
/// assert_eq!(rate.interval(), std::time::Duration::from_millis(10));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    per_second: f64,
    burst: u64,
}

impl Rate {
    /// `n` cells a second, with a burst of 1 unless [`Rate::burst`] says more.
    pub fn per_second(n: f64) -> Self {
        Self {
            per_second: n,
            burst: 1,
        }
    }

    /// Up to `n` cells at once from idle.
    pub fn burst(mut self, n: u64) -> Self {
        self.burst = n;
        self
    }

    /// The time one cell is worth: `1 / rate`.
    pub fn interval(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.per_second)
    }

    fn check(&self) -> Result<()> {
        let invalid = |reason: &str| Error::Invalid {
            what: "rate",
            reason: reason.to_owned(),
        };
        if !(self.per_second.is_finite() && self.per_second > 0.0 && self.per_second <= 1e6) {
            return Err(invalid(
                "cells a second must be above 0 and at most 1,000,000",
            ));
        }
        if self.burst == 0 || self.burst > 1_000_000_000 {
            return Err(invalid("the burst must be 1 to 1,000,000,000 cells"));
        }
        Ok(())
    }
}

/// What a [`RateLimiter`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Whether the cells asked for were admitted (and counted).
    pub admitted: bool,
    /// Cells that could be admitted right after this decision.
    pub remaining: u64,
    /// When refused: how long until the cells asked for would be admitted
    /// (zero when admitted).
    pub retry_after: Duration,
    /// How long until the limiter is full again (its whole burst free).
    pub reset_after: Duration,
    /// When it was decided, by the Redis server's clock: the one clock
    /// every client's decisions share.
    pub decided_at: SystemTime,
}

/// A named rate limit shared by every client that uses the name, on one
/// server or a cluster (the name's hash slot). Clone it freely.
///
/// ```no_run
/// # async fn run(locks: seckill_lock::Locks) -> seckill_lock::Result<()> {
/// use seckill_lock::Rate;
/// let per_user = locks.rate_limiter("api:user-42", Rate::per_second(5.0).burst(10))?;
/// let decision = per_user.take(1).await?;
/// if !decision.admitted {
///     println!("429, retry after {:?}", decision.retry_after);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RateLimiter {
    conn: Conn,
    name: String,
    keys: [String; 1],
    rate: Rate,
    /// The rate as the function takes it: the interval in µs.
    interval_us: String,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("name", &self.name)
            .field("rate", &self.rate)
            .finish()
    }
}

impl RateLimiter {
    /// A limiter on `conn` under the default key prefix, for a caller that
    /// has a connection and wants no [`Locks`](crate::Locks) (no
    /// subscription): as [`Locks::rate_limiter`](crate::Locks::rate_limiter)
    /// with the default prefix.
    ///
    /// ```no_run
    /// # async fn run(conn: seckill_redis::Conn) -> seckill_lock::Result<()> {
    /// let limiter = seckill_lock::RateLimiter::on(conn, "user-42", seckill_lock::Rate::per_second(5.0))?;
    /// let admitted = limiter.take(1).await?.admitted;
    /// # Ok(()) }
    /// ```
    pub fn on(conn: Conn, name: &str, rate: Rate) -> Result<Self> {
        Self::new(conn, keys::DEFAULT_PREFIX, name, rate)
    }

    pub(crate) fn new(conn: Conn, prefix: &str, name: &str, rate: Rate) -> Result<Self> {
        keys::check("rate limiter name", name, keys::MAX_NAME_LEN)?;
        rate.check()?;
        Ok(Self {
            conn,
            name: name.to_owned(),
            keys: [format!("{prefix}:rate:{{{name}}}")],
            rate,
            interval_us: format!("{:.6}", 1e6 / rate.per_second),
        })
    }

    /// The limiter's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its rate and burst.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// Decides now whether `cells` are admitted, and counts them if so:
    /// one function call. More cells than the burst are never admitted.
    pub async fn take(&self, cells: u64) -> Result<Decision> {
        if cells == 0 || cells > self.rate.burst {
            return Err(Error::Invalid {
                what: "cells",
                reason: format!("must be 1 to the burst, {}", self.rate.burst),
            });
        }
        let args = [
            self.interval_us.as_str(),
            &self.rate.burst.to_string(),
            &cells.to_string(),
        ];
        let (admitted, remaining, retry_us, reset_us, now_us): (i64, i64, i64, i64, i64) =
            call(&mut self.conn.clone(), "rate", &self.keys, &args).await?;
        let micros = |v: i64| Duration::from_micros(u64::try_from(v).unwrap_or(0));
        Ok(Decision {
            admitted: admitted == 1,
            remaining: u64::try_from(remaining).unwrap_or(0),
            retry_after: micros(retry_us),
            reset_after: micros(reset_us),
            decided_at: UNIX_EPOCH + micros(now_us),
        })
    }

    /// Takes `cells`, waiting as long as the limiter says, up to `timeout`;
    /// [`Error::Timeout`] at once if the wait it names would end later.
    pub async fn wait(&self, cells: u64, timeout: Duration) -> Result<Decision> {
        let started = Instant::now();
        let deadline = started + timeout;
        loop {
            let decision = self.take(cells).await?;
            if decision.admitted {
                return Ok(decision);
            }
            if Instant::now() + decision.retry_after > deadline {
                return Err(Error::Timeout {
                    name: self.name.clone(),
                    waited: started.elapsed(),
                });
            }
            tokio::time::sleep(decision.retry_after).await;
        }
    }
}
