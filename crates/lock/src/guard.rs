//! A held lock: release, extend, watchdog renewal and the lock-lost signal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::error::{Error, Result};
use crate::lease::valid_until;
use crate::locks::Lock;

/// Why a guard stopped holding its lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lost {
    /// The lease ran out without a successful renewal (locally measured,
    /// with a margin for clock drift).
    Expired,
    /// Redis said the lock is no longer ours: the key was deleted or now
    /// holds another token.
    Taken,
    /// The guard was released or dropped.
    Released,
}

#[derive(Clone, Copy, Debug)]
enum State {
    Held { until: Instant },
    Lost(Lost),
}

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
    lock: Lock,
    token: String,
    fence: u64,
    state: Arc<watch::Sender<State>>,
    watchdog: Option<AbortHandle>,
    released: bool,
}

impl Guard {
    pub(crate) fn new(lock: Lock, token: String, fence: u64, until: Instant) -> Self {
        let state = Arc::new(watch::Sender::new(State::Held { until }));
        let watchdog = lock.watchdog.then(|| {
            let task = tokio::spawn(renew(lock.clone(), token.clone(), state.clone()));
            task.abort_handle()
        });
        Self {
            lock,
            token,
            fence,
            state,
            watchdog,
            released: false,
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
        self.lock.name()
    }

    /// A signal that fires once the lock is lost; cheap to clone and to move
    /// into another task.
    pub fn lost(&self) -> LostSignal {
        LostSignal {
            rx: self.state.subscribe(),
        }
    }

    /// Whether the lock is known or presumed lost.
    pub fn is_lost(&self) -> bool {
        self.lost().is_lost()
    }

    /// Resets the lease to `lease` from now. `NotHeld` if the lock was lost.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        if self.is_lost() {
            return Err(Error::NotHeld(self.name().to_owned()));
        }
        let started = Instant::now();
        if self.lock.extend(&self.token, lease).await? {
            self.state.send_replace(State::Held {
                until: valid_until(started, lease, lease),
            });
            Ok(())
        } else {
            self.state.send_replace(State::Lost(Lost::Taken));
            Err(Error::NotHeld(self.name().to_owned()))
        }
    }

    /// Releases the lock, handing it to the next waiter. `NotHeld` if it had
    /// already expired or been taken: whatever the critical section did after
    /// that was not protected.
    pub async fn release(mut self) -> Result<()> {
        self.released = true;
        self.stop_watchdog();
        let released = self.lock.release(&self.token).await;
        self.state.send_replace(State::Lost(Lost::Released));
        match released? {
            true => Ok(()),
            false => Err(Error::NotHeld(self.name().to_owned())),
        }
    }

    fn stop_watchdog(&mut self) {
        if let Some(task) = self.watchdog.take() {
            task.abort();
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        self.stop_watchdog();
        self.state.send_replace(State::Lost(Lost::Released));
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // No runtime left: the lease ends it.
        };
        let lock = self.lock.clone();
        let token = std::mem::take(&mut self.token);
        runtime.spawn(async move {
            if let Err(e) = lock.release(&token).await {
                tracing::warn!(lock = %lock.name(), error = %e, "background release failed");
            }
        });
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

/// Fires when a [`Guard`]'s lock is lost. Once lost, it stays lost.
#[derive(Clone, Debug)]
pub struct LostSignal {
    rx: watch::Receiver<State>,
}

impl LostSignal {
    /// Whether the lock is known or presumed lost now.
    pub fn is_lost(&self) -> bool {
        match *self.rx.borrow() {
            State::Held { until } => Instant::now() >= until,
            State::Lost(_) => true,
        }
    }

    /// Waits until the lock is lost and says why.
    pub async fn wait(&mut self) -> Lost {
        loop {
            let state = *self.rx.borrow_and_update();
            match state {
                State::Lost(reason) => return reason,
                State::Held { until } => {
                    tokio::select! {
                        changed = self.rx.changed() => if changed.is_err() {
                            return Lost::Released;
                        },
                        () = tokio::time::sleep_until(until.into()) => return Lost::Expired,
                    }
                }
            }
        }
    }
}

/// The watchdog: renews every third of the lease and stops at the first sign
/// the lock is gone. A failed renewal is retried next period; if none succeeds
/// before the validity ends, the lock is reported lost as `Expired`.
async fn renew(lock: Lock, token: String, state: Arc<watch::Sender<State>>) {
    let period = lock.lease / 3;
    loop {
        tokio::time::sleep(period).await;
        let State::Held { until } = *state.borrow() else {
            return;
        };
        if Instant::now() >= until {
            state.send_replace(State::Lost(Lost::Expired));
            return;
        }
        let started = Instant::now();
        match lock.extend(&token, lock.lease).await {
            Ok(true) => {
                state.send_replace(State::Held {
                    until: valid_until(started, lock.lease, lock.lease),
                });
            }
            Ok(false) => {
                state.send_replace(State::Lost(Lost::Taken));
                return;
            }
            Err(e) => tracing::warn!(lock = %lock.name(), error = %e, "lock renewal failed"),
        }
    }
}
