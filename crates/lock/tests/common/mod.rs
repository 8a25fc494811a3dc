//! Helpers shared by the lock's test binaries.
#![allow(dead_code)]

use seckill_lock::{Guard, Locks};

/// Locks on the server at `url`, with a client made as a user would.
pub async fn connect(url: &str) -> Locks {
    Locks::new(redis::Client::open(url).unwrap()).await.unwrap()
}

/// `try_acquire` of lock `name` with default settings, panicking on errors.
pub async fn take(locks: &Locks, name: &str) -> Option<Guard> {
    locks.lock(name).unwrap().try_acquire().await.unwrap()
}
