//! Finished sales leave Redis: archived once ended, settled and persisted,
//! Redis's memory returns to where it started, and SQL answers (and is
//! audited) alone. Against a real redis-server and SQLite.

use std::time::{Duration, Instant};

use seckill_engine::{Engine, Outcome, PurchaseRequest, SaleSpec, Strategy};
use seckill_orders::{
    Error, Persister, PersisterConfig, Store, archive, archive_due, audit, sweep, wait_drained,
};
use seckill_testkit::RedisServer;

mod common;

use common::{Server, buy, rig, server_database};

async fn used_memory(url: &str) -> i64 {
    let mut conn = seckill_redis::Target::server(url).connect().await.unwrap();
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

/// The pay-by time of the orders of the memory test.
const PAY_WITHIN: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_archived_sales_of_20000_orders_give_redis_its_memory_back() {
    let rig = rig().await;
    let (server, engine, store) = (&rig.server, rig.engine.clone(), rig.store.clone());
    let start = used_memory(&server.url()).await;
    let config = PersisterConfig {
        consumer: "p".to_owned(),
        poll: Duration::from_millis(5),
        housekeeping: Duration::from_millis(50),
        ..PersisterConfig::default()
    };
    let persister = Persister::new(&server.url(), store.clone(), config)
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let persisting = tokio::spawn(persister.run(async { drop(stopped.await) }));

    let mut firsts = Vec::new();
    let mut bought = Instant::now();
    for s in 0..5 {
        let id = format!("big{s}");
        // Long enough that buying 20,000 and paying a quarter of them fits
        // in it on a loaded 2-core machine (3 s did not, once).
        let spec = SaleSpec::new(&id, 20_000)
            .per_user_limit(1)
            .payment_timeout_secs(PAY_WITHIN.as_secs());
        engine.create_sale(&spec).await.unwrap();
        let orders = buy(&engine, Strategy::Coalesced, &id, 20_000).await;
        bought = Instant::now();
        assert_eq!(orders.len(), 20_000);
        let mut paying = tokio::task::JoinSet::new();
        for order in orders.iter().step_by(4) {
            let (engine, order) = (engine.clone(), order.clone());
            paying.spawn(async move { engine.pay(&order).await.unwrap() });
        }
        paying.join_all().await;
        // Not ended yet, then orders awaiting payment: refused, nothing changes.
        let refused = archive(&engine, &store, &id).await;
        assert!(
            matches!(&refused, Err(Error::NotArchivable { reason, .. }) if reason.contains("not ended")),
            "{refused:?}"
        );
        engine.end_sale(&id).await.unwrap();
        let refused = archive(&engine, &store, &id).await;
        assert!(
            matches!(&refused, Err(Error::NotArchivable { reason, .. }) if reason.contains("await payment")),
            "{refused:?}"
        );
        assert!(engine.sale(&id).await.is_ok());
        firsts.push((id, orders[0].clone()));
    }
    // The rest expire at their pay-by time.
    let expired = PAY_WITHIN + Duration::from_millis(100);
    tokio::time::sleep(expired.saturating_sub(bought.elapsed())).await;
    sweep(&engine).await.unwrap();
    for (id, _) in &firsts {
        wait_drained(&mut engine.connection(), id, Duration::from_secs(30))
            .await
            .unwrap();
    }
    let peak = used_memory(&server.url()).await;
    for (id, first) in &firsts {
        let done = archive(&engine, &store, id).await.unwrap();
        assert_eq!((done.orders, done.sold), (20_000, 5_000));

        // SQL answers alone now, and audits clean.
        assert!(matches!(
            engine.sale(id).await,
            Err(seckill_engine::Error::SaleNotFound(_))
        ));
        let stored = store.sale(id).await.unwrap().unwrap();
        assert_eq!(stored.archived_sold, Some(5_000));
        let report = audit(&engine, &store, id).await.unwrap();
        assert!(report.clean && report.archived, "{report:#?}");
        assert_eq!(report.orders_in_sql, 20_000);
        assert!(
            store
                .order(first)
                .await
                .unwrap()
                .is_some_and(|o| o.state == seckill_engine::OrderState::Paid)
        );
    }
    let _ = stop.send(());
    persisting.await.unwrap();
    assert!(
        peak - start > 5 << 20,
        "the sales never used much memory: {start} -> {peak}"
    );
    // UNLINK frees in the background: give it a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = used_memory(&server.url()).await;
        if now - start < 1 << 20 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "used_memory {start} -> {now} (peak {peak})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("seckill:*")
        .query_async(&mut engine.connection())
        .await
        .unwrap();
    // What stays: the log of sale changes and each master's signal keys,
    // none of them holding a sale.
    let kept = |k: &String| k == "seckill:sales:log" || k.starts_with("seckill:{news:");
    assert!(keys.iter().all(kept), "{keys:?}");
    let due: Vec<String> = redis::cmd("ZRANGE")
        .arg("seckill:{news:0}:due")
        .arg(0)
        .arg(-1)
        .query_async(&mut engine.connection())
        .await
        .unwrap();
    assert!(due.is_empty(), "archived sales still filed as due: {due:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpersisted_orders_keep_a_sale_in_redis_and_the_sweeper_archives_when_due() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("o.db").to_str().unwrap())
        .await
        .unwrap();
    archives_when_due(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archiving_works_on_postgres_and_mysql() {
    for server in [Server::Postgres, Server::Mysql] {
        if let Some((store, _db)) = server_database(server).await {
            archives_when_due(store).await;
        }
    }
}

async fn archives_when_due(store: Store) {
    let server = RedisServer::start().unwrap();
    let engine = Engine::connect(&server.url()).await.unwrap();
    engine.create_sale(&SaleSpec::new("s", 10)).await.unwrap();
    let orders = buy(&engine, Strategy::Coalesced, "s", 3).await;
    for order in &orders {
        engine.cancel(order).await.unwrap();
    }
    engine.end_sale("s").await.unwrap();
    // Every order settled, but no persister has run: not in SQL yet.
    let refused = archive(&engine, &store, "s").await;
    assert!(
        matches!(&refused, Err(Error::NotArchivable { reason, .. }) if reason.contains("not in SQL")),
        "{refused:?}"
    );
    assert!(engine.sale("s").await.is_ok());
    let mut persister = Persister::new(&server.url(), store.clone(), PersisterConfig::default())
        .await
        .unwrap();
    persister.round().await.unwrap();
    let live = engine.sale("s").await.unwrap();
    // Due only an hour after its end; then at once.
    assert!(
        archive_due(&engine, &store, Duration::from_secs(3_600))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        archive_due(&engine, &store, Duration::ZERO).await.unwrap(),
        ["s"]
    );
    assert!(engine.sale("s").await.is_err());
    // Recording the same generation again (an admin change or a persister
    // racing the archive) leaves it archived.
    store.upsert_sale(&live).await.unwrap();
    assert_eq!(store.archived_sales().await.unwrap().len(), 1);
    let retry = engine.purchaser(Strategy::Atomic, "s").await;
    assert!(retry.is_err(), "an archived sale sells nothing");
    // The id may be used again: a new generation lives in Redis.
    engine.create_sale(&SaleSpec::new("s", 1)).await.unwrap();
    let again = engine.purchaser(Strategy::Atomic, "s").await.unwrap();
    assert!(matches!(
        again.purchase(&PurchaseRequest::new("x")).await.unwrap(),
        Outcome::Ok(_)
    ));
    // Recorded anew, it is live again: no longer archived in SQL.
    let mut persister = Persister::new(&server.url(), store.clone(), PersisterConfig::default())
        .await
        .unwrap();
    persister.round().await.unwrap();
    let stored = store.sale("s").await.unwrap().unwrap();
    assert_eq!((stored.archived_ms, stored.stock), (None, 1));
    assert!(store.archived_sales().await.unwrap().is_empty());
}
