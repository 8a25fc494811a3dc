//! Taking a [`Lock`]: [`Lock::try_acquire`] and [`Lock::acquire`], which
//! hand out [`Guard`]s, and the clean-up of an acquire cut short. Apart
//! from `locks`, which a guard uses to renew and release, so that the two
//! do not import each other.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::guard::Guard;
use crate::keys;
use crate::lease::valid_until;
use crate::locks::{Lock, check_lease};

impl Lock {
    /// Takes the lock if it is free now; `Ok(None)` when someone holds it.
    pub async fn try_acquire(&self) -> Result<Option<Guard>> {
        check_lease(self.lease)?;
        let token = keys::token();
        let pending = Pending::new(self, &token);
        let started = Instant::now();
        let fence = self
            .locks
            .backend()
            .try_grant(&self.keys, &token, self.lease)
            .await;
        pending.settle(&fence);
        let until = valid_until(started, self.lease, self.lease);
        Ok(fence?.map(|fence| Guard::new(self.clone(), token, fence, until)))
    }

    /// Waits up to `timeout` for the lock. On one server, waiters are served
    /// in arrival order and woken by the release itself.
    pub async fn acquire(&self, timeout: Duration) -> Result<Guard> {
        check_lease(self.lease)?;
        let token = keys::token();
        let pending = Pending::new(self, &token);
        let grant = self
            .locks
            .backend()
            .wait_grant(&self.keys, &token, self.lease, timeout)
            .await;
        pending.settle(&grant);
        let (fence, until) = grant?;
        Ok(Guard::new(self.clone(), token, fence, until))
    }
}

/// An acquire in flight. If it is cancelled (its future dropped) or fails
/// on a Redis error, the grant or queue entry it may have left behind is
/// cleaned up in the background, so no lock waits out a lease for nobody.
struct Pending {
    lock: Option<(Lock, String)>,
}

impl Pending {
    fn new(lock: &Lock, token: &str) -> Self {
        Self {
            lock: Some((lock.clone(), token.to_owned())),
        }
    }

    /// Outcomes that leave nothing behind disarm the clean-up.
    fn settle<T>(mut self, outcome: &Result<T>) {
        if !matches!(outcome, Err(Error::Redis(_))) {
            self.lock = None;
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let Some((lock, token)) = self.lock.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let outcome = lock.locks.backend().abandon(&lock.keys, &token).await;
            if let Err(e) = outcome {
                tracing::warn!(lock = %lock.keys.name, error = %e, "clean-up of an abandoned acquire failed");
            }
        });
    }
}
