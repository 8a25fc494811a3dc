//! `seckill persist`: the order persister, the expiry sweeper and the
//! archiver on their own, for deployments that scale them apart from the
//! HTTP service.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use seckill_engine::Engine;
use seckill_orders::{
    Persister, PersisterConfig, Store, archive_forever, sweep_forever, watch_lost_forever,
};

#[derive(ClapArgs)]
pub struct Args {
    #[command(flatten)]
    stores: crate::target::Stores,
    /// Seconds a batch read by a persister may stay uncommitted before
    /// another persists it.
    #[arg(long, default_value_t = 5)]
    claim_idle_secs: u64,
    /// Do not expire unpaid orders, nor archive finished sales, from this
    /// process.
    #[arg(long)]
    no_sweeper: bool,
    /// Seconds after a sale's end when it is archived (removed from Redis;
    /// SQL answers for it), once every order is settled and persisted.
    #[arg(long, default_value_t = 3600.0)]
    archive_after: f64,
    /// Rebuild from SQL, without an admin, each sale Redis lost (see
    /// `seckill serve --restore-lost-sales`).
    #[arg(long)]
    restore_lost_sales: bool,
    #[command(flatten)]
    durability: crate::durability::DurabilityArgs,
}

pub async fn run(args: Args) -> Result<ExitCode> {
    let archive_after = crate::target::archive_after(args.archive_after)?;
    let url = args.stores.database_url()?;
    let shown = seckill_orders::redacted(&url);
    let store = Store::open(&url)
        .await
        .with_context(|| format!("opening {shown}"))?;
    let config = PersisterConfig {
        claim_idle: Duration::from_secs(args.claim_idle_secs),
        ..PersisterConfig::default()
    }
    .with_durability(args.durability.get());
    let redis = args.stores.redis()?;
    let persister = Persister::with_target(&redis, store.clone(), config)
        .await
        .with_context(|| format!("connecting to {redis}"))?;
    eprintln!("persisting orders from {redis} into {shown}");
    let engine = Engine::connect_target_lazy(&redis)?;
    let mut sweepers = vec![tokio::spawn(watch_lost_forever(
        engine.clone(),
        store.clone(),
        args.restore_lost_sales,
        Default::default(),
        crate::signals::shutdown(),
    ))];
    if !args.no_sweeper {
        sweepers.push(tokio::spawn(sweep_forever(
            engine.clone(),
            seckill_orders::SWEEP_EVERY,
            crate::signals::shutdown(),
        )));
        sweepers.push(tokio::spawn(archive_forever(
            engine,
            store,
            archive_after,
            crate::signals::shutdown(),
        )));
    }
    persister.run(crate::signals::shutdown()).await;
    for sweeper in sweepers {
        sweeper.await?;
    }
    Ok(ExitCode::SUCCESS)
}
