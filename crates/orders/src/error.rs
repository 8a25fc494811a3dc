/// Everything the order pipeline can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),

    #[error("database: {0}")]
    Sql(#[from] sqlx::Error),

    #[error("database migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),

    #[error(transparent)]
    Engine(#[from] seckill_engine::Error),

    /// `--repair-from-sql` refused: Redis still holds events SQL lacks.
    #[error(
        "sale `{sale}` has {backlog} order events not yet in SQL; let the persister drain them first"
    )]
    Backlog { sale: String, backlog: u64 },

    #[error("sale `{0}` is not in SQL")]
    SaleNotInSql(String),

    #[error("invalid {what}: {reason}")]
    Invalid { what: &'static str, reason: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
