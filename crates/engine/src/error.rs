/// Everything the engine can fail with. Refusals a buyer should see (sold
/// out, over the limit, ...) are not errors: they are [`crate::Outcome`]s.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Redis answered with an error or could not be reached. The purchase may
    /// or may not have been applied; retry with the same request id.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),

    /// A coalesced batch failed; every purchase in it gets this. As with
    /// `Redis`, retry with the same request id.
    #[error("batched purchase failed: {0}")]
    Batch(String),

    #[error("lock: {0}")]
    Lock(#[from] seckill_lock::Error),

    /// The `lock` strategy lost its lock before writing: nothing was written.
    #[error("lock on sale `{0}` was lost before the write")]
    LockLost(String),

    #[error("sale `{0}` not found")]
    SaleNotFound(String),

    #[error("order `{0}` not found")]
    OrderNotFound(String),

    /// The order is in a state that refuses the change (paying an expired
    /// order, cancelling a paid one).
    #[error("order `{order_id}` is {}", state.as_str())]
    OrderConflict {
        order_id: String,
        state: crate::lifecycle::OrderState,
    },

    #[error("sale `{0}` already exists")]
    SaleExists(String),

    /// Input that can never be valid: names the field and why.
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },

    /// A strategy that cannot serve this sale (the `list` strategy needs a
    /// sale created with token-list inventory, every other one a counter).
    #[error("strategy `{strategy}` cannot sell sale `{sale}` ({reason})")]
    Unsupported {
        strategy: &'static str,
        sale: String,
        reason: &'static str,
    },

    /// `watch` kept losing the race to other buyers and gave up.
    #[error("gave up after {attempts} conflicting attempts")]
    Contention { attempts: u64 },

    /// The engine is shutting down.
    #[error("engine closed")]
    Closed,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
