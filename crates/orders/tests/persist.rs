//! The order pipeline against a real redis-server and real SQL: SQLite
//! always, PostgreSQL when one is reachable (said so when skipped).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use seckill_engine::{OrderId, Outcome, PurchaseRequest, SaleSpec, Strategy};
use seckill_orders::{
    Error, Finding, Persister, PersisterConfig, Store, StoredOrder, audit, repair_from_sql,
    unpersisted,
};

mod common;

use common::{
    Rig, Server, ServerDatabase, assert_left, buy, persister_config as config, rig, server_database,
};

/// Runs persister rounds until the sale's audit shows no backlog.
async fn drain(rig: &Rig, sale: &str, consumer: &str) {
    let mut persister = Persister::new(&rig.server.url(), rig.store.clone(), config(consumer))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if persister.round().await.unwrap() > 0 {
            continue;
        }
        let report = audit(&rig.engine, &rig.store, sale).await.unwrap();
        if report.backlog == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "backlog never drained: {report:?}"
        );
    }
}

/// Every order Redis holds is in SQL exactly once, in the same state.
async fn assert_sql_matches_redis(rig: &Rig, sale: &str) {
    let redis = rig.engine.orders(sale).await.unwrap();
    let generation = rig.engine.sale(sale).await.unwrap().generation as i64;
    let sql = rig.store.orders(sale, generation).await.unwrap();
    assert_eq!(sql.len(), redis.len(), "row count");
    let by_id: HashMap<&str, &StoredOrder> = sql.iter().map(|o| (o.order_id.as_str(), o)).collect();
    for order in &redis {
        let row = by_id.get(order.order_id.as_str()).expect(&order.order_id);
        let id: OrderId = order.order_id.parse().unwrap();
        assert_eq!(
            (
                row.state.as_str(),
                row.sale_id.as_str(),
                row.generation,
                row.user_id.as_str(),
                row.quantity,
                row.created_ms,
            ),
            (
                order.state.as_str(),
                sale,
                generation,
                order.user_id.as_str(),
                i64::from(order.quantity),
                id.ms as i64,
            ),
            "{}",
            order.order_id
        );
        assert!(row.updated_ms >= row.created_ms, "{row:?}");
    }
    let report = audit(&rig.engine, &rig.store, sale).await.unwrap();
    assert!(report.clean, "{report:#?}");
}

async fn twenty_thousand_purchases(rig: &Rig) {
    rig.engine
        .create_sale(&SaleSpec::new("big", 20_000))
        .await
        .unwrap();
    let orders = buy(&rig.engine, Strategy::Atomic, "big", 20_000).await;
    assert_eq!(orders.len(), 20_000);
    for order in orders.iter().step_by(7) {
        rig.engine.pay(order).await.unwrap();
    }
    for order in orders.iter().skip(3).step_by(11) {
        let _ = rig.engine.cancel(order).await;
    }
    drain(rig, "big", "p1").await;
    assert_sql_matches_redis(rig, "big").await;
    let paid = rig
        .store
        .orders(
            "big",
            rig.engine.sale("big").await.unwrap().generation as i64,
        )
        .await
        .unwrap()
        .iter()
        .filter(|o| o.state == seckill_engine::OrderState::Paid)
        .count();
    assert_eq!(paid, 20_000usize.div_ceil(7));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_thousand_purchases_reach_sqlite_exactly_once() {
    twenty_thousand_purchases(&rig().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_thousand_purchases_reach_postgres_exactly_once() {
    if let Some((rig, _db)) = rig_on(Server::Postgres).await {
        twenty_thousand_purchases(&rig).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_thousand_purchases_reach_mysql_exactly_once() {
    if let Some((rig, _db)) = rig_on(Server::Mysql).await {
        twenty_thousand_purchases(&rig).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persisters_killed_mid_batch_or_running_side_by_side_lose_and_duplicate_nothing() {
    let rig = rig().await;
    rig.engine
        .create_sale(&SaleSpec::new("k", 10_000))
        .await
        .unwrap();
    let url = rig.server.url();
    // Two persisters side by side while buyers arrive; one is killed mid-way.
    let doomed = Persister::new(&url, rig.store.clone(), config("doomed"))
        .await
        .unwrap();
    let steady = Persister::new(&url, rig.store.clone(), config("steady"))
        .await
        .unwrap();
    let doomed = tokio::spawn(doomed.run(std::future::pending()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let steady = tokio::spawn(steady.run(async {
        stopped.await.ok();
    }));
    let buying = tokio::spawn({
        let engine = rig.engine.clone();
        async move { buy(&engine, Strategy::Atomic, "k", 10_000).await }
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    doomed.abort();
    let orders = buying.await.unwrap();
    assert_eq!(orders.len(), 10_000);
    stop.send(()).unwrap();
    steady.await.unwrap();
    // A fresh persister takes over whatever the dead one left pending.
    drain(&rig, "k", "heir").await;
    assert_sql_matches_redis(&rig, "k").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_orders_are_expired_in_sql_and_their_stock_resold() {
    let rig = rig().await;
    let spec = SaleSpec::new("exp", 50)
        .per_user_limit(1)
        .payment_timeout_secs(1);
    rig.engine.create_sale(&spec).await.unwrap();
    let orders = buy(&rig.engine, Strategy::Atomic, "exp", 50).await;
    for order in &orders[..10] {
        rig.engine.pay(order).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(rig.engine.expire_due("exp", 1_000).await.unwrap(), 40);
    let again = buy(&rig.engine, Strategy::Atomic, "exp", 50).await;
    assert_eq!(again.len(), 40, "expired units and allowances came back");
    drain(&rig, "exp", "p").await;
    assert_sql_matches_redis(&rig, "exp").await;
    let generation = rig.engine.sale("exp").await.unwrap().generation as i64;
    let sql = rig.store.orders("exp", generation).await.unwrap();
    assert_eq!(
        sql.iter()
            .filter(|o| o.state == seckill_engine::OrderState::Expired)
            .count(),
        40
    );
}

#[tokio::test]
async fn audit_finds_planted_mismatches() {
    let rig = rig().await;
    rig.engine
        .create_sale(&SaleSpec::new("a", 100).per_user_limit(1))
        .await
        .unwrap();
    let orders = buy(&rig.engine, Strategy::Atomic, "a", 30).await;
    drain(&rig, "a", "p").await;
    assert_sql_matches_redis(&rig, "a").await;

    sqlx::query("DELETE FROM orders WHERE order_id = $1")
        .bind(&orders[0])
        .execute(rig.store.pool())
        .await
        .unwrap();
    let report = audit(&rig.engine, &rig.store, "a").await.unwrap();
    assert_eq!(
        report.findings,
        [Finding::MissingInSql {
            order_id: orders[0].clone()
        }]
    );

    let mut conn = rig.engine.connection();
    let _: i64 = redis::cmd("HSET")
        .arg("seckill:{sale:a}:sale")
        .arg("left")
        .arg(99)
        .query_async(&mut conn)
        .await
        .unwrap();
    let report = audit(&rig.engine, &rig.store, "a").await.unwrap();
    assert!(!report.clean);
    assert!(report.findings.contains(&Finding::StockMismatch {
        stock: 100,
        remaining: 99,
        held: 30
    }));

    // A buyer's count lost while the buyer holds an order: the limit could
    // then be passed, so the audit must say so.
    let _: i64 = redis::cmd("HDEL")
        .arg("seckill:{sale:a}:sale")
        .arg("u:u1")
        .query_async(&mut conn)
        .await
        .unwrap();
    let report = audit(&rig.engine, &rig.store, "a").await.unwrap();
    assert!(
        report.findings.contains(&Finding::BuyerCountMismatch {
            user_id: "u1".to_owned(),
            counted: 0,
            held: 1
        }),
        "{report:#?}"
    );
}

#[tokio::test]
async fn a_backlog_is_reported_apart_from_mismatches() {
    let rig = rig().await;
    rig.engine
        .create_sale(&SaleSpec::new("b", 10))
        .await
        .unwrap();
    buy(&rig.engine, Strategy::Atomic, "b", 4).await;
    let report = audit(&rig.engine, &rig.store, "b").await.unwrap();
    assert_eq!((report.backlog, report.in_backlog), (4, 4));
    assert!(report.clean, "{report:#?}");
    assert!(matches!(
        repair_from_sql(&rig.engine, &rig.store, "b").await,
        Err(Error::Backlog { backlog: 4, .. })
    ));
    // No persister has read the sale: what a drain waits for is in its
    // own stream.
    assert_left(&rig.engine, "b", 4, 0).await;
}

#[tokio::test]
async fn a_redis_that_lost_its_data_is_rebuilt_from_sql() {
    rebuilt_from_sql(&rig().await).await;
}

#[tokio::test]
async fn a_redis_that_lost_its_data_is_rebuilt_from_postgres_and_mysql() {
    for server in [Server::Postgres, Server::Mysql] {
        if let Some((rig, _db)) = rig_on(server).await {
            rebuilt_from_sql(&rig).await;
        }
    }
}

async fn rebuilt_from_sql(rig: &Rig) {
    let spec = SaleSpec::new("r", 10).per_user_limit(2);
    rig.engine.create_sale(&spec).await.unwrap();
    let orders = buy(&rig.engine, Strategy::Atomic, "r", 6).await;
    rig.engine.pay(&orders[0]).await.unwrap();
    rig.engine.cancel(&orders[1]).await.unwrap();
    drain(rig, "r", "p").await;

    let mut conn = rig.engine.connection();
    let () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    let report = audit(&rig.engine, &rig.store, "r").await.unwrap();
    assert_eq!(report.findings, [Finding::SaleMissingInRedis]);

    repair_from_sql(&rig.engine, &rig.store, "r").await.unwrap();
    let sale = rig.engine.sale("r").await.unwrap();
    assert_eq!((sale.remaining, sale.sold), (5, 5));
    let report = audit(&rig.engine, &rig.store, "r").await.unwrap();
    assert!(report.clean, "{report:#?}");
    // Request ids and order numbers carry on from where they were.
    let buy = rig.engine.purchaser(Strategy::Atomic, "r").await.unwrap();
    let first = rig.store.orders("r", sale.generation as i64).await.unwrap();
    let first = first.iter().find(|o| o.order_id == orders[0]).unwrap();
    let retry = buy
        .purchase(
            &PurchaseRequest::new(&first.user_id).request_id(first.request_id.as_deref().unwrap()),
        )
        .await
        .unwrap();
    assert!(matches!(retry, Outcome::Duplicate(o) if o.order_id == orders[0]));
    let fresh = buy.purchase(&PurchaseRequest::new("new")).await.unwrap();
    let Outcome::Ok(fresh) = fresh else {
        panic!("{fresh:?}")
    };
    assert!(!orders.contains(&fresh.order_id));
    assert_eq!(
        rig.engine.pay(&orders[0]).await.unwrap(),
        seckill_engine::OrderState::Paid
    );
    // A second rebuild (another process's, an admin's) over the sale now
    // back is refused: it would delete `fresh`, which SQL may not have yet.
    assert!(matches!(
        rig.engine.restore_sale(&spec, sale.generation, &[]).await,
        Err(seckill_engine::Error::SaleExists(_))
    ));
    assert!(rig.engine.order(&fresh.order_id).await.is_ok());
}

#[tokio::test]
async fn trimming_keeps_every_uncommitted_entry_and_every_pending_order_and_abandoned_batches_are_taken_over()
 {
    let rig = rig().await;
    rig.engine
        .create_sale(&SaleSpec::new("t", 100).payment_timeout_secs(1))
        .await
        .unwrap();
    buy(&rig.engine, Strategy::Atomic, "t", 20).await;
    drain(&rig, "t", "p").await;
    // Persisted, but pending orders live in the stream: nothing is trimmed.
    Persister::new(&rig.server.url(), rig.store.clone(), config("p1"))
        .await
        .unwrap()
        .round()
        .await
        .unwrap();
    assert_eq!(rig.engine.stream_events("t").await.unwrap(), 20);
    // Once they expire, the sweep's cursor passes them and they may go.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(rig.engine.expire_due("t", 100).await.unwrap(), 20);
    drain(&rig, "t", "p").await;
    // A persister reads 5 new entries and cannot commit them (its database
    // lost its table), then is gone.
    buy(&rig.engine, Strategy::Atomic, "t", 5).await;
    let dir = tempfile::tempdir().unwrap();
    let broken = Store::open(dir.path().join("broken.db").to_str().unwrap())
        .await
        .unwrap();
    sqlx::query("DROP TABLE orders")
        .execute(broken.pool())
        .await
        .unwrap();
    let mut ghost = Persister::new(&rig.server.url(), broken, config("ghost"))
        .await
        .unwrap();
    assert!(ghost.round().await.is_err(), "the ghost's commit must fail");
    drop(ghost);
    buy(&rig.engine, Strategy::Atomic, "t", 3).await;
    // One persister round trims: the 20 purchases go, the ghost's 5 and the
    // 3 undelivered stay (the 3 are then persisted). The sale was armed by
    // then, so its expiry went to the ledger alone, not to its stream.
    let mut p = Persister::new(
        &rig.server.url(),
        rig.store.clone(),
        PersisterConfig {
            claim_idle: Duration::from_secs(60),
            ..config("p2")
        },
    )
    .await
    .unwrap();
    p.round().await.unwrap();
    p.round().await.unwrap();
    let mut conn = rig.engine.connection();
    let len: u64 = redis::cmd("XLEN")
        .arg("seckill:{sale:t}:orders")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        len, 8,
        "trimmed down to the sweep's cursor and the uncommitted entries"
    );
    assert_eq!(unpersisted(&mut conn, "t").await.unwrap(), 5);
    // A drain given up says where what is left waits: this quiet sale
    // told them through the ledger.
    assert_left(&rig.engine, "t", 0, 5).await;
    // Once the ghost's batch is old enough, a persister takes it over.
    tokio::time::sleep(Duration::from_millis(250)).await;
    drain(&rig, "t", "heir").await;
    assert_eq!(unpersisted(&mut conn, "t").await.unwrap(), 0);
    assert_sql_matches_redis(&rig, "t").await;
}

/// A rig whose SQL is a fresh database on `server`; `None` when skipped.
async fn rig_on(server: Server) -> Option<(Rig, ServerDatabase)> {
    let (store, db) = server_database(server).await?;
    let mut rig = rig().await;
    rig.store = store;
    Some((rig, db))
}

#[tokio::test]
async fn a_sale_recreated_under_a_running_persister_keeps_being_persisted() {
    let rig = rig().await;
    rig.engine
        .create_sale(&SaleSpec::new("again", 10))
        .await
        .unwrap();
    buy(&rig.engine, Strategy::Atomic, "again", 3).await;
    let mut persister = Persister::new(&rig.server.url(), rig.store.clone(), config("p"))
        .await
        .unwrap();
    while persister.round().await.unwrap() > 0 {}
    // Deleted and made again between two rounds: its stream and group are new.
    rig.engine.delete_sale("again").await.unwrap();
    rig.engine
        .create_sale(&SaleSpec::new("again", 10))
        .await
        .unwrap();
    let fresh = buy(&rig.engine, Strategy::Atomic, "again", 4).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let _ = persister.round().await;
        let generation = rig.engine.sale("again").await.unwrap().generation as i64;
        let rows = rig.store.orders("again", generation).await.unwrap();
        if rows.len() == fresh.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new sale was never persisted"
        );
    }
    assert_sql_matches_redis(&rig, "again").await;
}

#[tokio::test]
async fn a_purchase_arriving_after_its_settlement_still_fills_in_its_request_id() {
    let rig = rig().await;
    let event = |state, at_ms, request_id: Option<&str>| seckill_engine::Event {
        order_id: "late-1-1000-0-0".into(),
        sale_id: "late".into(),
        generation: 1,
        user_id: "u".into(),
        quantity: 1,
        request_id: request_id.map(str::to_owned),
        state,
        created_ms: 1_000,
        at_ms,
    };
    use seckill_engine::OrderState::{Paid, PendingPayment};
    rig.store.apply(&[event(Paid, 2_000, None)]).await.unwrap();
    rig.store
        .apply(&[event(PendingPayment, 1_000, Some("r-9"))])
        .await
        .unwrap();
    let rows = rig.store.orders("late", 1).await.unwrap();
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(
        (
            row.state.as_str(),
            row.request_id.as_deref(),
            row.created_ms,
            row.updated_ms
        ),
        ("paid", Some("r-9"), 1_000, 2_000)
    );
}

#[tokio::test]
async fn every_sqlite_form_creates_its_file_and_folder() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    for (n, form) in [
        "{root}/a/plain.db",
        "sqlite:{root}/b/short.db",
        "sqlite://{root}/c/long.db",
        "sqlite://{root}/d/params.db?mode=rwc",
    ]
    .iter()
    .enumerate()
    {
        let target = form.replace("{root}", &root);
        let store = Store::open(&target)
            .await
            .unwrap_or_else(|e| panic!("{target}: {e}"));
        store.ping().await.unwrap();
        let file = target
            .trim_start_matches("sqlite://")
            .trim_start_matches("sqlite:")
            .split('?')
            .next()
            .unwrap()
            .to_owned();
        assert!(std::path::Path::new(&file).is_file(), "{n}: {file}");
    }
    assert!(Store::open("sqlite:").await.is_err());
}

/// A paid order's payment reference: the first one recorded stays (a
/// webhook delivered twice changes nothing), on each database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_payment_reference_stays_on_every_database() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Store::open(&dir.path().join("o.db").to_string_lossy())
        .await
        .unwrap();
    let mut stores = vec![("sqlite", sqlite, None)];
    for (name, server) in [("postgres", Server::Postgres), ("mysql", Server::Mysql)] {
        if let Some((store, guard)) = server_database(server).await {
            stores.push((name, store, Some(guard)));
        }
    }
    for (name, store, _guard) in &stores {
        assert_eq!(
            store.payment_ref("s-1-2-0-0").await.unwrap(),
            None,
            "{name}"
        );
        store.record_payment("s-1-2-0-0", "pi_first").await.unwrap();
        store
            .record_payment("s-1-2-0-0", "pi_second")
            .await
            .unwrap();
        assert_eq!(
            store.payment_ref("s-1-2-0-0").await.unwrap().as_deref(),
            Some("pi_first"),
            "{name}"
        );
    }
}
