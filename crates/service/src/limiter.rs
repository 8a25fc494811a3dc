//! Keyed rate limits: purchases per user, and per client address, since
//! one person with many accounts still has few addresses. Counted in this
//! process (GCRA, by `governor`), or for the user, with
//! [`RateScope::Shared`], in Redis by every instance together (GCRA, by
//! `seckill_lock::RateLimits`: one function call per purchase; on one
//! server, one for the purchases that ask at the same time).

use std::hash::Hash;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::{DefaultKeyedRateLimiter, Quota};

/// Keys kept before those whose limit has fully recovered (which hold no
/// state) are dropped, bounding memory under a flood of distinct keys.
const MAX_KEYS: usize = 200_000;

pub struct Limiter<K: Hash + Eq + Clone> {
    limiter: Option<DefaultKeyedRateLimiter<K>>,
    /// Calls, to look at the key count only now and then: counting walks
    /// every shard of the map.
    calls: AtomicU64,
}

impl<K: Hash + Eq + Clone> Limiter<K> {
    /// `rate` requests per second per key, bursts up to `burst`. A rate of
    /// 0 turns the limit off.
    pub fn new(rate: f64, burst: f64) -> Self {
        let quota = (rate > 0.0)
            .then(|| Quota::with_period(Duration::from_secs_f64(1.0 / rate)))
            .flatten()
            .map(|q| {
                q.allow_burst(NonZeroU32::new(burst.max(1.0) as u32).unwrap_or(NonZeroU32::MIN))
            });
        Self {
            limiter: quota.map(DefaultKeyedRateLimiter::keyed),
            calls: AtomicU64::new(0),
        }
    }

    /// Takes one request for `key`; false when the key is over its limit.
    pub fn allow(&self, key: &K) -> bool {
        let Some(limiter) = &self.limiter else {
            return true;
        };
        if self
            .calls
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(1024)
            && limiter.len() >= MAX_KEYS
        {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        limiter.check_key(key).is_ok()
    }
}

/// Where the per-user rate is counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RateScope {
    /// In each instance: N instances behind a load balancer let a user
    /// through N times the rate.
    #[default]
    Local,
    /// In Redis, by every instance together: the rate holds for the
    /// fleet, at one Redis call per purchase (on one server, one for the
    /// purchases that ask at once).
    Shared,
}

/// The per-user limit, counted here or in Redis.
pub enum UserLimiter {
    /// In this process.
    Local(Limiter<String>),
    /// In Redis, shared by every instance; `None` when off.
    Shared(Option<(seckill_lock::RateLimits, seckill_lock::Rate)>),
}

impl UserLimiter {
    /// `rate` purchases per second per user, bursts up to `burst`, counted
    /// where `scope` says (a shared one on `conn`, its decisions batched
    /// on one server by a task started here). A rate of 0 turns it off.
    pub fn new(scope: RateScope, rate: f64, burst: f64, conn: seckill_redis::Conn) -> Self {
        match scope {
            RateScope::Local => Self::Local(Limiter::new(rate, burst)),
            RateScope::Shared => Self::Shared((rate > 0.0).then(|| {
                let burst = burst.max(1.0) as u64;
                let limits = seckill_lock::RateLimits::on(conn);
                (limits, seckill_lock::Rate::per_second(rate).burst(burst))
            })),
        }
    }

    /// Takes one purchase for `user`; false when the user is over its
    /// limit. A shared limit that Redis cannot answer lets the purchase
    /// through: the purchase needs that Redis too, and answers for itself.
    pub async fn allow(&self, user: &str) -> bool {
        let (limits, rate) = match self {
            Self::Local(limiter) => return limiter.allow(&user.to_owned()),
            Self::Shared(None) => return true,
            Self::Shared(Some(shared)) => shared,
        };
        // User ids are checked to be A-Z a-z 0-9 _ -: a key name as they are.
        let limiter = limits.limiter(&format!("user:{user}"), *rate);
        match limiter {
            Ok(limiter) => limiter.take(1).await.map_or(true, |d| d.admitted),
            Err(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Limiter;

    #[test]
    fn a_burst_is_cut_at_its_size_per_key() {
        let limiter = Limiter::new(1.0, 5.0);
        assert_eq!((0..20).filter(|_| limiter.allow(&"a")).count(), 5);
        assert!(limiter.allow(&"b"));
        assert!(Limiter::new(0.0, 1.0).allow(&"anyone"));
    }
}
