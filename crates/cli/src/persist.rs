//! `seckill persist`: the order persister and the expiry sweeper on their
//! own, for deployments that scale them apart from the HTTP service.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use seckill_engine::Engine;
use seckill_orders::{Persister, PersisterConfig, Store, sweep_forever};

#[derive(ClapArgs)]
pub struct Args {
    #[command(flatten)]
    stores: crate::target::Stores,
    /// Seconds a batch read by a persister may stay uncommitted before
    /// another persists it.
    #[arg(long, default_value_t = 5)]
    claim_idle_secs: u64,
    /// Do not expire unpaid orders from this process.
    #[arg(long)]
    no_sweeper: bool,
}

pub async fn run(args: Args) -> Result<ExitCode> {
    let store = Store::open(&args.stores.database_url)
        .await
        .with_context(|| format!("opening {}", args.stores.database_url))?;
    let config = PersisterConfig {
        claim_idle: Duration::from_secs(args.claim_idle_secs),
        ..PersisterConfig::default()
    };
    let persister = Persister::new(&args.stores.redis_url, store, config)
        .await
        .with_context(|| format!("connecting to {}", args.stores.redis_url))?;
    eprintln!(
        "persisting orders from {} into {}",
        args.stores.redis_url, args.stores.database_url
    );
    let sweeper = if args.no_sweeper {
        None
    } else {
        let engine = Engine::connect(&args.stores.redis_url).await?;
        Some(tokio::spawn(sweep_forever(
            engine,
            Duration::from_millis(200),
            crate::signals::shutdown(),
        )))
    };
    persister.run(crate::signals::shutdown()).await;
    if let Some(sweeper) = sweeper {
        sweeper.await?;
    }
    Ok(ExitCode::SUCCESS)
}
