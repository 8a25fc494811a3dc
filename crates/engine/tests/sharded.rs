//! Sharded sales on one real redis-server (the same code places shards on
//! different masters of a cluster: `tests/cluster.rs`): exact stock, limits
//! and request ids; nothing stranded under skewed demand; the books balance
//! at every moment while units move; sold out only once drained.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use seckill_engine::bench::{race, verify};
use seckill_engine::{Engine, Outcome, PurchaseRequest, Rule, SaleSpec, Strategy, home_shard};
use seckill_testkit::RedisServer;

/// Checks the sale's books every few ms until `stop`; answers how many
/// checks ran. Panics on the first that does not balance.
fn audit_continuously(
    engine: &Engine,
    id: &str,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<u64> {
    let (engine, id) = (engine.clone(), id.to_owned());
    tokio::spawn(async move {
        let mut checks = 0;
        while !stop.load(Ordering::Relaxed) {
            let check = engine.sharding_check(&id).await.unwrap();
            assert!(check.problems.is_empty(), "{:?}", check.problems);
            checks += 1;
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        checks
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_sale_sells_exactly_its_stock_with_exact_limits_and_request_ids() {
    let server = RedisServer::start().unwrap();
    let engine = Engine::connect(&server.url()).await.unwrap();
    let id = "sharded";
    let sale = engine
        .create_sale(&SaleSpec::new(id, 3_000).per_user_limit(2).shards(4))
        .await
        .unwrap();
    let sharding = sale.sharding.clone().unwrap();
    assert_eq!(sharding.shards.len(), 4);
    assert_eq!((sale.remaining, sale.sold), (3_000, 0));
    // The first refill stocked every shard from the pool.
    assert!(
        sharding.shards.iter().all(|s| s.remaining > 0),
        "{sharding:?}"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let auditor = audit_continuously(&engine, id, stop.clone());
    let purchaser = engine.purchaser(Strategy::Coalesced, id).await.unwrap();
    // 2,500 users asking 3 times each (limit 2), every request sent twice:
    // a repeated request id must get its order back, never a second unit.
    let requests: Vec<PurchaseRequest> = (0..7_500)
        .flat_map(|i| {
            let req = PurchaseRequest::new(&format!("u{}", i % 2_500)).request_id(&format!("r{i}"));
            [req.clone(), req]
        })
        .collect();
    let race = race(&purchaser, requests, 64, |_| {}).await;
    stop.store(true, Ordering::Relaxed);
    assert!(auditor.await.unwrap() > 0);

    let verdict = verify(&engine, id, &race.demand).await.unwrap();
    assert!(verdict.ok, "{verdict:#?} {:?}", race.outcomes);
    assert_eq!(
        (verdict.sold, verdict.oversold, verdict.limit_violations),
        (3_000, 0, 0)
    );
    assert_eq!(race.outcomes.get("ok"), Some(&3_000), "{:?}", race.outcomes);
    assert_eq!(race.outcomes.get("error"), None, "{:?}", race.outcomes);
    // Every buyer bought on its home shard only: each order's id names the
    // shard of its buyer's home.
    let buyer_of: std::collections::HashMap<String, String> = engine
        .ledger(id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.order_id, e.user_id))
        .collect();
    for order in &race.demand.acknowledged {
        let shard = order.order_id.split('-').next().unwrap();
        assert!(shard.starts_with("sharded~"), "{}", order.order_id);
        let home = home_shard(&buyer_of[&order.order_id], sharding.shards.len());
        assert_eq!(shard, sharding.shards[home].id, "{}", order.order_id);
    }
    let check = engine.sharding_check(id).await.unwrap();
    assert!(check.problems.is_empty(), "{:?}", check.problems);
    assert!(check.sharding.drained, "{:?}", check.sharding);
    let sale = engine.sale(id).await.unwrap();
    assert_eq!((sale.remaining, sale.sold), (0, 3_000));
    // Sold out now, for a buyer on any shard.
    for user in ["late-a", "late-b", "late-c", "late-d"] {
        let outcome = purchaser
            .purchase(&PurchaseRequest::new(user))
            .await
            .unwrap();
        assert_eq!(outcome, Outcome::SoldOut);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_demand_strands_no_unit_on_a_shard_whose_buyers_left() {
    let server = RedisServer::start().unwrap();
    let engine = Engine::connect(&server.url()).await.unwrap();
    let id = "skewed";
    let shards = 4;
    engine
        .create_sale(&SaleSpec::new(id, 2_000).shards(shards as u32))
        .await
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let auditor = audit_continuously(&engine, id, stop.clone());
    let purchaser = engine.purchaser(Strategy::Atomic, id).await.unwrap();

    // Everyone buys for a while, then only shard 0's buyers keep coming.
    let users: Vec<String> = (0..20_000).map(|i| format!("u{i}")).collect();
    let everyone = users.iter().take(400);
    let keen = users
        .iter()
        .filter(|u| home_shard(u, shards) == 0)
        .take(3_000);
    let requests: Vec<PurchaseRequest> = everyone
        .chain(keen)
        .map(|u| PurchaseRequest::new(u))
        .collect();
    let race = race(&purchaser, requests, 16, |_| {}).await;
    stop.store(true, Ordering::Relaxed);
    assert!(auditor.await.unwrap() > 0);

    let verdict = verify(&engine, id, &race.demand).await.unwrap();
    assert!(verdict.ok, "{verdict:#?} {:?}", race.outcomes);
    assert_eq!(verdict.sold, 2_000, "{:?}", race.outcomes);
    let check = engine.sharding_check(id).await.unwrap();
    assert!(check.problems.is_empty(), "{:?}", check.problems);
    assert!(check.sharding.drained);
    // Units came back from the shards whose buyers left.
    let given_back = check.transfers.iter().filter(|t| t.from.is_some()).count();
    assert!(given_back > 0, "{:?}", check.transfers);
    assert!(check.sharding.shards.iter().all(|s| s.remaining == 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_unit_of_a_drained_sale_sells_again_on_another_shard() {
    let server = RedisServer::start().unwrap();
    let engine = Engine::connect(&server.url()).await.unwrap();
    let id = "again";
    engine
        .create_sale(&SaleSpec::new(id, 8).shards(2))
        .await
        .unwrap();
    let purchaser = engine.purchaser(Strategy::Atomic, id).await.unwrap();
    let on = |shard: usize| {
        (0..)
            .map(|i| format!("b{i}"))
            .filter(move |u| home_shard(u, 2) == shard)
    };
    let mut orders = Vec::new();
    for user in on(0).take(8) {
        match purchaser
            .purchase(&PurchaseRequest::new(&user))
            .await
            .unwrap()
        {
            Outcome::Ok(order) => orders.push(order),
            other => panic!("{user}: {other:?}"),
        }
    }
    let next_on_0 = on(0).nth(8).unwrap();
    let outcome = purchaser
        .purchase(&PurchaseRequest::new(&next_on_0))
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::SoldOut);

    // Two units return to shard 0. A buyer of shard 1 gets one at once,
    // through a purchaser that never saw the sale drained (another
    // process's) and through this one, which did: nothing remembers
    // "sold out" past the sale's own word.
    engine.cancel(&orders[0].order_id).await.unwrap();
    engine.cancel(&orders[1].order_id).await.unwrap();
    let fresh = engine.purchaser(Strategy::Atomic, id).await.unwrap();
    let mut buyers = on(1);
    let outcome = fresh
        .purchase(&PurchaseRequest::new(&buyers.next().unwrap()))
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::Ok(_)), "{outcome:?}");
    let outcome = purchaser
        .purchase(&PurchaseRequest::new(&buyers.next().unwrap()))
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::Ok(_)), "{outcome:?}");
    let check = engine.sharding_check(id).await.unwrap();
    assert!(check.problems.is_empty(), "{:?}", check.problems);
    let sale = engine.sale(id).await.unwrap();
    assert_eq!((sale.sold, sale.remaining), (8, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_sale_refuses_what_it_cannot_do() {
    let server = RedisServer::start().unwrap();
    let engine = Engine::connect(&server.url()).await.unwrap();
    for (spec, field) in [
        (SaleSpec::new("z", 10).shards(0), "shards"),
        (SaleSpec::new("z", 10).shards(65), "shards"),
        (
            SaleSpec::new("z", 10)
                .shards(2)
                .inventory(seckill_engine::Inventory::List),
            "shards",
        ),
    ] {
        match engine.create_sale(&spec).await {
            Err(seckill_engine::Error::Invalid { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{spec:?}: {other:?}"),
        }
    }
    engine
        .create_sale(&SaleSpec::new("s", 10).shards(2))
        .await
        .unwrap();
    assert!(matches!(
        engine.purchaser(Strategy::Lua, "s").await,
        Err(seckill_engine::Error::Unsupported { .. })
    ));
    // A shard's stock moves only by transfers: its id is refused where only
    // the sale may be changed.
    let shard = engine.sale("s").await.unwrap().sharding.unwrap().shards[0]
        .id
        .clone();
    for refused in [
        engine
            .change_stock(&shard, seckill_engine::StockChange::Add(5))
            .await
            .err(),
        engine.end_sale(&shard).await.err(),
        engine.delete_sale(&shard).await.err(),
    ] {
        assert!(
            matches!(
                refused,
                Some(seckill_engine::Error::Invalid {
                    field: "sale id",
                    ..
                })
            ),
            "{refused:?}"
        );
    }
    // One unit per purchase.
    let purchaser = engine.purchaser(Strategy::Atomic, "s").await.unwrap();
    let two = purchaser
        .purchase(&PurchaseRequest::new("x").quantity(2))
        .await;
    assert!(
        matches!(
            two,
            Err(seckill_engine::Error::StateConflict {
                field: "quantity",
                ..
            })
        ),
        "{two:?}"
    );
    // Ended: every shard refuses; deleted: every shard's keys go.
    engine.end_sale("s").await.unwrap();
    let outcome = purchaser
        .purchase(&PurchaseRequest::new("x"))
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Refused(Rule::EndsAt));
    assert!(engine.delete_sale("s").await.unwrap());
    let ids = engine.sale_ids().await.unwrap();
    assert!(ids.is_empty(), "{ids:?}");
    assert!(matches!(
        engine.sale("s").await,
        Err(seckill_engine::Error::SaleNotFound(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buyer_waits_its_bound_while_no_refiller_acts_and_the_next_refiller_takes_over() {
    let server = RedisServer::start().unwrap();
    let engine = Engine::connect(&server.url()).await.unwrap();
    // A refiller that took the sale's refill lock and died: its 2 s lease
    // runs out, nobody releases it. Its sale's units all stay in the pool.
    let locks = seckill_lock::Locks::new(&seckill_redis::Target::server(&server.url()))
        .await
        .unwrap();
    let dead = locks
        .lock("refill:moving")
        .unwrap()
        .lease(Duration::from_secs(2))
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    std::mem::forget(dead);
    let sale = engine
        .create_sale(&SaleSpec::new("moving", 8).shards(2))
        .await
        .unwrap();
    assert_eq!(sale.sharding.unwrap().pool, 8);
    let purchaser = engine.purchaser(Strategy::Atomic, "moving").await.unwrap();

    // Units exist but cannot reach the shard: not "sold out", but
    // StockMoving once the buyer waited its bound.
    let asked = std::time::Instant::now();
    let answer = purchaser.purchase(&PurchaseRequest::new("early")).await;
    let waited = asked.elapsed();
    assert!(
        matches!(answer, Err(seckill_engine::Error::StockMoving(_))),
        "{answer:?}"
    );
    // The bound, plus the last look at the shard after it and a busy
    // machine's scheduling.
    let bound = seckill_engine::REFILL_WAIT + Duration::from_millis(250);
    assert!(
        waited >= seckill_engine::REFILL_WAIT / 2 && waited <= bound,
        "{waited:?}"
    );

    // Once the dead refiller's lease lapses, this process's refiller takes
    // the lock with a higher fence and stocks the shards.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let outcome = loop {
        match purchaser.purchase(&PurchaseRequest::new("later")).await {
            Err(seckill_engine::Error::StockMoving(_)) if std::time::Instant::now() < deadline => {}
            other => break other.unwrap(),
        }
    };
    assert!(matches!(outcome, Outcome::Ok(_)), "{outcome:?}");
    assert!(
        asked.elapsed() < Duration::from_secs(4),
        "{:?}",
        asked.elapsed()
    );
    let check = engine.sharding_check("moving").await.unwrap();
    assert!(check.problems.is_empty(), "{:?}", check.problems);
    assert!(
        check.transfers.iter().all(|t| t.fence > 1),
        "{:?}",
        check.transfers
    );
}
