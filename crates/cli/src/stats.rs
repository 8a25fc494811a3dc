//! Latency histograms and progress display for benchmark commands.

use std::time::Duration;

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Microsecond latencies from 1 µs to 60 s, 3 significant digits.
#[derive(Clone)]
pub struct Latency(Histogram<u64>);

impl Default for Latency {
    fn default() -> Self {
        Self(Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds"))
    }
}

impl Latency {
    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.0.saturating_record(us.max(1));
    }

    pub fn merge(&mut self, other: &Self) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.0.add(&other.0);
    }

    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The `q` quantile in milliseconds (0 when empty).
    pub fn ms(&self, q: f64) -> f64 {
        self.0.value_at_quantile(q) as f64 / 1000.0
    }

    pub fn max_ms(&self) -> f64 {
        self.0.max() as f64 / 1000.0
    }
}

/// A progress bar on stderr that shows itself only once a run has lasted a
/// second (and only on a terminal), so short runs print nothing extra.
pub fn progress(total: u64, unit: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
    let template = format!("{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} {unit} {{msg}}");
    bar.set_style(
        ProgressStyle::with_template(&template)
            .expect("valid template")
            .progress_chars("=> "),
    );
    let reveal = bar.downgrade();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        if let Some(bar) = reveal.upgrade()
            && !bar.is_finished()
        {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    });
    bar
}
