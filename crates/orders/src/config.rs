//! How a persister runs ([`PersisterConfig`]) and meets Redis: the
//! consumer group it joins, the commands it sends outside scripts.

use std::time::Duration;

/// How a persister runs.
#[derive(Clone, Debug)]
pub struct PersisterConfig {
    /// This consumer's name; unique per running persister.
    pub consumer: String,
    /// Most entries read per stream per round (one SQL transaction).
    pub batch: usize,
    /// How long to wait before reading again after a round found less
    /// than a batch.
    pub poll: Duration,
    /// The longest wait after rounds that found nothing: each empty round
    /// doubles the wait from `poll` up to this, so an idle persister sends
    /// each master a few calls a second, and the first order after a quiet
    /// spell waits at most this long to be read.
    pub idle_poll: Duration,
    /// Batches read this long ago and still not committed by a persister
    /// that has gone quiet as long are taken over.
    pub claim_idle: Duration,
    /// How often the registry's log is read and the other persisters'
    /// marks looked at.
    pub housekeeping: Duration,
    /// How often every sale is read, and every abandoned batch looked for,
    /// whatever the signals said.
    pub full_read: Duration,
}

impl Default for PersisterConfig {
    fn default() -> Self {
        Self {
            consumer: format!(
                "{}-{}-{:08x}",
                std::process::id(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis())
                    .unwrap_or(0),
                rand::random::<u32>()
            ),
            batch: 2_000,
            poll: Duration::from_millis(20),
            idle_poll: Duration::from_millis(80),
            claim_idle: Duration::from_secs(5),
            housekeeping: Duration::from_millis(500),
            full_read: Duration::from_secs(300),
        }
    }
}

/// The consumer group every persister joins.
pub const GROUP: &str = "persister";

/// What a persister and the sweeper send outside scripts, as `INFO
/// commandstats` names them, for tools that measure what they cost Redis:
/// deletes of committed batches, looks at batches in flight and at the
/// readers, the group's state, trims and the expiry cursor before them,
/// and the list of sales. The reads and sweeps are function calls
/// (`lua/read_news.lua`, the engine's `expire`, counted as such); the
/// `TIME` of a take-over is left out, as scripts send it too.
pub const PLAIN_COMMANDS: [&str; 6] = [
    "hdel",
    "hgetall",
    "xinfo|groups",
    "xtrim",
    "hget",
    "smembers",
];
