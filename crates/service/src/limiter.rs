//! Keyed rate limits in this process (GCRA, by `governor`): purchases per
//! user, and per client address, since one person with many accounts
//! still has few addresses.

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
