//! The sale rules every strategy must keep: per-user limit under
//! concurrency, idempotent request ids, the sale window, and the sale API.

use std::time::Duration;

use futures_util::future::join_all;
use seckill_engine::{
    Engine, Error, Inventory, MAX_STOCK, OrderState, Outcome, PurchaseRequest, Rule, SaleSpec,
    Status, StockChange, Strategy, StreamEntry,
};
use seckill_testkit::RedisServer;

async fn setup() -> (RedisServer, Engine) {
    let server = RedisServer::start().unwrap();
    let engine = Engine::connect(&server.url()).await.unwrap();
    (server, engine)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_user_racing_itself_never_passes_the_limit() {
    let (_server, engine) = setup().await;
    for strategy in Strategy::ALL {
        let id = format!("limit-{}", strategy.name());
        let spec = SaleSpec::new(&id, 100)
            .per_user_limit(3)
            .inventory(strategy.inventory());
        engine.create_sale(&spec).await.unwrap();
        let buy = engine.purchaser(strategy, &id).await.unwrap();
        let req = PurchaseRequest::new("greedy");
        let answers = join_all((0..50).map(|_| buy.purchase(&req))).await;
        let ok = answers
            .iter()
            .filter(|a| matches!(a, Ok(Outcome::Ok(_))))
            .count();
        let refused = answers
            .iter()
            .filter(|a| matches!(a, Ok(Outcome::Refused(Rule::PerUserLimit))))
            .count();
        assert_eq!((ok, refused), (3, 47), "{strategy:?}: {answers:?}");
        assert_eq!(
            engine.buyers(&id).await.unwrap()["greedy"],
            3,
            "{strategy:?}"
        );
        assert_eq!(
            engine.sale(&id).await.unwrap().remaining,
            97,
            "{strategy:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_unit_purchases_respect_limit_and_stock() {
    let (_server, engine) = setup().await;
    for strategy in [Strategy::Atomic, Strategy::Coalesced] {
        let id = format!("multi-{}", strategy.name());
        engine
            .create_sale(&SaleSpec::new(&id, 5).per_user_limit(4))
            .await
            .unwrap();
        let buy = engine.purchaser(strategy, &id).await.unwrap();
        let two = |user: &str| PurchaseRequest::new(user).quantity(2);
        let req = two("a");
        let answers = join_all((0..10).map(|_| buy.purchase(&req))).await;
        let ok = answers
            .iter()
            .filter(|a| matches!(a, Ok(Outcome::Ok(_))))
            .count();
        assert_eq!(ok, 2, "{strategy:?}: a may buy 2 x 2 under a limit of 4");
        // 1 unit left: 2 are refused as sold out, 1 is sold.
        assert_eq!(buy.purchase(&two("b")).await.unwrap(), Outcome::SoldOut);
        assert!(matches!(
            buy.purchase(&PurchaseRequest::new("b")).await.unwrap(),
            Outcome::Ok(o) if o.quantity == 1
        ));
        assert_eq!(engine.sale(&id).await.unwrap().remaining, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_request_id_returns_the_first_order_and_sells_once() {
    let (_server, engine) = setup().await;
    for strategy in [Strategy::Atomic, Strategy::Coalesced] {
        let id = format!("idem-{}", strategy.name());
        engine.create_sale(&SaleSpec::new(&id, 10)).await.unwrap();
        let buy = engine.purchaser(strategy, &id).await.unwrap();
        let req = PurchaseRequest::new("bob").quantity(2).request_id("req-1");
        let answers: Vec<Outcome> = join_all((0..20).map(|_| buy.purchase(&req)))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let first: Vec<_> = answers
            .iter()
            .filter(|a| matches!(a, Outcome::Ok(_)))
            .collect();
        assert_eq!(first.len(), 1, "{strategy:?}: {answers:?}");
        let order = first[0].order().unwrap().clone();
        for a in &answers {
            assert_eq!(a.order(), Some(&order), "{strategy:?}");
        }
        assert_eq!(engine.sale(&id).await.unwrap().remaining, 8);
        assert_eq!(engine.stream_events(&id).await.unwrap(), 1);
        // A different request id buys again.
        let again = buy
            .purchase(&PurchaseRequest::new("bob").request_id("req-2"))
            .await
            .unwrap();
        assert!(matches!(again, Outcome::Ok(o) if o.order_id != order.order_id));
    }
}

/// A request id is its buyer's own: buyers who happen to send the same
/// one (all at once, so the coalesced ones share a batch) each buy, and
/// each repeat answers its own buyer's order, never another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buyers_sending_the_same_request_id_each_get_their_own_order() {
    let (_server, engine) = setup().await;
    for strategy in [Strategy::Atomic, Strategy::Coalesced] {
        let id = format!("shared-id-{}", strategy.name());
        engine.create_sale(&SaleSpec::new(&id, 100)).await.unwrap();
        let buy = engine.purchaser(strategy, &id).await.unwrap();
        let users: Vec<String> = (0..10).map(|u| format!("u{u}")).collect();
        let requests: Vec<PurchaseRequest> = users
            .iter()
            .chain(&users)
            .map(|user| PurchaseRequest::new(user).request_id("same"))
            .collect();
        let answers: Vec<Outcome> = join_all(requests.iter().map(|req| buy.purchase(req)))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        for (i, user) in users.iter().enumerate() {
            let (first, again) = (&answers[i], &answers[i + users.len()]);
            assert!(first.order().is_some(), "{strategy:?} {user}: {first:?}");
            assert_eq!(first.order(), again.order(), "{strategy:?} {user}");
        }
        let mut orders: Vec<_> = answers.iter().filter_map(|a| a.order()).collect();
        orders.sort_by(|a, b| a.order_id.cmp(&b.order_id));
        orders.dedup();
        assert_eq!(orders.len(), users.len(), "{strategy:?}: {answers:?}");
        assert_eq!(engine.sale(&id).await.unwrap().remaining, 90);
        for order in orders {
            let info = engine.order(&order.order_id).await.unwrap();
            assert!(
                answers
                    .iter()
                    .zip(&requests)
                    .all(|(a, req)| a.order() != Some(order) || req.user_id == info.user_id),
                "{strategy:?}: {} answered to another buyer",
                order.order_id
            );
        }
    }
}

#[tokio::test]
async fn a_refused_request_id_can_be_retried() {
    let (_server, engine) = setup().await;
    engine
        .create_sale(&SaleSpec::new("retry", 1).per_user_limit(1))
        .await
        .unwrap();
    let buy = engine.purchaser(Strategy::Atomic, "retry").await.unwrap();
    let first = PurchaseRequest::new("a").request_id("r1");
    assert!(matches!(
        buy.purchase(&first).await.unwrap(),
        Outcome::Ok(_)
    ));
    let over = PurchaseRequest::new("a").request_id("r2");
    assert_eq!(
        buy.purchase(&over).await.unwrap(),
        Outcome::Refused(Rule::PerUserLimit)
    );
    assert_eq!(
        buy.purchase(&over).await.unwrap(),
        Outcome::Refused(Rule::PerUserLimit)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sales_outside_their_window_refuse_every_strategy() {
    let (_server, engine) = setup().await;
    let now = now_ms();
    for strategy in Strategy::ALL {
        let early = format!("early-{}", strategy.name());
        let late = format!("late-{}", strategy.name());
        let inv = strategy.inventory();
        let future = SaleSpec::new(&early, 5)
            .window(Some(now + 60_000), None)
            .inventory(inv);
        let past = SaleSpec::new(&late, 5)
            .window(Some(now - 60_000), Some(now - 1_000))
            .inventory(inv);
        engine.create_sale(&future).await.unwrap();
        engine.create_sale(&past).await.unwrap();
        assert_eq!(engine.sale(&early).await.unwrap().status, Status::Upcoming);
        assert_eq!(engine.sale(&late).await.unwrap().status, Status::Ended);
        let req = PurchaseRequest::new("u");
        let buy = engine.purchaser(strategy, &early).await.unwrap();
        assert_eq!(
            buy.purchase(&req).await.unwrap(),
            Outcome::Refused(Rule::StartsAt),
            "{strategy:?}"
        );
        let buy = engine.purchaser(strategy, &late).await.unwrap();
        assert_eq!(
            buy.purchase(&req).await.unwrap(),
            Outcome::Refused(Rule::EndsAt),
            "{strategy:?}"
        );
        assert_eq!(engine.sale(&early).await.unwrap().remaining, 5);
    }
}

/// Both production strategies check in one order (generation, request id,
/// window, limit, stock): a retry of a purchase gets its order back even
/// once the sale has ended, the same from `atomic` as from `coalesced`.
/// Each rule, set so that a purchase breaks it, is kept in Redis and
/// refuses that purchase by every strategy with its own outcome. A rule
/// added to `Rule` must be given its case here: the match is exhaustive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rule_refuses_by_every_strategy() {
    let (_server, engine) = setup().await;
    let now = now_ms();
    for rule in Rule::ALL {
        // The rule's value, and how many units the buyer takes first.
        let (value, before) = match rule {
            Rule::PerUserLimit => (1, 1),
            Rule::StartsAt => (now + 3_600_000, 0),
            Rule::EndsAt => (now - 1, 0),
        };
        for strategy in Strategy::ALL {
            let id = format!("{rule}-{}", strategy.name());
            let spec = SaleSpec::new(&id, 10)
                .inventory(strategy.inventory())
                .rule(rule, Some(value));
            let sale = engine.create_sale(&spec).await.unwrap();
            assert_eq!(sale.rules.get(rule), Some(value), "{id}");
            assert_eq!(sale.rules, spec.rules, "{id}: only the rule set");
            let buy = engine.purchaser(strategy, &id).await.unwrap();
            let req = PurchaseRequest::new("u");
            for _ in 0..before {
                assert!(
                    matches!(buy.purchase(&req).await, Ok(Outcome::Ok(_))),
                    "{id}"
                );
            }
            let refused = buy.purchase(&req).await.unwrap();
            assert_eq!(refused, Outcome::Refused(rule), "{id}");
            assert_eq!(refused.code(), rule.code());
            let left = engine.sale(&id).await.unwrap().remaining;
            assert_eq!(left, 10 - before, "{id}: a refusal sells nothing");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_the_sale_ended_gets_its_order_from_both_production_strategies() {
    let (_server, engine) = setup().await;
    for strategy in [Strategy::Atomic, Strategy::Coalesced] {
        let id = format!("closing-{}", strategy.name());
        let end = now_ms() + 400;
        let spec = SaleSpec::new(&id, 5)
            .per_user_limit(2)
            .window(None, Some(end));
        engine.create_sale(&spec).await.unwrap();
        let buy = engine.purchaser(strategy, &id).await.unwrap();
        let req = PurchaseRequest::new("u").request_id("r1");
        let Outcome::Ok(order) = buy.purchase(&req).await.unwrap() else {
            panic!("{strategy:?}: the first purchase must sell");
        };
        tokio::time::sleep(Duration::from_millis(end.saturating_sub(now_ms()) + 50)).await;
        assert_eq!(
            buy.purchase(&req).await.unwrap(),
            Outcome::Duplicate(order),
            "{strategy:?}"
        );
        let fresh = PurchaseRequest::new("u").request_id("r2");
        assert_eq!(
            buy.purchase(&fresh).await.unwrap(),
            Outcome::Refused(Rule::EndsAt),
            "{strategy:?}"
        );
    }
}

#[tokio::test]
async fn a_sale_that_opens_soon_starts_selling_on_time() {
    let (_server, engine) = setup().await;
    let spec = SaleSpec::new("soon", 1).window(Some(now_ms() + 300), None);
    engine.create_sale(&spec).await.unwrap();
    let buy = engine.purchaser(Strategy::Atomic, "soon").await.unwrap();
    let req = PurchaseRequest::new("u");
    assert_eq!(
        buy.purchase(&req).await.unwrap(),
        Outcome::Refused(Rule::StartsAt)
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(matches!(buy.purchase(&req).await.unwrap(), Outcome::Ok(_)));
    assert_eq!(engine.sale("soon").await.unwrap().status, Status::SoldOut);
}

#[tokio::test]
async fn the_sale_api_creates_reads_and_deletes() {
    let (_server, engine) = setup().await;
    let spec = SaleSpec::new("s-1", 7).name("Drop").per_user_limit(2);
    let sale = engine.create_sale(&spec).await.unwrap();
    assert_eq!(
        (sale.stock, sale.remaining, sale.sold, sale.status),
        (7, 7, 0, Status::Active)
    );
    assert_eq!(sale.rules.per_user_limit(), Some(2));
    assert_eq!(sale.name, "Drop");
    assert!(matches!(
        engine.create_sale(&spec).await,
        Err(Error::SaleExists(_))
    ));

    let buy = engine.purchaser(Strategy::Atomic, "s-1").await.unwrap();
    buy.purchase(&PurchaseRequest::new("x")).await.unwrap();
    let sale = engine.sale("s-1").await.unwrap();
    assert_eq!((sale.remaining, sale.sold), (6, 1));

    assert!(engine.delete_sale("s-1").await.unwrap());
    assert!(matches!(
        engine.sale("s-1").await,
        Err(Error::SaleNotFound(_))
    ));
    assert!(!engine.delete_sale("s-1").await.unwrap());
    assert!(matches!(
        buy.purchase(&PurchaseRequest::new("x")).await,
        Err(Error::SaleNotFound(_))
    ));
    // The id can be reused; the new sale's orders cannot collide with the old.
    let reborn = engine.create_sale(&spec).await.unwrap();
    assert_eq!(reborn.remaining, 7);
}

#[tokio::test]
async fn a_new_sale_s_stream_is_opened_with_its_first_node_and_no_order() {
    let (_server, engine) = setup().await;
    let sale = engine.create_sale(&SaleSpec::new("o", 3)).await.unwrap();
    let mut conn = engine.connection();
    let key = "seckill:{sale:o}:orders";
    let entries = StreamEntry::read(&mut conn, key, "-").await.unwrap();
    let opening = vec![("o".to_owned(), sale.generation.to_string())];
    assert_eq!(
        entries.iter().map(|e| &e.fields).collect::<Vec<_>>(),
        [&opening]
    );
    // Redis 7 gives a stream's first node 4 KB: the sale holds it from
    // its creation, so its first purchase does not allocate it.
    let bytes: u64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(bytes >= 4096, "{bytes} bytes");
    assert_eq!(engine.stream_events("o").await.unwrap(), 0);
    assert_eq!(StreamEntry::count(&mut conn, key).await.unwrap(), 0);
    let buy = engine.purchaser(Strategy::Atomic, "o").await.unwrap();
    buy.purchase(&PurchaseRequest::new("x")).await.unwrap();
    assert_eq!(engine.stream_events("o").await.unwrap(), 1);
    assert_eq!(StreamEntry::count(&mut conn, key).await.unwrap(), 1);
}

#[tokio::test]
async fn bad_input_is_refused_with_the_field_named() {
    let (_server, engine) = setup().await;
    fn invalid<T: std::fmt::Debug>(r: Result<T, Error>) -> &'static str {
        match r {
            Err(Error::Invalid { field, .. }) => field,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }
    for id in ["", "a b", "a{b}", "ü", &"x".repeat(65)] {
        assert_eq!(
            invalid(engine.create_sale(&SaleSpec::new(id, 1)).await),
            "sale id"
        );
        assert_eq!(invalid(engine.sale(id).await), "sale id");
    }
    let limit0 = SaleSpec::new("z", 1).per_user_limit(0);
    assert_eq!(invalid(engine.create_sale(&limit0).await), "per_user_limit");
    let backwards = SaleSpec::new("z", 1).window(Some(10), Some(5));
    assert!(matches!(
        engine.create_sale(&backwards).await,
        Err(Error::Inconsistent {
            field: "ends_at",
            ..
        })
    ));
    let huge = SaleSpec::new("z", seckill_engine::MAX_STOCK + 1);
    assert_eq!(invalid(engine.create_sale(&huge).await), "stock");

    engine.create_sale(&SaleSpec::new("z", 5)).await.unwrap();
    let buy = engine.purchaser(Strategy::Atomic, "z").await.unwrap();
    for (req, field) in [
        (PurchaseRequest::new(""), "user_id"),
        (PurchaseRequest::new("a:b"), "user_id"),
        (PurchaseRequest::new("a").quantity(0), "quantity"),
        (PurchaseRequest::new("a").quantity(1_001), "quantity"),
        (PurchaseRequest::new("a").request_id("r|1"), "request_id"),
    ] {
        assert_eq!(invalid(buy.purchase(&req).await), field);
    }
    let counter = SaleSpec::new("c", 5).inventory(Strategy::Lock.inventory());
    engine.create_sale(&counter).await.unwrap();
    assert!(matches!(
        engine.purchaser(Strategy::Lock, "z").await,
        Err(Error::Unsupported { .. })
    ));
    let lock = engine.purchaser(Strategy::Lock, "c").await.unwrap();
    assert_eq!(
        invalid(lock.purchase(&PurchaseRequest::new("a").quantity(2)).await),
        "quantity"
    );
    assert!(matches!(
        engine.purchaser(Strategy::List, "z").await,
        Err(Error::Unsupported { .. })
    ));
    let list = SaleSpec::new("l", 3).inventory(Inventory::List);
    engine.create_sale(&list).await.unwrap();
    assert!(matches!(
        engine.purchaser(Strategy::Atomic, "l").await,
        Err(Error::Unsupported { .. })
    ));
    assert_eq!(engine.sale("l").await.unwrap().remaining, 3);
    assert_eq!(
        engine.sale("z").await.unwrap().remaining,
        5,
        "refusals change nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_batch_setting_is_capped_and_every_purchase_lands() {
    let server = RedisServer::start().unwrap();
    let engine = Engine::connect(&server.url())
        .await
        .unwrap()
        .with_coalescer(seckill_engine::CoalescerConfig {
            max_batch: 100_000,
            max_wait: Duration::from_millis(20),
            max_in_flight: 1,
        });
    engine
        .create_sale(&SaleSpec::new("huge", 6_000))
        .await
        .unwrap();
    let buy = engine.purchaser(Strategy::Coalesced, "huge").await.unwrap();
    let requests: Vec<PurchaseRequest> = (0..6_000)
        .map(|i| PurchaseRequest::new(&format!("u{i}")).request_id(&format!("r{i}")))
        .collect();
    let answers = join_all(requests.iter().map(|r| buy.purchase(r))).await;
    let ok = answers
        .iter()
        .filter(|a| matches!(a, Ok(Outcome::Ok(_))))
        .count();
    assert_eq!(ok, 6_000, "{:?}", answers.iter().find(|a| a.is_err()));
    let sale = engine.sale("huge").await.unwrap();
    assert_eq!(sale.remaining, 0);
    assert_eq!(engine.stream_events("huge").await.unwrap(), 6_000);
}

#[tokio::test]
async fn ending_early_and_changing_stock_reach_purchasers_made_before() {
    let (_server, engine) = setup().await;
    for strategy in [Strategy::Atomic, Strategy::Coalesced] {
        for windowed in [false, true] {
            let id = format!("e-{}-{windowed}", strategy.name());
            let mut spec = SaleSpec::new(&id, 2).per_user_limit(10);
            if windowed {
                spec = spec.window(Some(now_ms() - 1_000), Some(now_ms() + 3_600_000));
            }
            engine.create_sale(&spec).await.unwrap();
            let buy = engine.purchaser(strategy, &id).await.unwrap();
            let order = match buy
                .purchase(&PurchaseRequest::new("a").request_id("r1"))
                .await
            {
                Ok(Outcome::Ok(order)) => order.order_id,
                other => panic!("{other:?}"),
            };
            let sold = buy.purchase(&PurchaseRequest::new("b")).await.unwrap();
            assert!(matches!(sold, Outcome::Ok(_)));
            assert!(matches!(
                buy.purchase(&PurchaseRequest::new("c")).await.unwrap(),
                Outcome::SoldOut
            ));

            // Stock: never below what is sold; adding sells again at once.
            let refused = engine.change_stock(&id, StockChange::Set(1)).await;
            assert!(
                matches!(refused, Err(Error::StateConflict { .. })),
                "{refused:?}"
            );
            let sale = engine.change_stock(&id, StockChange::Add(3)).await.unwrap();
            assert_eq!((sale.stock, sale.remaining, sale.sold), (5, 3, 2));
            assert!(matches!(
                buy.purchase(&PurchaseRequest::new("c")).await.unwrap(),
                Outcome::Ok(_)
            ));
            let sale = engine.change_stock(&id, StockChange::Set(3)).await.unwrap();
            assert_eq!((sale.stock, sale.remaining, sale.sold), (3, 0, 3));

            // Ended: refused as ended by the purchaser made before, while a
            // retry still gets its order and pending orders stay payable.
            engine.change_stock(&id, StockChange::Add(5)).await.unwrap();
            let sale = engine.end_sale(&id).await.unwrap();
            assert_eq!(sale.status, Status::Ended);
            assert!(sale.rules.ends_at_ms().is_some_and(|end| end <= now_ms()));
            assert!(matches!(
                buy.purchase(&PurchaseRequest::new("d")).await.unwrap(),
                Outcome::Refused(Rule::EndsAt)
            ));
            assert!(matches!(
                buy.purchase(&PurchaseRequest::new("a").request_id("r1"))
                    .await
                    .unwrap(),
                Outcome::Duplicate(_)
            ));
            assert_eq!(engine.pay(&order).await.unwrap(), OrderState::Paid);
            let again = engine.end_sale(&id).await.unwrap();
            assert_eq!(
                again.rules.ends_at_ms(),
                sale.rules.ends_at_ms(),
                "ending twice keeps the end"
            );
        }
    }
    // Never above the most a sale may hold, however it is reached.
    engine.create_sale(&SaleSpec::new("big", 1)).await.unwrap();
    engine
        .change_stock("big", StockChange::Add(MAX_STOCK - 1))
        .await
        .unwrap();
    let above = engine.change_stock("big", StockChange::Add(1)).await;
    assert!(
        matches!(above, Err(Error::StateConflict { .. })),
        "{above:?}"
    );
    // An upcoming sale ended: ended, with a window a sale may have.
    let later = SaleSpec::new("later", 1).window(Some(now_ms() + 60_000), None);
    engine.create_sale(&later).await.unwrap();
    let ended = engine.end_sale("later").await.unwrap();
    assert_eq!(ended.status, Status::Ended);
    assert!(
        ended.rules.starts_at_ms() < ended.rules.ends_at_ms(),
        "{ended:?}"
    );
    let missing = engine.end_sale("nosuch").await;
    assert!(
        matches!(missing, Err(Error::SaleNotFound(_))),
        "{missing:?}"
    );
    engine
        .create_sale(&SaleSpec::new("classic", 5).inventory(Inventory::Counter))
        .await
        .unwrap();
    let classic = engine.change_stock("classic", StockChange::Add(1)).await;
    assert!(matches!(classic, Err(Error::Invalid { .. })), "{classic:?}");
}
