//! What this instance's buyers of each sale did, second by second: answers
//! by code and purchase latency, for the dashboard. Only sales this
//! instance sells are kept (a sale is tracked from its purchaser's making,
//! so ids that name no sale cost nothing), and only the last
//! [`HISTORY_SECS`] seconds of each.
//!
//! Per instance: behind a load balancer each instance's dashboard shows
//! its own buyers; the Prometheus metrics (and `docs/grafana/`) add them up.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use serde::Serialize;

/// Seconds of history kept per sale.
pub const HISTORY_SECS: usize = 180;

/// One second of one sale's purchases.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Second {
    /// Unix time, seconds.
    pub t: u64,
    /// Answers by code (`ok` for an order made or answered again).
    pub codes: BTreeMap<&'static str, u64>,
    /// Purchase latency in that second, ms (0 when none).
    pub p50_ms: f64,
    /// The same, 99th percentile.
    pub p99_ms: f64,
}

/// Every tracked sale's recent seconds.
#[derive(Default)]
pub struct Activity {
    sales: RwLock<HashMap<String, Mutex<Window>>>,
}

impl Activity {
    /// Starts keeping sale `id`'s seconds (nothing if kept already).
    pub fn track(&self, id: &str) {
        if read(&self.sales).contains_key(id) {
            return;
        }
        write(&self.sales)
            .entry(id.to_owned())
            .or_insert_with(|| Mutex::new(Window::new(now_secs())));
    }

    /// Stops keeping sale `id` (it is gone or was made anew).
    pub fn forget(&self, id: &str) {
        write(&self.sales).remove(id);
    }

    /// One answer to a purchase of sale `id`; nothing if it is not tracked.
    pub fn record(&self, id: &str, code: &'static str, took: Duration) {
        let sales = read(&self.sales);
        let Some(window) = sales.get(id) else {
            return;
        };
        let mut window = lock(window);
        window.roll(now_secs());
        *window.current.codes.entry(code).or_default() += 1;
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).max(1);
        window.latency.saturating_record(us);
    }

    /// Sale `id`'s completed seconds, oldest first (empty if not tracked).
    pub fn seconds(&self, id: &str) -> Vec<Second> {
        let sales = read(&self.sales);
        let Some(window) = sales.get(id) else {
            return Vec::new();
        };
        let mut window = lock(window);
        window.roll(now_secs());
        window.past.iter().cloned().collect()
    }
}

/// The second being filled and those before it.
struct Window {
    current: Second,
    latency: Histogram<u64>,
    past: VecDeque<Second>,
}

impl Window {
    fn new(t: u64) -> Self {
        Self {
            current: Second {
                t,
                ..Second::default()
            },
            latency: Histogram::new_with_bounds(1, 60_000_000, 2).expect("valid bounds"),
            past: VecDeque::with_capacity(HISTORY_SECS + 1),
        }
    }

    /// Closes every second before `now`, quiet ones included, so a chart
    /// falls to zero when buying stops.
    fn roll(&mut self, now: u64) {
        if now <= self.current.t {
            return;
        }
        let quantile = |q| self.latency.value_at_quantile(q) as f64 / 1000.0;
        let done = Second {
            p50_ms: quantile(0.5),
            p99_ms: quantile(0.99),
            ..std::mem::take(&mut self.current)
        };
        self.latency.reset();
        let first_quiet = done.t + 1;
        self.past.push_back(done);
        // At most a history's worth of quiet seconds.
        let from = first_quiet.max(now.saturating_sub(HISTORY_SECS as u64));
        for t in from..now {
            self.past.push_back(Second {
                t,
                ..Second::default()
            });
        }
        while self.past.len() > HISTORY_SECS {
            self.past.pop_front();
        }
        self.current.t = now;
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

fn lock<T>(lock: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    lock.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_seconds_are_zeros_and_history_is_bounded() {
        let mut w = Window::new(100);
        *w.current.codes.entry("ok").or_default() += 3;
        w.latency.record(2_000).unwrap();
        w.roll(103);
        let ts: Vec<u64> = w.past.iter().map(|s| s.t).collect();
        assert_eq!(ts, [100, 101, 102]);
        assert_eq!(w.past[0].codes.get("ok"), Some(&3));
        assert!((w.past[0].p50_ms - 2.0).abs() < 0.05, "{:?}", w.past[0]);
        assert!(w.past[1].codes.is_empty());
        assert_eq!(w.current.t, 103);
        // Asked again in the same second: nothing changes.
        w.roll(103);
        assert_eq!(w.past.len(), 3);
        // A long silence keeps only the last HISTORY_SECS seconds.
        w.roll(10_000);
        assert_eq!(w.past.len(), HISTORY_SECS);
        assert_eq!(w.past.back().map(|s| s.t), Some(9_999));
    }

    #[test]
    fn only_tracked_sales_are_kept() {
        let activity = Activity::default();
        activity.record("nobody", "ok", Duration::from_millis(1));
        assert!(read(&activity.sales).is_empty());
        activity.track("s");
        activity.record("s", "ok", Duration::from_millis(1));
        activity.forget("s");
        assert!(activity.seconds("s").is_empty());
    }
}
