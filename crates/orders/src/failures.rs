//! [`Failures`]: how a background task that keeps failing logs. The first
//! failure is logged at once; while it keeps failing, at most one line per
//! [`REPEAT_EVERY`], with how many failures it stands for; and one line
//! when it works again. An outage of Redis or SQL reads as a few lines per
//! task, not five a second.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// The least time between two lines about the same ongoing failure.
pub const REPEAT_EVERY: Duration = Duration::from_secs(30);

/// One task's run of failures.
///
/// ```
/// let mut sweeps = seckill_orders::Failures::new("expiry sweep");
/// sweeps.failed(&"connection refused"); // logged
/// sweeps.failed(&"connection refused"); // counted
/// sweeps.succeeded(); // logged: recovered after 2 failures
/// ```
#[derive(Debug)]
pub struct Failures {
    task: &'static str,
    /// Since when it fails, and how many times so far.
    run: Option<(Instant, u64)>,
    /// When the last line was written, and the count it reported.
    logged: Option<(Instant, u64)>,
}

impl Failures {
    /// A task named `task` in its lines ("expiry sweep").
    pub const fn new(task: &'static str) -> Self {
        Self {
            task,
            run: None,
            logged: None,
        }
    }

    /// It failed with `error`: logged if first, or if the last line is
    /// [`REPEAT_EVERY`] old.
    pub fn failed(&mut self, error: &dyn Display) {
        let now = Instant::now();
        let (since, count) = self.run.get_or_insert((now, 0));
        *count += 1;
        let (since, count) = (*since, *count);
        match self.logged {
            None => {
                tracing::warn!(task = self.task, error = %error, "{} failed; retrying", self.task);
            }
            Some((at, _)) if now.duration_since(at) < REPEAT_EVERY => return,
            Some((_, reported)) => tracing::warn!(
                task = self.task,
                error = %error,
                failures = count - reported,
                failing_for_secs = now.duration_since(since).as_secs(),
                "{} still failing",
                self.task
            ),
        }
        self.logged = Some((now, count));
    }

    /// It worked: one line if it had been failing.
    pub fn succeeded(&mut self) {
        if let Some((since, count)) = self.run.take() {
            self.logged = None;
            tracing::info!(
                task = self.task,
                failures = count,
                failed_for_secs = since.elapsed().as_secs(),
                "{} works again",
                self.task
            );
        }
    }

    /// [`Failures::failed`] or [`Failures::succeeded`] as `result` says.
    pub fn record<T, E: Display>(&mut self, result: &Result<T, E>) {
        match result {
            Ok(_) => self.succeeded(),
            Err(e) => self.failed(e),
        }
    }
}
