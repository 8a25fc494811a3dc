//! What every leased grant shares, a lock's [`Guard`](crate::Guard) and a
//! semaphore's [`Permit`](crate::Permit) alike: the lease, the watchdog
//! that renews it, the [`LostSignal`], and a release in the background
//! when it is dropped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::error::{Error, Result};
use crate::lease::valid_until;

/// Why a grant stopped being held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lost {
    /// The lease ran out without a successful renewal (locally measured,
    /// with a margin for clock drift).
    Expired,
    /// Redis said the grant is no longer ours: its key was deleted, its
    /// lease ended there, or another holder has it.
    Taken,
    /// It was released or dropped.
    Released,
}

#[derive(Clone, Copy, Debug)]
enum State {
    Held { until: Instant },
    Lost(Lost),
}

/// What a grant is held on: something that renews and releases it by id.
pub(crate) trait Renewable: Clone + Send + Sync + 'static {
    /// The name, for logs and errors.
    fn name(&self) -> &str;
    /// The lease each renewal asks for.
    fn lease(&self) -> Duration;
    /// Renews grant `id` for `lease`; false if it is no longer held.
    fn extend(&self, id: &str, lease: Duration) -> impl Future<Output = Result<bool>> + Send;
    /// Releases grant `id`; false if it was no longer held.
    fn release(&self, id: &str) -> impl Future<Output = Result<bool>> + Send;
}

/// A held grant of `R`, with its watchdog if asked for.
pub(crate) struct Holding<R: Renewable> {
    on: R,
    id: String,
    state: Arc<watch::Sender<State>>,
    watchdog: Option<AbortHandle>,
    released: bool,
}

impl<R: Renewable> Holding<R> {
    pub fn new(on: R, id: String, until: Instant, watchdog: bool) -> Self {
        let state = Arc::new(watch::Sender::new(State::Held { until }));
        let watchdog = watchdog.then(|| {
            let task = tokio::spawn(renew(on.clone(), id.clone(), state.clone()));
            task.abort_handle()
        });
        Self {
            on,
            id,
            state,
            watchdog,
            released: false,
        }
    }

    pub fn on(&self) -> &R {
        &self.on
    }

    pub fn lost(&self) -> LostSignal {
        LostSignal {
            rx: self.state.subscribe(),
        }
    }

    /// Resets the lease to `lease` from now. `NotHeld` if it was lost.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        if self.lost().is_lost() {
            return Err(Error::NotHeld(self.on.name().to_owned()));
        }
        let started = Instant::now();
        if self.on.extend(&self.id, lease).await? {
            self.state.send_replace(State::Held {
                until: valid_until(started, lease, lease),
            });
            Ok(())
        } else {
            self.state.send_replace(State::Lost(Lost::Taken));
            Err(Error::NotHeld(self.on.name().to_owned()))
        }
    }

    /// Releases it. `NotHeld` if it had already expired or been taken:
    /// whatever was done after that was not protected.
    pub async fn release(mut self) -> Result<()> {
        self.released = true;
        self.stop_watchdog();
        let released = self.on.release(&self.id).await;
        self.state.send_replace(State::Lost(Lost::Released));
        match released? {
            true => Ok(()),
            false => Err(Error::NotHeld(self.on.name().to_owned())),
        }
    }

    fn stop_watchdog(&mut self) {
        if let Some(task) = self.watchdog.take() {
            task.abort();
        }
    }
}

impl<R: Renewable> Drop for Holding<R> {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        self.stop_watchdog();
        self.state.send_replace(State::Lost(Lost::Released));
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // No runtime left: the lease ends it.
        };
        let on = self.on.clone();
        let id = std::mem::take(&mut self.id);
        runtime.spawn(async move {
            if let Err(e) = on.release(&id).await {
                tracing::warn!(name = %on.name(), error = %e, "background release failed");
            }
        });
    }
}

/// Fires when a grant (a [`Guard`](crate::Guard)'s lock, a
/// [`Permit`](crate::Permit)) is lost. Once lost, it stays lost.
#[derive(Clone, Debug)]
pub struct LostSignal {
    rx: watch::Receiver<State>,
}

impl LostSignal {
    /// Whether it is known or presumed lost now.
    pub fn is_lost(&self) -> bool {
        match *self.rx.borrow() {
            State::Held { until } => Instant::now() >= until,
            State::Lost(_) => true,
        }
    }

    /// Waits until it is lost and says why.
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

/// The watchdog: renews every third of the lease and stops at the first
/// sign the grant is gone. A failed renewal is retried next period; if none
/// succeeds before the validity ends, the grant is reported lost as
/// `Expired`.
async fn renew<R: Renewable>(on: R, id: String, state: Arc<watch::Sender<State>>) {
    let lease = on.lease();
    let period = lease / 3;
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
        match on.extend(&id, lease).await {
            Ok(true) => {
                state.send_replace(State::Held {
                    until: valid_until(started, lease, lease),
                });
            }
            Ok(false) => {
                state.send_replace(State::Lost(Lost::Taken));
                return;
            }
            Err(e) => tracing::warn!(name = %on.name(), error = %e, "lease renewal failed"),
        }
    }
}
