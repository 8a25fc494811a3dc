//! `bench --compare`: `redis-benchmark` baselines on the same server, the
//! classic check+DECR, the full purchase script, its refusals and the
//! floors of the commands a purchase sends, each with its Redis time.

use anyhow::Result;
use seckill_engine::{Engine, PurchaseRequest, SaleSpec, Strategy};
use serde::Serialize;

use crate::redis_benchmark;
use crate::redis_cost::Meter;
use crate::target::Target;

#[derive(Serialize)]
pub(super) struct Baseline {
    pub(super) baseline: String,
    /// On a cluster, the master it ran on (`redis-benchmark` talks to the
    /// master of its sale's slot).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) master: Option<String>,
    pub(super) clients: u32,
    pub(super) pipeline: u32,
    pub(super) requests_per_s: f64,
    /// Redis command time per script call, µs.
    pub(super) redis_us_per_call: Option<f64>,
}

/// `redis-benchmark` running the classic check+DECR and the full purchase
/// script against a sale with stock enough never to sell out: the engine
/// builds both command lines from its own keys. Each baseline also reports
/// the Redis command time per call it cost.
pub(super) async fn compare(
    engine: &Engine,
    target: &Target,
    run_id: &str,
) -> Result<Vec<Baseline>> {
    let classic_sale = format!("rb-{run_id}-classic");
    let full_sale = format!("rb-{run_id}-full");
    engine
        .create_sale(
            &SaleSpec::new(&classic_sale, seckill_engine::MAX_STOCK)
                .inventory(Strategy::Lua.inventory()),
        )
        .await?;
    engine
        .create_sale(
            &SaleSpec::new(&full_sale, seckill_engine::MAX_STOCK)
                .inventory(Strategy::Atomic.inventory()),
        )
        .await?;
    let classic = engine.classic_decr_command(&classic_sale).await?;
    let full = engine
        .purchase_command(&full_sale, "u__rand_int__", "r__rand_int__")
        .await?;
    // Two sales: the refusal's read runs on a small sale, as the refusals
    // below do, not on one the purchase floor filled.
    let floor_sale = format!("rb-{run_id}-floor");
    let floor_read_sale = format!("rb-{run_id}-floor-read");
    for sale in [&floor_sale, &floor_read_sale] {
        engine
            .create_sale(&SaleSpec::new(sale, seckill_engine::MAX_STOCK))
            .await?;
    }
    let floor = engine.floor_command(&floor_sale, false).await?;
    let floor_refusal = engine.floor_command(&floor_read_sale, true).await?;
    let refusals = refusal_commands(engine, run_id).await?;
    let mut runs: Vec<(&str, &Vec<String>, &[u32])> = vec![
        ("classic check+DECR script", &classic, &[1, 16]),
        ("full purchase script", &full, &[1, 16]),
        (FLOOR_PURCHASE, &floor, &[16]),
        (FLOOR_REFUSAL, &floor_refusal, &[16]),
    ];
    for (name, _, command) in &refusals {
        runs.push((name, command, &[16]));
    }
    let requests = 200_000;
    let baselines = benchmark(target, runs, requests).await?;
    check_sales(
        engine,
        &full_sale,
        [(&floor_sale, requests), (&floor_read_sale, 0)],
        &refusals,
        requests,
    )
    .await?;
    engine.delete_sale(&classic_sale).await?;
    engine.delete_sale(&full_sale).await?;
    engine.delete_sale(&floor_sale).await?;
    engine.delete_sale(&floor_read_sale).await?;
    Ok(baselines)
}

/// Runs `redis-benchmark` (50 clients, each pipeline depth) on each
/// command line, metering the Redis time it cost.
async fn benchmark(
    target: &Target,
    runs: Vec<(&str, &Vec<String>, &[u32])>,
    requests: u64,
) -> Result<Vec<Baseline>> {
    let mut baselines = Vec::new();
    for (name, command, pipelines) in runs {
        let command: Vec<&str> = command.iter().map(String::as_str).collect();
        // FCALL|EVALSHA <name> <numkeys> <first key> …: on a cluster,
        // redis-benchmark talks straight to the master of that key's slot.
        let master = target.redis.master_of(command[3]).await?;
        for &pipeline in pipelines {
            let mut meter = Meter::start(&target.redis).await?;
            let rps = redis_benchmark::rps(&master, 50, pipeline, requests, &command)?;
            let cost = meter.read(&[]).await?.per(requests);
            baselines.push(Baseline {
                baseline: format!("redis-benchmark {name}"),
                master: target.redis.is_cluster().then(|| master.addr()),
                clients: 50,
                pipeline,
                requests_per_s: rps,
                redis_us_per_call: cost.map(|c| c.0),
            });
        }
    }
    Ok(baselines)
}

/// What each baseline's sale holds afterwards, or it measured other than
/// it says; each refusal's sale is deleted once checked.
async fn check_sales(
    engine: &Engine,
    full_sale: &str,
    floors: [(&String, u64); 2],
    refusals: &[(&'static str, String, Vec<String>)],
    requests: u64,
) -> Result<()> {
    // The full purchase must have sold on (nearly) every call: its random
    // request ids repeat by chance about 20 times in each run of 200,000,
    // and a repeat is answered with the earlier order.
    let full_orders = engine.stream_events(full_sale).await?;
    anyhow::ensure!(
        full_orders >= 2 * requests * 999 / 1000,
        "full purchase sale {full_sale} holds {full_orders} orders after {} calls",
        2 * requests
    );
    // The purchase floor must have written an order per call, and the
    // refusal's read none, or they measured less than they say.
    for (sale, expected) in floors {
        let events = engine.stream_events(sale).await?;
        anyhow::ensure!(
            events == expected,
            "floor sale {sale} holds {events} orders, not {expected}"
        );
    }
    for (name, sale, _) in refusals {
        // Each refusal baseline must have refused: its sale holds only the
        // order made to set it up.
        let events = engine.stream_events(sale).await?;
        anyhow::ensure!(
            events == 1,
            "baseline `{name}`'s sale holds {events} orders, not the 1 made to set it up"
        );
        engine.delete_sale(sale).await?;
    }
    Ok(())
}

/// Baseline names of the floors: what the commands a purchase sends cost
/// Redis alone, without any of the purchase's logic.
pub(super) const FLOOR_PURCHASE: &str = "floor: a purchase's three commands alone";
const FLOOR_REFUSAL: &str = "floor: a refusal's read alone";

/// Purchase script command lines that every call answers with a refusal,
/// as (baseline name, sale, command): the sale sold out, the buyer over
/// the limit, the buyer's request id already used (answered with its
/// order: a request id is its buyer's own).
async fn refusal_commands(
    engine: &Engine,
    run_id: &str,
) -> Result<Vec<(&'static str, String, Vec<String>)>> {
    let sold_out = format!("rb-{run_id}-sold-out");
    let limited = format!("rb-{run_id}-limit");
    let repeated = format!("rb-{run_id}-repeat");
    engine.create_sale(&SaleSpec::new(&sold_out, 1)).await?;
    let spec = SaleSpec::new(&limited, seckill_engine::MAX_STOCK).per_user_limit(1);
    engine.create_sale(&spec).await?;
    engine
        .create_sale(&SaleSpec::new(&repeated, seckill_engine::MAX_STOCK))
        .await?;
    for sale in [&sold_out, &limited, &repeated] {
        let outcome = engine
            .purchaser(Strategy::Atomic, sale)
            .await?
            .purchase(&PurchaseRequest::new("buyer").request_id("first"))
            .await?;
        anyhow::ensure!(
            matches!(outcome, seckill_engine::Outcome::Ok(_)),
            "setting up refusal baselines: {outcome:?}"
        );
    }
    Ok(vec![
        (
            "purchase script refusing: sold out",
            sold_out.clone(),
            engine
                .purchase_command(&sold_out, "u__rand_int__", "r__rand_int__")
                .await?,
        ),
        (
            "purchase script refusing: over the limit",
            limited.clone(),
            engine
                .purchase_command(&limited, "buyer", "r__rand_int__")
                .await?,
        ),
        (
            "purchase script answering a repeated request id",
            repeated.clone(),
            engine.purchase_command(&repeated, "buyer", "first").await?,
        ),
    ])
}
