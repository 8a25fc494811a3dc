//! `seckill bench`: M buyers race for N units through each strategy; every
//! run is verified against Redis and the order records.
//!
//! Here the arguments and the runs (plain, sharded, with the persister);
//! `persister` the order persister of `--persist-to`, `rows` what a run
//! reports, `table` how the terminal shows it, `compare` the
//! `redis-benchmark` baselines of `--compare`.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use seckill_engine::bench::{Race, Verdict, race, verify};
use seckill_engine::{
    CoalescerConfig, Engine, Inventory, PurchaseRequest, Rule, SaleSpec, Strategy,
};

use seckill_orders::Store;

mod compare;
mod persister;
mod rows;
mod table;

use compare::compare;
use persister::{Drain, PERSISTER_THREADS, start_persister};
use rows::{MasterShare, Persisted, Row, ShardRow, ShardedRun};
use table::print_table;

use crate::durability::DurabilityArgs;
use crate::redis_cost::{Cost, Meter, threads_cpu_us};
use crate::stats::{Latency, progress};
use crate::target::RedisArgs;

#[derive(ClapArgs)]
pub struct Args {
    #[command(flatten)]
    redis: RedisArgs,
    #[command(flatten)]
    durability: DurabilityArgs,
    /// Strategy to run (lock, watch, list, lua, atomic, coalesced), or `all`
    /// for each in turn.
    #[arg(long, default_value = "all", value_parser = strategies)]
    strategy: Strategies,
    /// Units for sale.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..=seckill_engine::MAX_STOCK))]
    stock: u64,
    /// Purchase requests (buyers); about 30 % of them are repeat buyers.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    buyers: u64,
    /// Buyers in flight at once.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    concurrency: u32,
    /// Units one user may buy (no limit when absent).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    per_user_limit: Option<u32>,
    /// `coalesced`: most purchases per script call [default: the engine's].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    batch_max: Option<u32>,
    /// `coalesced`: longest a batch waits for more purchases, in µs
    /// [default: the engine's].
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    batch_wait_us: Option<u64>,
    /// `coalesced`: batches in flight at once [default: the engine's].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    batch_in_flight: Option<u32>,
    /// Split each sale's stock over this many shards, each on its own
    /// master where the cluster has enough (`atomic` and `coalesced` only).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=seckill_engine::MAX_SHARDS as i64))]
    shards: u32,
    /// With `--shards`: after the first fifth of the requests, only the
    /// buyers of a quarter of the shards keep coming (skewed demand).
    #[arg(long, requires = "shards")]
    skew: bool,
    /// Run the order persister into this database (SQLite path,
    /// `postgres://` or `mysql://` URL) during the race, and report how long its backlog
    /// takes to drain once the buyers stop.
    #[arg(long)]
    persist_to: Option<String>,
    /// Also run `redis-benchmark` (50 clients, -P 1 and -P 16) with the
    /// classic check+DECR script and the full purchase script, same server.
    #[arg(long)]
    compare: bool,
    /// Print one JSON object per strategy (and per baseline) per line.
    #[arg(long)]
    json: bool,
    /// Also draw the run as an SVG picture here: each strategy's
    /// purchases/s and p99, and their latency CDFs.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<std::path::PathBuf>,
}

/// The strategies a run covers: one by name, or `all`.
#[derive(Clone)]
struct Strategies(Vec<Strategy>);

fn strategies(name: &str) -> Result<Strategies, String> {
    if name == "all" {
        return Ok(Strategies(Strategy::ALL.to_vec()));
    }
    Strategy::parse(name)
        .map(|s| Strategies(vec![s]))
        .ok_or_else(|| {
            let names: Vec<&str> = Strategy::ALL.iter().map(|s| s.name()).collect();
            format!("expected one of {} or all", names.join(", "))
        })
}

pub async fn run(args: Args) -> Result<ExitCode> {
    // Refused or skipped before any Redis starts.
    let strategies = runnable(&args)?;
    let target = args.redis.target()?;
    let engine = Engine::connect_target(&target.redis)
        .await
        .with_context(|| format!("connecting to {}", target.redis))?
        .with_coalescer(coalescer(&args))
        .with_durability(args.durability.get());
    let run_id = format!("{:08x}", rand::random::<u32>());
    let store = match &args.persist_to {
        Some(db) => Some(
            Store::open(db)
                .await
                .with_context(|| format!("opening {db}"))?,
        ),
        None => None,
    };
    let mut rows = Vec::new();
    let mut pictured = Vec::new();
    for strategy in strategies {
        let mut row = bench(
            &engine,
            &target.redis,
            &args,
            &run_id,
            strategy,
            store.as_ref(),
        )
        .await?;
        if args.json {
            println!("{}", serde_json::to_string(&row)?);
        }
        if args.plot.is_some() {
            pictured.push(crate::plot::StrategyRun {
                name: row.strategy,
                purchases_per_s: row.purchases_per_s,
                p99_ms: row.p99_ms,
                cdf: std::mem::take(&mut row.cdf),
            });
        }
        rows.push(row);
    }
    if let Some(path) = &args.plot {
        crate::plot::strategies(path, &pictured)?;
    }
    let baselines = if args.compare {
        compare(&engine, &target, &run_id).await?
    } else {
        Vec::new()
    };
    if args.json {
        for b in &baselines {
            println!("{}", serde_json::to_string(b)?);
        }
    } else {
        print_table(&rows, &baselines);
    }
    let ok = rows.iter().all(|r| r.ok);
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The strategies asked for that can run here: one that cannot is refused,
/// or skipped when `all` asked for it. Decided before any Redis starts.
fn runnable(args: &Args) -> Result<Vec<Strategy>> {
    let mut strategies = Vec::new();
    for &strategy in &args.strategy.0 {
        let skip = if args.shards > 1 && strategy.inventory() != Inventory::Hash {
            Some("cannot sell a sharded sale; --shards needs atomic or coalesced")
        } else if args.redis.is_cluster() && !strategy.runs_on_a_cluster() {
            Some("runs on one Redis server, not on a cluster")
        } else if args.redis.is_sentinel() && strategy == Strategy::Watch {
            Some("opens connections of its own, which would not follow the master Sentinel names")
        } else {
            None
        };
        match skip {
            None => strategies.push(strategy),
            Some(why) if args.strategy.0.len() > 1 => {
                eprintln!("{}: skipped, it {why}", strategy.name());
            }
            Some(why) => anyhow::bail!("strategy {} {why}", strategy.name()),
        }
    }
    Ok(strategies)
}

/// One strategy's race on a fresh sale, its checks, and its row; the sale
/// is deleted afterwards.
async fn bench(
    engine: &Engine,
    redis: &seckill_redis::Target,
    args: &Args,
    run_id: &str,
    strategy: Strategy,
    persist: Option<&Store>,
) -> Result<Row> {
    let id = format!("bench-{run_id}-{}", strategy.name());
    let spec = SaleSpec::new(&id, args.stock)
        .inventory(strategy.inventory())
        .shards(args.shards)
        .rule(Rule::PerUserLimit, args.per_user_limit.map(u64::from));
    let sale = engine.create_sale(&spec).await?;
    let generation = sale.generation;
    // Where orders are kept: the sale, or each of its shards.
    let parts = engine.parts(&id).await?;
    let purchaser = engine.purchaser(strategy, &id).await?;
    let persister = match persist {
        Some(store) => Some(start_persister(store, redis).await?),
        None => None,
    };
    let bar = progress(args.buyers, strategy.name());
    let requests = buyers(args.buyers, args.shards, args.skew);
    let ticker = bar.clone();
    let persister_cpu = threads_cpu_us(PERSISTER_THREADS);
    let mut meter = Meter::start(redis).await?;
    let outcome = race(
        &purchaser,
        requests,
        args.concurrency as usize,
        move |done| ticker.set_position(done),
    )
    .await;
    let cost = meter.read(strategy.plain_commands()).await?;
    bar.finish_and_clear();
    let persisted = match (persist, persister) {
        (Some(store), Some(running)) => {
            let drain = Drain {
                engine,
                store,
                parts: &parts,
                generation,
            };
            Some(drain.measure(running, &mut meter, persister_cpu).await?)
        }
        _ => None,
    };
    let verdict = verify(engine, &id, &outcome.demand).await?;
    let sharded = match sale.sharding {
        Some(_) => Some(sharded_run(engine, redis, &id).await?),
        None => None,
    };
    engine.delete_sale(&id).await?;
    let measured = Measured {
        outcome,
        cost,
        attempts: purchaser.attempts(),
        verdict,
        persisted,
        sharded,
    };
    Ok(measured.row(args, strategy))
}

/// A strategy's race and the checks after it: what its row is made of.
struct Measured {
    outcome: Race,
    cost: Cost,
    /// The purchaser's script calls, retries included.
    attempts: u64,
    verdict: Verdict,
    persisted: Option<Persisted>,
    sharded: Option<ShardedRun>,
}

impl Measured {
    /// The row: latencies, Redis time per purchase answered, and whether
    /// every check passed.
    fn row(self, args: &Args, strategy: Strategy) -> Row {
        let Measured {
            outcome,
            cost,
            attempts,
            verdict,
            persisted,
            sharded,
        } = self;
        let mut latency = Latency::default();
        for us in &outcome.latencies_us {
            latency.record(std::time::Duration::from_micros(*us));
        }
        let seconds = outcome.elapsed.as_secs_f64();
        let errors = outcome.outcomes.get("error").copied().unwrap_or(0);
        let stock_moving = outcome.outcomes.get("stock_moving").copied().unwrap_or(0);
        let answered = outcome.latencies_us.len() as u64 - errors;
        let (redis_us, redis_cpu_us) = cost.per(answered).unzip();
        let by_master = if cost.by_master.len() > 1 && answered > 0 {
            cost.by_master
                .iter()
                .map(|(master, us)| MasterShare {
                    master: master.clone(),
                    redis_us: us / answered as f64,
                })
                .collect()
        } else {
            Vec::new()
        };
        Row {
            strategy: strategy.name(),
            stock: args.stock,
            buyers: args.buyers,
            concurrency: args.concurrency,
            sold: verdict.recorded,
            oversold: verdict.oversold,
            undersold: verdict.undersold,
            limit_violations: verdict.limit_violations,
            errors,
            stock_moving,
            seconds,
            purchases_per_s: args.buyers as f64 / seconds,
            attempts_per_s: attempts as f64 / seconds,
            p50_ms: latency.ms(0.5),
            p99_ms: latency.ms(0.99),
            redis_us_per_purchase: redis_us,
            redis_cpu_us_per_purchase: redis_cpu_us.flatten(),
            redis_us_per_purchase_by_master: by_master,
            ok: verdict.ok
                && errors == 0
                && sharded.as_ref().is_none_or(|s| s.problems.is_empty())
                && persisted
                    .as_ref()
                    .is_none_or(|p| p.orders == outcome.demand.acknowledged.len() as u64),
            persisted,
            sharded,
            cdf: match args.plot {
                Some(_) => crate::plot::cdf(&outcome.latencies_us, 200),
                None => Vec::new(),
            },
            verdict,
        }
    }
}

/// The shards of sharded sale `id` after its race: what each sold, on
/// which master, and the transfers that stocked them.
async fn sharded_run(
    engine: &Engine,
    redis: &seckill_redis::Target,
    id: &str,
) -> Result<ShardedRun> {
    let check = engine.sharding_check(id).await?;
    let masters = redis.masters().await?;
    let mut shards = Vec::new();
    for shard in &check.sharding.shards {
        let slot = seckill_redis::key_slot(&Engine::stream_key(&shard.id)?);
        let master = masters.iter().find(|m| m.serves(slot));
        shards.push(ShardRow {
            id: shard.id.clone(),
            master: master.map_or_else(|| "none".to_owned(), |m| m.addr()),
            sold: shard.sold,
        });
    }
    let give_backs = check.transfers.iter().filter(|t| t.from.is_some()).count() as u64;
    Ok(ShardedRun {
        refills: check.transfers.len() as u64 - give_backs,
        give_backs,
        problems: check.problems,
        shards,
    })
}

fn coalescer(args: &Args) -> CoalescerConfig {
    let default = CoalescerConfig::default();
    CoalescerConfig {
        max_batch: args.batch_max.map_or(default.max_batch, |n| n as usize),
        max_wait: args
            .batch_wait_us
            .map_or(default.max_wait, std::time::Duration::from_micros),
        max_in_flight: args
            .batch_in_flight
            .map_or(default.max_in_flight, |n| n as usize),
    }
}

/// `count` one-unit requests from `count × 0.7` users, so about 30 % of the
/// requests come from a user who asks again; each has its own request id.
/// Skewed (a sale of `shards`): after the first fifth, only users whose
/// home is one of the first quarter of the shards.
fn buyers(count: u64, shards: u32, skew: bool) -> Vec<PurchaseRequest> {
    let users = (count * 7 / 10).max(1);
    let keen = (shards as usize / 4).max(1);
    (0..count)
        .map(|i| {
            let user = loop {
                let user = format!("u{}", rand::random_range(0..users));
                let late = skew && i >= count / 5;
                if !late || seckill_engine::home_shard(&user, shards as usize) < keen {
                    break user;
                }
            };
            PurchaseRequest::new(&user).request_id(&format!("r{i}"))
        })
        .collect()
}
