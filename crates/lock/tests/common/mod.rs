//! Helpers shared by the lock's test binaries.
#![allow(dead_code)]

use seckill_lock::{Guard, Locks};

/// `try_acquire` of lock `name` with default settings, panicking on errors.
pub async fn take(locks: &Locks, name: &str) -> Option<Guard> {
    locks.lock(name).unwrap().try_acquire().await.unwrap()
}
