//! The production path on a real local Redis Cluster (3 masters, 1 replica
//! each): sales on different masters sell exactly their stock, orders are
//! paid and cancelled, and the sales are listed together.

use seckill_engine::bench::{race, verify};
use seckill_engine::{Engine, OrderState, Outcome, PurchaseRequest, SaleSpec, Strategy};
use seckill_redis::Target;
use seckill_testkit::RedisCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sales_on_every_master_sell_exactly_their_stock() {
    let cluster = RedisCluster::start(3, 1).unwrap();
    let target = Target::cluster(&cluster.addresses().join(",")).unwrap();
    let engine = Engine::connect_target(&target).await.unwrap();

    // One sale per master: ids whose hash tag lands on each.
    let sales = cluster
        .one_id_per_master((0..1000).map(|i| format!("c{i}")), |id| {
            format!("seckill:{{sale:{id}}}:sale")
        })
        .unwrap();
    assert_eq!(sales.len(), 3);

    for (id, strategy) in sales
        .iter()
        .zip([Strategy::Atomic, Strategy::Coalesced, Strategy::Lock])
    {
        engine
            .create_sale(
                &SaleSpec::new(id, 500)
                    .per_user_limit(1)
                    .inventory(strategy.inventory()),
            )
            .await
            .unwrap();
        let purchaser = engine.purchaser(strategy, id).await.unwrap();
        let buyers: Vec<PurchaseRequest> = (0..2_000)
            .map(|i| {
                PurchaseRequest::new(&format!("u{}", i % 1_500)).request_id(&format!("{id}-r{i}"))
            })
            .collect();
        let race = race(&purchaser, buyers, 128, |_| {}).await;
        let verdict = verify(&engine, id, &race.demand).await.unwrap();
        assert!(
            verdict.ok,
            "{id} {strategy:?}: {verdict:#?} {:?}",
            race.outcomes
        );
        assert_eq!(verdict.oversold, 0);
        assert_eq!(race.outcomes.get("ok"), Some(&500), "{:?}", race.outcomes);
        assert_eq!(race.outcomes.get("error"), None, "{:?}", race.outcomes);
        let sale = engine.sale(id).await.unwrap();
        assert_eq!((sale.remaining, sale.sold), (0, 500));
    }

    // Orders change state where their sale lives; a cancelled one's unit
    // goes back.
    let id = &sales[0];
    let orders = engine.orders(id).await.unwrap();
    let buyer = engine.purchaser(Strategy::Atomic, id).await.unwrap();
    let paid = engine.pay(&orders[0].order_id).await.unwrap();
    assert_eq!(paid, OrderState::Paid);
    let cancelled = engine.cancel(&orders[1].order_id).await.unwrap();
    assert_eq!(cancelled, OrderState::Cancelled);
    assert_eq!(engine.sale(id).await.unwrap().remaining, 1);
    let again = buyer
        .purchase(&PurchaseRequest::new("late").request_id("late-1"))
        .await
        .unwrap();
    assert!(matches!(again, Outcome::Ok(_)), "{again:?}");

    let mut listed = engine.sale_ids().await.unwrap();
    listed.sort();
    let mut expected = sales.clone();
    expected.sort();
    assert_eq!(listed, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_sale_spreads_over_every_master_and_sells_exactly_its_stock() {
    let cluster = RedisCluster::start(3, 0).unwrap();
    let target = Target::cluster(&cluster.addresses().join(",")).unwrap();
    let engine = Engine::connect_target(&target).await.unwrap();
    let sale = engine
        .create_sale(&SaleSpec::new("hot", 3_000).per_user_limit(1).shards(6))
        .await
        .unwrap();
    let shards = sale.sharding.unwrap().shards;
    // Six shards, two on each of the three masters.
    let mut per_master = std::collections::HashMap::new();
    for shard in &shards {
        let slot = cluster
            .slot_of(&format!("seckill:{{sale:{}}}:sale", shard.id))
            .unwrap();
        *per_master
            .entry(cluster.master_of(slot).unwrap())
            .or_insert(0) += 1;
    }
    assert_eq!(per_master.len(), 3, "{per_master:?}");
    assert!(per_master.values().all(|&n| n == 2), "{per_master:?}");

    let purchaser = engine.purchaser(Strategy::Coalesced, "hot").await.unwrap();
    let buyers: Vec<PurchaseRequest> = (0..4_000)
        .map(|i| PurchaseRequest::new(&format!("u{i}")).request_id(&format!("r{i}")))
        .collect();
    let race = race(&purchaser, buyers, 64, |_| {}).await;
    let verdict = verify(&engine, "hot", &race.demand).await.unwrap();
    assert!(verdict.ok, "{verdict:#?} {:?}", race.outcomes);
    assert_eq!(race.outcomes.get("ok"), Some(&3_000), "{:?}", race.outcomes);
    let check = engine.sharding_check("hot").await.unwrap();
    assert!(check.problems.is_empty(), "{:?}", check.problems);
    assert_eq!(check.sharding.pool + check.sharding.in_flight, 0);
}
