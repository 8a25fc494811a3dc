//! Shutdown on SIGINT or SIGTERM.

use std::future::Future;

use tokio::signal::unix::{Signal, SignalKind, signal};

/// Resolves on the first SIGINT (Ctrl-C) or SIGTERM received after the
/// call. The handlers are installed by the call itself, not at the first
/// poll: a caller that says it is ready right after (an address printed for
/// a supervisor or a test to act on) is already listening, so an early
/// SIGTERM stops it gracefully instead of killing it.
pub fn shutdown() -> impl Future<Output = ()> {
    let interrupt = signal(SignalKind::interrupt()).ok();
    let terminate = signal(SignalKind::terminate()).ok();
    async move {
        let received = |s: Option<Signal>| async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = received(interrupt) => {}
            () = received(terminate) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    /// The handlers are in place when `shutdown()` returns, before its
    /// future is first polled: a SIGTERM raised right then is caught (its
    /// default action would end this test's process) and resolves it.
    #[tokio::test]
    async fn a_sigterm_right_after_the_call_is_caught_and_resolves_it() {
        let stopped = super::shutdown();
        // SAFETY: a signal to our own process, whose handler is installed.
        assert_eq!(unsafe { libc::raise(libc::SIGTERM) }, 0);
        tokio::time::timeout(Duration::from_secs(10), stopped)
            .await
            .expect("the SIGTERM did not resolve shutdown()");
    }
}
