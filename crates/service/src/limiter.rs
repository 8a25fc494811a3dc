//! Per-user rate limit: a token bucket per user id, in this process.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Buckets kept before idle ones are dropped, bounding memory under a flood
/// of distinct user ids.
const MAX_USERS: usize = 200_000;

pub struct Limiter {
    rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl Limiter {
    /// `rate` requests per second per user, bursts up to `burst`. A rate of
    /// 0 turns the limit off.
    pub fn new(rate: f64, burst: f64) -> Self {
        Self {
            rate,
            burst: burst.max(1.0),
            buckets: Mutex::default(),
        }
    }

    /// Takes one token for `user`; false when the user is over the limit.
    pub fn allow(&self, user: &str) -> bool {
        if self.rate <= 0.0 {
            return true;
        }
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_USERS && !buckets.contains_key(user) {
            // Drop buckets that have refilled completely: they hold no state.
            let full = self.burst / self.rate;
            buckets.retain(|_, (_, t)| now.duration_since(*t).as_secs_f64() < full);
        }
        let (tokens, last) = buckets.entry(user.to_owned()).or_insert((self.burst, now));
        *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * self.rate).min(self.burst);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Limiter;

    #[test]
    fn a_burst_is_cut_at_its_size_per_user() {
        let limiter = Limiter::new(1.0, 5.0);
        assert_eq!((0..20).filter(|_| limiter.allow("a")).count(), 5);
        assert!(limiter.allow("b"));
        assert!(Limiter::new(0.0, 1.0).allow("anyone"));
    }
}
