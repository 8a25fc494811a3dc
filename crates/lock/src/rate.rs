//! [`RateLimiter`]: a rate and a burst shared by every client of one name,
//! decided by GCRA (the generic cell rate algorithm) in one function call;
//! [`RateLimits`]: the limiters of one connection, whose decisions asked at
//! the same time (on any of them) ride one call together.
//!
//! GCRA keeps one number per limiter: the theoretical arrival time (TAT),
//! when the limiter would be full again. A request for `n` cells is
//! admitted if the TAT after it is at most `burst` intervals ahead of now.
//! Where a fixed window admits twice the rate across a window's edge and a
//! bucket refilled by a timer drifts or stops with the timer, GCRA admits
//! at most `burst + rate × t` cells in any window of length `t`, with
//! nothing running between decisions. Its key expires when the TAT passes,
//! so an idle limiter keeps nothing in Redis.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use seckill_redis::{Coalescer, CoalescerConfig, Conn};

use crate::batch::answers;
use crate::error::{Error, Result};
use crate::keys;
use crate::scripts::LIBRARY;

/// Most decisions in one call.
const MAX_BATCH: usize = 1_000;

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

/// The rate limiters of one connection. On one server, decisions asked at
/// the same time, on any of its limiters, ride one function call, which
/// reads and writes each limiter's key once: what a busy service asks for
/// many users costs Redis a few calls, not one each. On a cluster each
/// decision is a call of its own: limiters' keys spread over the slots, so
/// a batch would be about a call per limiter anyway, and one waiting on a
/// frozen master would hold up decisions bound for the healthy ones.
/// Clone it freely; make one per connection, not one per decision.
///
/// ```no_run
/// # async fn run(conn: seckill_redis::Conn) -> seckill_lock::Result<()> {
/// use seckill_lock::{Rate, RateLimits};
/// let limits = RateLimits::on(conn);
/// let per_user = limits.limiter("user-42", Rate::per_second(5.0))?;
/// let admitted = per_user.take(1).await?.admitted;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RateLimits {
    prefix: Arc<str>,
    conn: Conn,
    /// The batches, on one server; none on a cluster.
    batches: Option<Coalescer<Ask, Result<Decision>>>,
}

impl std::fmt::Debug for RateLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimits")
            .field("prefix", &self.prefix)
            .field("batched", &self.batches.is_some())
            .finish_non_exhaustive()
    }
}

/// One decision as a call sends it.
struct Ask {
    key: Arc<str>,
    interval_us: Arc<str>,
    burst: u64,
    cells: u64,
}

impl RateLimits {
    /// The limiters of `conn` under the default key prefix, for a caller
    /// that has a connection and wants no [`Locks`](crate::Locks) (no
    /// subscription). On one server it starts a task on the current tokio
    /// runtime that sends the batches.
    pub fn on(conn: Conn) -> Self {
        Self::new(conn, keys::DEFAULT_PREFIX)
    }

    pub(crate) fn new(conn: Conn, prefix: &str) -> Self {
        let batches = (!conn.is_cluster()).then(|| {
            let conn = conn.clone();
            Coalescer::start(CoalescerConfig::default(), MAX_BATCH, move |asks| {
                decide(conn.clone(), asks)
            })
        });
        Self {
            prefix: prefix.into(),
            conn,
            batches,
        }
    }

    /// The limiter named `name` (1–512 bytes without braces, `|`, spaces or
    /// control characters), at `rate`. Every client that uses the name
    /// shares its count, whatever rate it gives.
    pub fn limiter(&self, name: &str, rate: Rate) -> Result<RateLimiter> {
        keys::check("rate limiter name", name, keys::MAX_NAME_LEN)?;
        rate.check()?;
        Ok(RateLimiter {
            limits: self.clone(),
            name: name.to_owned(),
            key: format!("{}:rate:{{{name}}}", self.prefix).into(),
            rate,
            // Rounded up: a shorter interval would admit more than the rate.
            interval_us: format!("{:.6}", (1e12 / rate.per_second).ceil() / 1e6).into(),
        })
    }

    /// Decides `ask`: in the next batch, or alone on a cluster.
    async fn decide(&self, ask: Ask) -> Result<Decision> {
        let answer = match &self.batches {
            Some(batches) => batches.ask(ask).await,
            None => decide(self.conn.clone(), vec![ask]).await.pop(),
        };
        answer.unwrap_or_else(|| Err(Error::unanswered("rate limiter")))
    }
}

/// Sends `asks` as one call (their keys on one server, or one key), each
/// limiter's key named once, and answers each in order.
async fn decide(mut conn: Conn, asks: Vec<Ask>) -> Vec<Result<Decision>> {
    let mut keys: Vec<&str> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut call_args: Vec<String> = Vec::with_capacity(asks.len() * 4);
    for ask in &asks {
        let k = *index.entry(&ask.key).or_insert_with(|| {
            keys.push(&ask.key);
            keys.len()
        });
        call_args.push(k.to_string());
        call_args.push(ask.interval_us.to_string());
        call_args.push(ask.burst.to_string());
        call_args.push(ask.cells.to_string());
    }
    let mut call = LIBRARY.call("rate", &keys);
    for arg in &call_args {
        call.arg(arg);
    }
    let answer = call.invoke(&mut conn).await;
    answers(answer, asks.len(), 4, 1, "rate", |d, now_us| {
        Decision::read(d, now_us[0])
    })
}

impl Decision {
    /// One decision's four values as the function answers them.
    fn read(v: &[i64], now_us: i64) -> Self {
        let micros = |v: i64| Duration::from_micros(u64::try_from(v).unwrap_or(0));
        Decision {
            admitted: v[0] == 1,
            remaining: u64::try_from(v[1]).unwrap_or(0),
            retry_after: micros(v[2]),
            reset_after: micros(v[3]),
            decided_at: UNIX_EPOCH + micros(now_us),
        }
    }
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
    limits: RateLimits,
    name: String,
    key: Arc<str>,
    rate: Rate,
    /// The rate as the function takes it: the interval in µs.
    interval_us: Arc<str>,
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
    /// The limiter's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its rate and burst.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// Decides now whether `cells` are admitted, and counts them if so: one
    /// function call, shared with the decisions asked meanwhile of the
    /// same [`RateLimits`]. More cells than the burst are never admitted.
    pub async fn take(&self, cells: u64) -> Result<Decision> {
        if cells == 0 || cells > self.rate.burst {
            return Err(Error::Invalid {
                what: "cells",
                reason: format!("must be 1 to the burst, {}", self.rate.burst),
            });
        }
        let ask = Ask {
            key: self.key.clone(),
            interval_us: self.interval_us.clone(),
            burst: self.rate.burst,
            cells,
        };
        self.limits.decide(ask).await
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
