use std::time::Duration;

/// Everything a lock operation can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Redis answered with an error or could not be reached. Nothing was
    /// retried: a write that may have been applied is reported, not repeated.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),

    /// `acquire` (or `wait`) waited its whole timeout without getting
    /// what it asked for, or would have to wait longer than that.
    #[error("timed out after {waited:?} waiting for `{name}`")]
    Timeout {
        /// The lock's (or limiter's, semaphore's, latch's) name, without
        /// the prefix.
        name: String,
        /// How long `acquire` actually waited.
        waited: Duration,
    },

    /// The guard no longer holds the lock: its lease ran out, or the key was
    /// deleted or taken by someone else.
    #[error("lock `{0}` is not held by this guard")]
    NotHeld(String),

    /// Redlock: too few masters answered to decide (a lock that is merely
    /// busy is `Ok(None)` / `Timeout`, not this).
    #[error("redlock quorum unavailable: {reachable} of {needed} masters needed answered")]
    NoQuorum {
        /// Masters that answered.
        reachable: usize,
        /// The quorum: a majority of the masters.
        needed: usize,
    },

    /// The operation needs one server or a cluster, not a Redlock set of
    /// masters.
    #[error("{0} needs one Redis server or a cluster, not Redlock")]
    NotOnRedlock(&'static str),

    /// A lock name, prefix or option that cannot be used.
    #[error("invalid {what}: {reason}")]
    Invalid {
        /// What was rejected: `lock name`, `prefix`, `lease`, ...
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

impl Error {
    /// What a request batched with others (see `Coalescer::ask`) gets when
    /// no answer came within one call's time.
    pub(crate) fn unanswered(what: &str) -> Self {
        let timeout = seckill_redis::RESPONSE_TIMEOUT;
        redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("the {what} had no answer within {timeout:?}"),
        ))
        .into()
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
