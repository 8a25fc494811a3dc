//! `seckill serve`: the HTTP service until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args as ClapArgs;

use crate::durability::DurabilityArgs;
use crate::target::seconds;

#[derive(ClapArgs)]
pub struct Args {
    #[arg(long, env = "SECKILL_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    #[command(flatten)]
    stores: crate::target::Stores,
    #[command(flatten)]
    credentials: crate::credentials::Credentials,
    /// Purchases per second one user may send (0: no limit).
    #[arg(long, default_value_t = 50.0)]
    rate_per_user: f64,
    /// Burst one user may send above that rate.
    #[arg(long, default_value_t = 100.0)]
    burst_per_user: f64,
    /// Where the per-user rate is counted: `local` (in this instance; N
    /// instances let a user through N times the rate) or `shared` (in
    /// Redis, by every instance together: one Redis call per purchase).
    #[arg(long, env = "SECKILL_RATE_LIMIT", value_enum, default_value = "local")]
    rate_limit: RateLimit,
    /// Purchases per second one client address may send (0: no limit);
    /// behind --trusted-proxies, the address they forwarded for.
    #[arg(long, default_value_t = 100.0)]
    rate_per_ip: f64,
    /// Burst one address may send above that rate.
    #[arg(long, default_value_t = 200.0)]
    burst_per_ip: f64,
    /// Do not run the order persister and expiry sweeper in this process
    /// (run `seckill persist` instead).
    #[arg(long)]
    no_background: bool,
    /// Most connections open at once; past it new ones get a 503 and are
    /// closed at once.
    #[arg(long, default_value_t = 10_000)]
    max_connections: usize,
    /// Seconds a request may take from its first byte to the end of its
    /// header before its connection is closed.
    #[arg(long, default_value_t = 10.0)]
    header_timeout: f64,
    /// Seconds a kept-alive connection may sit between requests.
    #[arg(long, default_value_t = 60.0)]
    idle_timeout: f64,
    /// Seconds after a sale's end when the background work archives it
    /// (removes it from Redis; SQL answers for it), once every order is
    /// settled and persisted.
    #[arg(long, default_value_t = 3600.0)]
    archive_after: f64,
    /// Rebuild from SQL, without an admin, each sale Redis lost (a restart
    /// without persistence, a failover to an empty replica); else it
    /// answers 503 sale_lost until restored with `seckill audit --sale ID
    /// --repair-from-sql`.
    #[arg(long)]
    restore_lost_sales: bool,
    #[command(flatten)]
    durability: DurabilityArgs,
}

/// A connection deadline: above 0 (a millisecond at least), at most a day.
const LIMIT: std::ops::RangeInclusive<f64> = 0.001..=86_400.0;

pub async fn run(args: Args) -> Result<ExitCode> {
    let admin_token = args.credentials.admin_token()?;
    let auth = args.credentials.auth()?;
    anyhow::ensure!(
        args.rate_per_user >= 0.0 && args.burst_per_user >= 1.0,
        "--rate-per-user must be >= 0 and --burst-per-user >= 1"
    );
    anyhow::ensure!(
        args.rate_per_ip >= 0.0 && args.burst_per_ip >= 1.0,
        "--rate-per-ip must be >= 0 and --burst-per-ip >= 1"
    );
    anyhow::ensure!(
        args.max_connections >= 1,
        "--max-connections must be at least 1"
    );
    let config = seckill_service::Config {
        listen: args.listen,
        redis: args.stores.redis()?,
        database_url: args.stores.database_url()?,
        admin_token,
        auth,
        rate_per_user: args.rate_per_user,
        burst_per_user: args.burst_per_user,
        rate_limit: args.rate_limit.into(),
        rate_per_ip: args.rate_per_ip,
        burst_per_ip: args.burst_per_ip,
        background: !args.no_background,
        limits: seckill_service::Limits {
            max_connections: args.max_connections,
            header_timeout: seconds("--header-timeout", args.header_timeout, LIMIT)?,
            idle_timeout: seconds("--idle-timeout", args.idle_timeout, LIMIT)?,
        },
        archive_after: crate::target::archive_after(args.archive_after)?,
        restore_lost_sales: args.restore_lost_sales,
        durability: args.durability.get(),
    };
    let running = seckill_service::start(config)
        .await
        .context("starting the service")?;
    let stopped = crate::signals::shutdown();
    println!("listening on http://{}", running.addr);
    stopped.await;
    eprintln!("shutting down: finishing in-flight requests and persisting");
    running.stop().await;
    Ok(ExitCode::SUCCESS)
}

/// `--rate-limit`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum RateLimit {
    Local,
    Shared,
}

impl From<RateLimit> for seckill_service::RateScope {
    fn from(scope: RateLimit) -> Self {
        match scope {
            RateLimit::Local => Self::Local,
            RateLimit::Shared => Self::Shared,
        }
    }
}
