//! Which Redis (and SQL database) a command runs against.

use std::path::PathBuf;

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
    #[arg(long, conflicts_with_all = ["redis_url", "redis_cluster", "redis_sentinel"])]
    cluster: bool,
    #[command(flatten)]
    sentinel: SentinelArgs,
    #[command(flatten)]
    access: RedisAccess,
}

/// Redis under Sentinel: the sentinels and the name of the master they
/// watch, instead of a URL.
#[derive(Args, Clone, Default)]
pub struct SentinelArgs {
    /// Redis under Sentinel instead of `--redis-url`: the sentinels, as
    /// `host:port[,host:port…]` (or `redis://` URLs; with `rediss://`
    /// sentinels the servers are spoken to over TLS too). Connections
    /// follow the master they name through a failover.
    #[arg(
        long,
        env = "SECKILL_REDIS_SENTINEL",
        value_name = "NODE[,NODE…]",
        requires = "sentinel_master",
        conflicts_with = "redis_cluster"
    )]
    redis_sentinel: Option<String>,
    /// The name of the master the sentinels watch (`sentinel monitor NAME …`).
    #[arg(
        long,
        env = "SECKILL_SENTINEL_MASTER",
        value_name = "NAME",
        requires = "redis_sentinel"
    )]
    sentinel_master: Option<String>,
    /// The sentinels' own password (their `requirepass`), from FILE; the
    /// servers' is `--redis-password-file`.
    #[arg(
        long,
        env = "SECKILL_SENTINEL_PASSWORD_FILE",
        value_name = "FILE",
        requires = "redis_sentinel"
    )]
    sentinel_password_file: Option<PathBuf>,
}

impl SentinelArgs {
    /// The Redis the sentinels name, if `--redis-sentinel` was given.
    fn target(&self) -> Result<Option<seckill_redis::Target>> {
        let (Some(nodes), Some(name)) = (&self.redis_sentinel, &self.sentinel_master) else {
            return Ok(None);
        };
        seckill_redis::Target::sentinel(nodes, name)
            .map(Some)
            .with_context(|| format!("--redis-sentinel {nodes:?} --sentinel-master {name:?}"))
    }

    /// `target` with the sentinels' password, if one was given.
    fn apply(&self, target: seckill_redis::Target) -> Result<seckill_redis::Target> {
        Ok(match &self.sentinel_password_file {
            Some(file) => {
                target.with_sentinel_password(&read_secret(file, "--sentinel-password-file")?)
            }
            None => target,
        })
    }
}

/// How to reach Redis beyond its URLs: TLS files, and a password kept out
/// of the command line. Every command that talks to Redis takes these.
#[derive(Args, Clone, Default)]
pub struct RedisAccess {
    /// For `rediss://`: trust the CA certificates in FILE (PEM) instead of
    /// the system's.
    #[arg(long, env = "SECKILL_REDIS_CA_FILE", value_name = "FILE")]
    redis_ca_file: Option<PathBuf>,
    /// For `rediss://` with mutual TLS: this client's certificate (PEM).
    #[arg(
        long,
        env = "SECKILL_REDIS_CLIENT_CERT_FILE",
        value_name = "FILE",
        requires = "redis_client_key_file"
    )]
    redis_client_cert_file: Option<PathBuf>,
    /// Its private key (PEM).
    #[arg(
        long,
        env = "SECKILL_REDIS_CLIENT_KEY_FILE",
        value_name = "FILE",
        requires = "redis_client_cert_file"
    )]
    redis_client_key_file: Option<PathBuf>,
    /// For `rediss://`: accept any server certificate. Anyone between this
    /// process and Redis can then read and change every purchase; warns.
    #[arg(long, env = "SECKILL_REDIS_TLS_INSECURE")]
    redis_tls_insecure: bool,
    /// The Redis password (or ACL user's password), from FILE rather than
    /// the URL, which `ps` shows; a trailing newline is dropped.
    #[arg(long, env = "SECKILL_REDIS_PASSWORD_FILE", value_name = "FILE")]
    redis_password_file: Option<PathBuf>,
}

impl RedisAccess {
    /// `target` with these settings.
    fn apply(&self, target: seckill_redis::Target) -> Result<seckill_redis::Target> {
        let mut tls = seckill_redis::Tls::from_files(
            self.redis_ca_file.as_deref(),
            self.redis_client_cert_file.as_deref(),
            self.redis_client_key_file.as_deref(),
        )?;
        if self.redis_tls_insecure {
            tracing::warn!(
                "--redis-tls-insecure: Redis's certificate is not checked; anyone between here \
                 and Redis can read and change every purchase"
            );
            tls = tls.insecure();
        }
        let mut target = target.with_tls(tls);
        if let Some(file) = &self.redis_password_file {
            target = target.with_password(&read_secret(file, "--redis-password-file")?);
        }
        Ok(target)
    }
}

/// A secret kept in `file`, without its trailing newline; `flag` names
/// where it was asked for in an error (which never holds the secret).
pub fn read_secret(file: &std::path::Path, flag: &str) -> Result<String> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("{flag}: cannot read {}", file.display()))?;
    let secret = text.trim_end_matches(['\r', '\n']);
    anyhow::ensure!(!secret.is_empty(), "{flag}: {} is empty", file.display());
    Ok(secret.to_owned())
}

impl RedisArgs {
    /// Whether the run is on a cluster, known before anything starts.
    pub fn is_cluster(&self) -> bool {
        self.cluster || self.redis_cluster.is_some()
    }

    /// Whether the run is under Sentinel, known before anything starts.
    pub fn is_sentinel(&self) -> bool {
        self.sentinel.redis_sentinel.is_some()
    }

    /// The Redis named, or a private server (or cluster) started now.
    pub fn target(&self) -> Result<Target> {
        if self.cluster {
            return Target::private_cluster();
        }
        let given = match (
            self.sentinel.target()?,
            &self.redis_cluster,
            &self.redis_url,
        ) {
            (Some(watched), _, _) => watched,
            (None, Some(nodes), _) => cluster(nodes)?,
            (None, None, Some(url)) => seckill_redis::Target::server(url),
            (None, None, None) => return Target::private_server(),
        };
        let given = self.sentinel.apply(self.access.apply(given)?)?;
        Ok(Target::given(given))
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
    #[command(flatten)]
    pub sentinel: SentinelArgs,
    #[command(flatten)]
    pub access: RedisAccess,
    /// The order database: a SQLite file path, `sqlite:PATH`,
    /// `sqlite://PATH`, a `postgres://` URL or a `mysql://` URL (MySQL 8,
    /// MariaDB 10.11). For TLS: `postgres://…?sslmode=verify-full&sslrootcert=FILE`,
    /// `mysql://…?ssl-mode=VERIFY_IDENTITY&ssl-ca=FILE`. With a password in
    /// it, rather give `--database-url-file`.
    #[arg(long, env = "SECKILL_DATABASE_URL", default_value = "seckill.db")]
    database_url: String,
    /// The order database's URL from FILE (which `ps` does not show), over
    /// `--database-url`; a trailing newline is dropped.
    #[arg(long, env = "SECKILL_DATABASE_URL_FILE", value_name = "FILE")]
    database_url_file: Option<PathBuf>,
}

impl Stores {
    /// Where Redis is: `--redis-sentinel` or `--redis-cluster` if given,
    /// else `--redis-url`.
    pub fn redis(&self) -> Result<seckill_redis::Target> {
        let given = match (self.sentinel.target()?, &self.redis_cluster) {
            (Some(watched), _) => watched,
            (None, Some(nodes)) => cluster(nodes)?,
            (None, None) => seckill_redis::Target::server(&self.redis_url),
        };
        self.sentinel.apply(self.access.apply(given)?)
    }

    /// The order database's URL: from `--database-url-file` if given,
    /// else `--database-url`.
    pub fn database_url(&self) -> Result<String> {
        match &self.database_url_file {
            Some(file) => read_secret(file, "--database-url-file"),
            None => Ok(self.database_url.clone()),
        }
    }

    /// Opens the order database (migrating it) and connects to Redis,
    /// naming whichever failed.
    pub async fn open(&self) -> Result<(seckill_engine::Engine, seckill_orders::Store)> {
        let url = self.database_url()?;
        let store = seckill_orders::Store::open(&url)
            .await
            .with_context(|| format!("opening {}", seckill_orders::redacted(&url)))?;
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
