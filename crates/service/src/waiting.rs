//! [`Waiting`]: sales whose purchases wait for a replica. With
//! `--durability replica` a purchase is acknowledged once every replica in
//! touch with its master has it;
//! a master without one (after a failover promoted its only replica, say)
//! cannot confirm, and its sales answer 503 until a replica rejoins. This
//! instance notes such sales, for `/readyz` and the
//! `seckill_sales_waiting_for_replica` gauge, and forgets one at its next
//! confirmed purchase, or a minute after its last refusal.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::locks::write;

/// How long a sale is listed after its last unconfirmed purchase, when no
/// purchase has come since to say otherwise.
const FORGET_AFTER: Duration = Duration::from_secs(60);

/// Sales with a purchase not confirmed by a replica, and when the last was.
#[derive(Debug, Default)]
pub struct Waiting {
    sales: RwLock<HashMap<String, Instant>>,
    /// How many are listed: a confirmed purchase takes the lock only when
    /// some sale is.
    listed: AtomicUsize,
}

impl Waiting {
    /// A purchase on `sale` was not confirmed by a replica in time.
    pub fn unconfirmed(&self, sale: &str) {
        let mut sales = write(&self.sales);
        sales.insert(sale.to_owned(), Instant::now());
        self.publish(sales.len());
    }

    /// A purchase on `sale` was acknowledged.
    pub fn confirmed(&self, sale: &str) {
        if self.listed.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut sales = write(&self.sales);
        if sales.remove(sale).is_some() {
            self.publish(sales.len());
        }
    }

    /// The sales listed now, by id.
    pub fn sales(&self) -> Vec<String> {
        let mut sales = write(&self.sales);
        sales.retain(|_, at| at.elapsed() < FORGET_AFTER);
        self.publish(sales.len());
        let mut ids: Vec<String> = sales.keys().cloned().collect();
        ids.sort_unstable();
        ids
    }

    fn publish(&self, n: usize) {
        self.listed.store(n, Ordering::Relaxed);
        metrics::gauge!("seckill_sales_waiting_for_replica").set(n as f64);
    }
}
