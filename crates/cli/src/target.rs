//! Which Redis (and SQL database) a command runs against.

use anyhow::{Context, Result};
use clap::Args;
use seckill_testkit::{RedisCluster, RedisServer};

/// Which Redis `demo`, `bench` and `lock-bench` run against.
#[derive(Args)]
pub struct RedisArgs {
    /// Redis to use; without it (or `--redis-cluster`) a private
    /// redis-server is started for the run.
    #[arg(long, env = "SECKILL_REDIS_URL")]
    redis_url: Option<String>,
    /// A Redis Cluster instead (it overrides `--redis-url`): seed nodes as
    /// `host:port[,host:port…]` (or `redis://` URLs).
    #[arg(long, env = "SECKILL_REDIS_CLUSTER", value_name = "NODE[,NODE…]")]
    redis_cluster: Option<String>,
    /// Start a private Redis Cluster (3 masters, 1 replica each, free
    /// ports) for the run instead.
    #[arg(long, conflicts_with_all = ["redis_url", "redis_cluster"])]
    cluster: bool,
}

impl RedisArgs {
    /// Whether the run is on a cluster, known before anything starts.
    pub fn is_cluster(&self) -> bool {
        self.cluster || self.redis_cluster.is_some()
    }

    /// The Redis named, or a private server (or cluster) started now.
    pub fn target(&self) -> Result<Target> {
        if self.cluster {
            return Target::private_cluster();
        }
        match (&self.redis_cluster, &self.redis_url) {
            (Some(nodes), _) => Ok(Target::given(cluster(nodes)?)),
            (None, Some(url)) => Ok(Target::given(seckill_redis::Target::server(url))),
            (None, None) => Target::private_server(),
        }
    }
}

/// `--redis-cluster NODES` read.
fn cluster(nodes: &str) -> Result<seckill_redis::Target> {
    seckill_redis::Target::cluster(nodes).with_context(|| format!("--redis-cluster {nodes:?}"))
}

/// The Redis a command uses: one it was given, or a private `redis-server`
/// (or cluster) started for this run and stopped when this is dropped.
pub struct Target {
    pub redis: seckill_redis::Target,
    /// The private server or cluster, kept running until this is dropped.
    _private: Option<Box<dyn std::any::Any + Send>>,
}

impl Target {
    /// A Redis the command was given.
    fn given(redis: seckill_redis::Target) -> Self {
        Self {
            redis,
            _private: None,
        }
    }

    /// A private redis-server on a free port.
    fn private_server() -> Result<Self> {
        let server = RedisServer::start().context("starting a private redis-server")?;
        Ok(Self {
            redis: seckill_redis::Target::server(&server.url()),
            _private: Some(Box::new(server)),
        })
    }

    /// A private cluster of 3 masters with a replica each, on free ports.
    fn private_cluster() -> Result<Self> {
        let cluster = RedisCluster::start(3, 1)
            .context("starting a private Redis Cluster (3 masters, 3 replicas)")?;
        Ok(Self {
            redis: seckill_redis::Target::cluster(&cluster.addresses().join(","))?,
            _private: Some(Box::new(cluster)),
        })
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
            Some(nodes) => cluster(nodes),
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
