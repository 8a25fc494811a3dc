//! `seckill audit`: is a sale's Redis state whole, and does SQL agree?
//! Exit 0 when clean, 1 on any finding, 2 when it could not check.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args as ClapArgs;
use seckill_orders::{Report, audit, repair_from_sql};

#[derive(ClapArgs)]
pub struct Args {
    /// The sale to audit.
    #[arg(long)]
    sale: String,
    #[command(flatten)]
    stores: crate::target::Stores,
    /// Rebuild the sale's Redis state from SQL first (refused while the
    /// stream holds events SQL lacks).
    #[arg(long)]
    repair_from_sql: bool,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> Result<ExitCode> {
    seckill_engine::check_id("sale id", &args.sale)?;
    let (engine, store) = args.stores.open().await?;
    if args.repair_from_sql {
        let restored = repair_from_sql(&engine, &store, &args.sale).await?;
        eprintln!(
            "rebuilt sale {} in Redis from SQL: {} orders",
            args.sale, restored.orders
        );
        if let Some(ms) = restored.newest_order_ms {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            eprintln!(
                "the newest order in SQL was bought {:.1} s ago ({ms} ms since the epoch): \
                 orders acknowledged after it and before Redis lost the sale never reached SQL \
                 and could not be rebuilt",
                (now - ms) as f64 / 1000.0
            );
        }
    }
    let report = audit(&engine, &store, &args.sale).await?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print(&report);
    }
    Ok(if report.clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

pub fn print(r: &Report) {
    println!(
        "sale {}: {} orders in Redis, {} in SQL, stream backlog {} ({} orders awaiting persistence)",
        r.sale_id, r.orders_in_redis, r.orders_in_sql, r.backlog, r.in_backlog
    );
    for finding in &r.findings {
        println!(
            "  MISMATCH {}",
            serde_json::to_string(finding).unwrap_or_default()
        );
    }
    println!(
        "audit: {}",
        if r.clean { "clean" } else { "MISMATCHES FOUND" }
    );
}
