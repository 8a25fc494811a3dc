//! `seckill`: command-line entry point.
//!
//! Modules:
//! - `bench`: `seckill bench`, the purchase strategies raced and verified.
//! - `persist`: `seckill persist`, order persister and expiry sweeper.
//! - `audit`: `seckill audit`, Redis against itself and against SQL.
//! - `serve`: `seckill serve`, the HTTP service.
//! - `credentials`: `serve`'s admin token, buyer auth mode, payment-side
//!   secrets and trusted proxies.
//! - `demo`: `seckill demo`, everything end to end on a private Redis.
//! - `load`: `seckill load`, HTTP load on one sale, checked afterwards.
//! - `durability`: `--durability`, when `serve` and `bench` acknowledge a
//!   purchase.
//! - `signals`: shutdown on SIGINT/SIGTERM.
//! - `logging`: `--log-format`, and error chains with each cause once.
//! - `lock_bench`: `seckill lock-bench`, contention benchmark of the lock.
//! - `target`: which Redis a command talks to (given URL or a private server).
//! - `stats`: latency histograms and the progress bar shared by benchmarks.
//! - `plot`: SVG pictures of `bench` and `load` runs (`--plot`).
//! - `redis_benchmark`: runs `redis-benchmark` on the same server for a
//!   same-run baseline.
//! - `redis_cost`: Redis time per purchase, from the server's command stats
//!   and process CPU.

mod archive;
mod audit;
mod bench;
mod credentials;
mod demo;
mod durability;
mod load;
mod lock_bench;
mod logging;
mod persist;
mod plot;
mod redis_benchmark;
mod redis_cost;
mod serve;
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
    /// How log lines are written to stderr: `text` (colour only on a
    /// terminal) or `json` (one object per line, for a log pipeline).
    #[arg(
        long,
        global = true,
        value_enum,
        env = "SECKILL_LOG_FORMAT",
        default_value = "text"
    )]
    log_format: logging::Format,
}

#[derive(Subcommand)]
enum Command {
    /// Run everything end to end on a private redis-server: sale, 20,000
    /// buyers over HTTP, payments, expiry, resale, audit.
    Demo(demo::Args),
    /// Serve the HTTP API (with the order persister and expiry sweeper).
    Serve(Box<serve::Args>),
    /// Send purchase load to a running service and check the sale after.
    Load(load::Args),
    /// Race buyers for a sale through each purchase strategy and verify it.
    Bench(bench::Args),
    /// Move order events from Redis into SQL and expire unpaid orders.
    Persist(persist::Args),
    /// Check a sale: Redis against itself and against SQL (exit 0 clean, 1 mismatch, 2 error).
    Audit(audit::Args),
    /// Remove a finished sale from Redis; SQL answers for it from then on.
    Archive(archive::Args),
    /// Measure lock acquisitions per second and hand-off latency.
    LockBench(lock_bench::Args),
}

// The clients' and the service's many small allocations (a request, its
// reply, a task) cost a lock client 18 % of its instructions in glibc's
// malloc, and 6 % in mimalloc's (callgrind).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init(cli.log_format);
    // The service and its load run on every core; the benchmarks measure
    // from one thread so client cost stays small and steady.
    let runtime = match cli.command {
        Command::Demo(_) | Command::Serve(_) | Command::Load(_) => {
            tokio::runtime::Builder::new_multi_thread()
        }
        _ => tokio::runtime::Builder::new_current_thread(),
    }
    .enable_all()
    .build();
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(dispatch(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", logging::chain(&e));
            ExitCode::from(2)
        }
    }
}

async fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Demo(args) => demo::run(args).await,
        Command::Serve(args) => serve::run(*args).await,
        Command::Load(args) => load::run(args).await,
        Command::Bench(args) => bench::run(args).await,
        Command::LockBench(args) => lock_bench::run(args).await,
        Command::Persist(args) => persist::run(args).await,
        Command::Audit(args) => audit::run(args).await,
        Command::Archive(args) => archive::run(args).await,
    }
}
