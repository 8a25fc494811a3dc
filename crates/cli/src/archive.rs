//! `seckill archive`: a finished sale leaves Redis and answers from SQL.
//! Exit 0 when archived, 1 when refused (and why), 2 when it could not try.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args as ClapArgs;
use seckill_orders::{Error, archive};

#[derive(ClapArgs)]
pub struct Args {
    /// The sale to archive: ended, every order paid, cancelled or expired,
    /// and all of it in SQL.
    #[arg(long)]
    sale: String,
    #[command(flatten)]
    stores: crate::target::Stores,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> Result<ExitCode> {
    seckill_engine::check_id("sale id", &args.sale)?;
    let (engine, store) = args.stores.open().await?;
    match archive(&engine, &store, &args.sale).await {
        Ok(done) => {
            if args.json {
                println!("{}", serde_json::to_string(&done)?);
            } else {
                println!(
                    "archived sale {}: {} orders ({} units sold) now answered from SQL; its Redis keys are gone",
                    done.sale_id, done.orders, done.sold
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e @ Error::NotArchivable { .. }) => {
            eprintln!("refused: {e}");
            Ok(ExitCode::FAILURE)
        }
        Err(Error::Engine(seckill_engine::Error::SaleNotFound(id))) => {
            let archived = store
                .sale(&id)
                .await?
                .is_some_and(|s| s.archived_ms.is_some());
            if archived {
                eprintln!("sale {id} is archived already");
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!("refused: no sale `{id}` in Redis");
                Ok(ExitCode::FAILURE)
            }
        }
        Err(e) => Err(e.into()),
    }
}
