/// Everything the engine can fail with. Refusals a buyer should see (sold
/// out, over the limit, ...) are not errors: they are [`crate::Outcome`]s.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Redis answered with an error or could not be reached. The purchase may
    /// or may not have been applied; retry with the same request id.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),

    /// A coalesced batch failed; every purchase in it gets this. As with
    /// `Redis`, retry with the same request id.
    #[error("batched purchase failed: {0}")]
    Batch(String),

    /// The `lock` strategy's sale lock failed (Redis error, timeout, no
    /// quorum); nothing was written.
    #[error("lock: {0}")]
    Lock(#[from] seckill_lock::Error),

    /// The `lock` strategy lost its lock before writing: nothing was written.
    #[error("lock on sale `{0}` was lost before the write")]
    LockLost(String),

    /// No sale has this id (never created, or its keys are gone).
    #[error("sale `{0}` not found")]
    SaleNotFound(String),

    /// No order has this id in Redis (unknown, or of a sale or generation
    /// that is gone).
    #[error("order `{0}` not found")]
    OrderNotFound(String),

    /// The order is in a state that refuses the change (paying an expired
    /// order, cancelling a paid one).
    #[error("order `{order_id}` is {}", state.as_str())]
    OrderConflict {
        /// The order that refused the change.
        order_id: String,
        /// The state it is already in.
        state: crate::state::OrderState,
    },

    /// `create_sale` with an id that is already taken; nothing was changed.
    #[error("sale `{0}` already exists")]
    SaleExists(String),

    /// Input that can never be valid: names the field and why.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The offending field or argument.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },

    /// Fields each valid alone that disagree with each other (an end not
    /// after the start), so the request can never succeed as sent.
    #[error("{field}: {reason}")]
    Inconsistent {
        /// The field refused.
        field: &'static str,
        /// The rule it breaks, naming the other field.
        reason: String,
    },

    /// A request the sale as it is does not allow (stock below the units
    /// sold, more than one unit of a sharded sale).
    #[error("{field}: {reason}")]
    StateConflict {
        /// The field refused.
        field: &'static str,
        /// What in the sale's state stands in the way.
        reason: String,
    },

    /// A strategy that cannot serve this sale: each needs the inventory
    /// [`crate::Strategy::inventory`] names (`list` a token list, the other
    /// baselines a counter, `atomic` and `coalesced` the sale's hash).
    #[error("strategy `{strategy}` cannot sell sale `{sale}` ({reason})")]
    Unsupported {
        /// Name of the strategy, as in [`crate::Strategy::name`].
        strategy: &'static str,
        /// The sale id.
        sale: String,
        /// Which inventory the strategy needed.
        reason: &'static str,
    },

    /// `watch` kept losing the race to other buyers and gave up.
    #[error("gave up after {attempts} conflicting attempts")]
    Contention {
        /// How many `WATCH`/`EXEC` rounds were tried.
        attempts: u64,
    },

    /// With [`crate::Durability::Replica`]: the purchase was made on the
    /// master but no replica confirmed it in time, so a failover could
    /// still lose it. Retry with the same request id: the answer is the
    /// order if it survived, a new purchase if it did not.
    #[error("purchase on sale `{sale}` not confirmed by a replica in time")]
    NotReplicated {
        /// The sale.
        sale: String,
        /// The request id it was made under: the caller's, or, when it
        /// sent none, one made for it, to retry with.
        request_id: Option<String>,
    },

    /// A purchase sent with no request id, made under one made for it (on
    /// a cluster, or with [`crate::Durability::Replica`]), got no answer
    /// from Redis (an error or no reply in time): it may have been made.
    /// Retry with `request_id`: the answer is that order if it was made, a
    /// new purchase if it was not.
    #[error("purchase on sale `{sale}` got no answer ({reason}); retry with its request id")]
    Unanswered {
        /// The sale.
        sale: String,
        /// The request id made for it.
        request_id: String,
        /// What went wrong on the way.
        reason: String,
    },

    /// With [`crate::Durability::Replica`]: the order was paid or
    /// cancelled on the master but no replica confirmed it in time, so a
    /// failover could still undo it. Sending it again is safe: done, it
    /// changes nothing and waits for the replicas again.
    #[error("change of order `{0}` not confirmed by a replica in time")]
    SettlementNotReplicated(String),

    /// A sharded sale's buyer found its shard empty and waited its bound
    /// for a refill, while units were still in the pool, on other shards
    /// or moving between them (so "sold out" would not be true). Nothing
    /// was bought; retry shortly.
    #[error("units of sale `{0}` are moving between its shards; retry shortly")]
    StockMoving(String),
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
