//! Which Redis (and SQL database) a command runs against.

use anyhow::{Context, Result};
use clap::Args;
use seckill_testkit::RedisServer;

/// The Redis a command uses: the one at `--redis-url`, or a private
/// `redis-server` started for this run and stopped when this is dropped.
pub struct Target {
    pub url: String,
    _private: Option<RedisServer>,
}

impl Target {
    pub fn new(url: Option<String>) -> Result<Self> {
        match url {
            Some(url) => Ok(Self {
                url,
                _private: None,
            }),
            None => {
                let server = RedisServer::start().context("starting a private redis-server")?;
                Ok(Self {
                    url: server.url(),
                    _private: Some(server),
                })
            }
        }
    }

    /// Host and port, for tools that take them separately.
    pub fn host_port(&self) -> Result<(String, u16)> {
        use redis::IntoConnectionInfo;
        match self.url.as_str().into_connection_info()?.addr() {
            redis::ConnectionAddr::Tcp(host, port) => Ok((host.clone(), *port)),
            other => anyhow::bail!("not a plain TCP address: {other}"),
        }
    }
}

/// Where a service keeps its state: the options `serve`, `persist` and
/// `audit` share.
#[derive(Args)]
pub struct Stores {
    #[arg(
        long,
        env = "SECKILL_REDIS_URL",
        default_value = "redis://127.0.0.1:6379/"
    )]
    pub redis_url: String,
    /// A Redis Cluster instead of `--redis-url` (which it overrides): seed
    /// nodes as `host:port[,host:port…]` (or `redis://` URLs).
    #[arg(long, env = "SECKILL_REDIS_CLUSTER", value_name = "NODE[,NODE…]")]
    pub redis_cluster: Option<String>,
    /// The order database: a SQLite file path, `sqlite:PATH`,
    /// `sqlite://PATH`, a `postgres://` URL or a `mysql://` URL (MySQL 8,
    /// MariaDB 10.11).
    #[arg(long, env = "SECKILL_DATABASE_URL", default_value = "seckill.db")]
    pub database_url: String,
}

impl Stores {
    /// Where Redis is: `--redis-cluster` if given, else `--redis-url`.
    pub fn redis(&self) -> Result<seckill_redis::Target> {
        match &self.redis_cluster {
            Some(nodes) => seckill_redis::Target::cluster(nodes)
                .with_context(|| format!("--redis-cluster {nodes:?}")),
            None => Ok(seckill_redis::Target::server(&self.redis_url)),
        }
    }

    /// Opens the order database (migrating it) and connects to Redis,
    /// naming whichever failed.
    pub async fn open(&self) -> Result<(seckill_engine::Engine, seckill_orders::Store)> {
        let store = seckill_orders::Store::open(&self.database_url)
            .await
            .with_context(|| format!("opening {}", self.database_url))?;
        let redis = self.redis()?;
        let engine = seckill_engine::Engine::connect_target(&redis)
            .await
            .with_context(|| format!("connecting to {redis}"))?;
        Ok((engine, store))
    }
}

/// A duration option given in seconds: a finite number within `range`.
pub fn seconds(
    flag: &str,
    secs: f64,
    range: std::ops::RangeInclusive<f64>,
) -> anyhow::Result<std::time::Duration> {
    anyhow::ensure!(
        secs.is_finite() && range.contains(&secs),
        "{flag} must be a number of seconds from {} to {}",
        range.start(),
        range.end()
    );
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// `--archive-after`: seconds after a sale's end, from 0 to 30 days.
pub fn archive_after(secs: f64) -> anyhow::Result<std::time::Duration> {
    seconds("--archive-after", secs, 0.0..=30.0 * 86_400.0)
}
