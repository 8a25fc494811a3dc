//! `seckill`: command-line entry point.
//!
//! Modules:
//! - `bench`: `seckill bench`, the purchase strategies raced and verified.
//! - `persist`: `seckill persist`, order persister and expiry sweeper.
//! - `audit`: `seckill audit`, Redis against itself and against SQL.
//! - `signals`: shutdown on SIGINT/SIGTERM.
//! - `lock_bench`: `seckill lock-bench`, contention benchmark of the lock.
//! - `target`: which Redis a command talks to (given URL or a private server).
//! - `stats`: latency histograms and the progress bar shared by benchmarks.
//! - `redis_benchmark`: runs `redis-benchmark` on the same server for a
//!   same-run baseline.

mod audit;
mod bench;
mod lock_bench;
mod persist;
mod redis_benchmark;
mod signals;
mod stats;
mod target;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "seckill",
    version,
    about = "Flash sales on Redis that never oversell"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Race buyers for a sale through each purchase strategy and verify it.
    Bench(bench::Args),
    /// Move order events from Redis into SQL and expire unpaid orders.
    Persist(persist::Args),
    /// Check a sale: Redis against itself and against SQL (exit 0 clean, 1 mismatch, 2 error).
    Audit(audit::Args),
    /// Measure lock acquisitions per second and hand-off latency.
    LockBench(lock_bench::Args),
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Bench(args) => bench::run(args).await,
        Command::LockBench(args) => lock_bench::run(args).await,
        Command::Persist(args) => persist::run(args).await,
        Command::Audit(args) => audit::run(args).await,
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
