/// Everything the order pipeline can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Redis answered with an error or could not be reached.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),

    /// The SQL database answered with an error or could not be reached.
    #[error("database: {0}")]
    Sql(#[from] sqlx::Error),

    /// Bringing the database schema up to date failed.
    #[error("database migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),

    /// An engine call (reading a sale or its orders, restoring it) failed.
    #[error(transparent)]
    Engine(#[from] seckill_engine::Error),

    /// `--repair-from-sql` refused: Redis still holds events SQL lacks.
    #[error(
        "sale `{sale}` has {backlog} stream entries not yet in SQL; let the persister drain them first"
    )]
    Backlog {
        /// The sale id.
        sale: String,
        /// Stream entries not yet persisted.
        backlog: u64,
    },

    /// [`crate::wait_drained`] gave up: events were still not in SQL.
    #[error(
        "sale `{sale}` still has stream entries not in SQL after {waited:?}: {in_stream} in its \
         own stream, {told} told through its master's ledgers"
    )]
    NotDrained {
        /// The sale id.
        sale: String,
        /// Entries of the sale's own stream not yet persisted (not yet
        /// read, or read and not committed) when it gave up.
        in_stream: u64,
        /// Entries told through its master's ledgers and not yet
        /// committed when it gave up.
        told: u64,
        /// How long it waited.
        waited: std::time::Duration,
    },

    /// [`crate::archive()`] refused: the sale is not finished, or not all
    /// of it is in SQL.
    #[error("sale `{sale}` cannot be archived: {reason}")]
    NotArchivable {
        /// The sale id.
        sale: String,
        /// Why, in plain words.
        reason: String,
    },

    /// `--repair-from-sql` for a sale SQL has no record of.
    #[error("sale `{0}` is not in SQL")]
    SaleNotInSql(String),

    /// A value that cannot be used: an empty database path, or a malformed
    /// in-flight record the persister keeps in Redis.
    #[error("invalid {what}: {reason}")]
    Invalid {
        /// What was rejected.
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The Redis error behind this one, if Redis is what failed.
    pub(crate) fn redis(&self) -> Option<&redis::RedisError> {
        match self {
            Self::Redis(e) | Self::Engine(seckill_engine::Error::Redis(e)) => Some(e),
            _ => None,
        }
    }

    /// Whether a master could not be reached or answered too late
    /// (perhaps after a whole response timeout: a frozen master).
    pub(crate) fn is_unreachable(&self) -> bool {
        self.redis().is_some_and(|e| {
            e.is_timeout()
                || e.is_io_error()
                || e.is_connection_dropped()
                || e.is_connection_refusal()
                || e.is_cluster_error()
        })
    }
}
