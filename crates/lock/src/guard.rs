//! A held lock: [`Guard`], its fence, and release, extend, watchdog and
//! the lost signal through [`Holding`].

use std::time::{Duration, Instant};

use crate::error::Result;
use crate::holding::{Holding, LostSignal, Renewable};
use crate::locks::Lock;

/// Proof of holding a lock. Release it with [`Guard::release`]; a guard that
/// is dropped instead releases in the background.
///
/// ```no_run
/// # async fn run(lock: seckill_lock::Lock) -> Result<(), seckill_lock::Error> {
/// let guard = lock.watchdog(true).acquire(std::time::Duration::from_secs(1)).await?;
/// let mut lost = guard.lost();
/// tokio::select! {
///     reason = lost.wait() => eprintln!("lock lost: {reason:?}, stop writing"),
///     () = tokio::time::sleep(std::time::Duration::from_secs(30)) => {}
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
pub struct Guard {
    holding: Holding<Lock>,
    fence: u64,
}

impl Renewable for Lock {
    fn name(&self) -> &str {
        Lock::name(self)
    }

    fn lease(&self) -> Duration {
        self.lease
    }

    async fn extend(&self, token: &str, lease: Duration) -> Result<bool> {
        self.locks.backend().extend(&self.keys, token, lease).await
    }

    async fn release(&self, token: &str) -> Result<bool> {
        self.locks.backend().release(&self.keys, token).await
    }
}

impl Guard {
    pub(crate) fn new(lock: Lock, token: String, fence: u64, until: Instant) -> Self {
        let watchdog = lock.watchdog;
        Self {
            holding: Holding::new(lock, token, until, watchdog),
            fence,
        }
    }

    /// The fencing token of this grant: strictly greater than every earlier
    /// grant's for the same lock name. Pass it to the resource you protect and
    /// let it refuse writes carrying a smaller one.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.holding.on().name()
    }

    /// A signal that fires once the lock is lost; cheap to clone and to move
    /// into another task.
    pub fn lost(&self) -> LostSignal {
        self.holding.lost()
    }

    /// Whether the lock is known or presumed lost.
    pub fn is_lost(&self) -> bool {
        self.lost().is_lost()
    }

    /// Resets the lease to `lease` from now. `NotHeld` if the lock was lost.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        self.holding.extend(lease).await
    }

    /// Releases the lock, handing it to the next waiter. `NotHeld` if it had
    /// already expired or been taken: whatever the critical section did after
    /// that was not protected.
    pub async fn release(self) -> Result<()> {
        self.holding.release().await
    }
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("name", &self.name())
            .field("fence", &self.fence)
            .finish_non_exhaustive()
    }
}
