//! Every strategy against a real redis-server: 10,000 buyers at concurrency
//! 256 race for 1,000 units, and every invariant must hold exactly.

use seckill_engine::bench::{race, verify};
use seckill_engine::{Engine, PurchaseRequest, Rule, SaleSpec, Strategy};
use seckill_testkit::RedisServer;

/// 10,000 requests from 7,000 users (3,000 of them ask twice).
fn buyers() -> Vec<PurchaseRequest> {
    (0..10_000)
        .map(|i| PurchaseRequest::new(&format!("u{}", i % 7_000)))
        .collect()
}

async fn race_with(strategy: Strategy, limit: Option<u32>) {
    let server = RedisServer::start().unwrap();
    let engine = Engine::connect(&server.url()).await.unwrap();
    let spec = SaleSpec::new("s1", 1_000)
        .inventory(strategy.inventory())
        .rule(Rule::PerUserLimit, limit.map(u64::from));
    engine.create_sale(&spec).await.unwrap();
    let purchaser = engine.purchaser(strategy, "s1").await.unwrap();
    let race = race(&purchaser, buyers(), 256, |_| {}).await;
    let verdict = verify(&engine, "s1", &race.demand).await.unwrap();
    assert!(verdict.ok, "{strategy:?}: {verdict:#?} {:?}", race.outcomes);
    assert_eq!(verdict.recorded, 1_000);
    assert_eq!(verdict.oversold, 0);
    assert_eq!(race.outcomes.get("ok"), Some(&1_000), "{:?}", race.outcomes);
    assert_eq!(race.outcomes.get("error"), None, "{:?}", race.outcomes);
    let sale = engine.sale("s1").await.unwrap();
    assert_eq!((sale.remaining, sale.sold), (0, 1_000));
    assert_eq!(sale.status, seckill_engine::Status::SoldOut);
    if matches!(strategy, Strategy::Atomic | Strategy::Coalesced) {
        assert_eq!(verdict.stream_events, 1_000);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_strategy_sells_exactly_the_stock() {
    race_with(Strategy::Lock, Some(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_strategy_sells_exactly_the_stock() {
    race_with(Strategy::Watch, Some(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_strategy_sells_exactly_the_stock() {
    race_with(Strategy::List, Some(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_strategy_sells_exactly_the_stock() {
    race_with(Strategy::Lua, Some(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_strategy_sells_exactly_the_stock() {
    race_with(Strategy::Atomic, Some(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coalesced_strategy_sells_exactly_the_stock() {
    race_with(Strategy::Coalesced, Some(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strategies_sell_exactly_the_stock_without_a_limit() {
    for strategy in [Strategy::List, Strategy::Atomic, Strategy::Coalesced] {
        race_with(strategy, None).await;
    }
}
