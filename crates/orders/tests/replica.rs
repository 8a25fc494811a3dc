//! With `replica_wait` (`--durability replica`) the persister commits to
//! SQL only what a replica has: while the replica is frozen (SIGSTOP) the
//! orders read stay out of SQL, and once it runs again they arrive.
//! Against a real master, its replica and SQLite.

use std::time::{Duration, Instant};

use seckill_engine::{Engine, SaleSpec, Strategy};
use seckill_orders::{Persister, PersisterConfig, Store};
use seckill_testkit::{Options, RedisServer};

mod common;

use common::buy;

/// Waits until the replica says its link to the master is up.
async fn synced(replica: &RedisServer) {
    let mut conn = seckill_redis::Target::server(&replica.url())
        .connect()
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut conn)
            .await
            .unwrap();
        if info.contains("master_link_status:up") {
            return;
        }
        assert!(Instant::now() < deadline, "the replica never synced");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn in_sql(store: &Store, generation: i64) -> usize {
    store.orders("r", generation).await.unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_reach_sql_only_once_a_replica_has_them() {
    let master = RedisServer::start().unwrap();
    let replica = Options::default()
        .replica_of(master.port())
        .start()
        .unwrap();
    synced(&replica).await;
    let engine = Engine::connect(&master.url()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("o.db").to_str().unwrap())
        .await
        .unwrap();
    let config = PersisterConfig {
        consumer: "p".to_owned(),
        claim_idle: Duration::from_millis(500),
        housekeeping: Duration::from_millis(50),
        replica_wait: Some(Duration::from_millis(200)),
        ..PersisterConfig::default()
    };
    let mut persister = Persister::new(&master.url(), store.clone(), config)
        .await
        .unwrap();
    engine
        .create_sale(&SaleSpec::new("r", 100).per_user_limit(2))
        .await
        .unwrap();
    let generation = engine.sale("r").await.unwrap().generation as i64;

    // A replica confirms: the orders are committed in the round that read them.
    assert_eq!(buy(&engine, Strategy::Atomic, "r", 10).await.len(), 10);
    let deadline = Instant::now() + Duration::from_secs(10);
    while in_sql(&store, generation).await < 10 {
        let _ = persister.round().await;
        assert!(Instant::now() < deadline, "orders never reached SQL");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The replica frozen: the master acknowledges (durability primary),
    // the persister reads, no replica confirms, nothing is committed.
    replica.pause().unwrap();
    let frozen = buy(&engine, Strategy::Atomic, "r", 10).await;
    assert_eq!(frozen.len(), 10);
    let refused = persister.round().await.unwrap_err().to_string();
    assert!(refused.contains("no replica confirmed"), "{refused}");
    assert_eq!(
        in_sql(&store, generation).await,
        10,
        "committed without a replica"
    );

    // Running again, the replica catches up; the batch left pending is
    // taken over once idle, and committed.
    replica.resume().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while in_sql(&store, generation).await < 20 {
        let _ = persister.round().await;
        assert!(
            Instant::now() < deadline,
            "the frozen orders never reached SQL"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
