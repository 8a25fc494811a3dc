//! With `replica_wait` (`--durability replica`) the persister commits to
//! SQL only what every replica has: while the replica is frozen (SIGSTOP)
//! the orders read stay out of SQL, and once it runs again they arrive;
//! with two replicas and one frozen, the other alone does not confirm
//! until the master has not heard from the frozen one for over two
//! seconds. Against a real master, its replicas and SQLite.

use std::time::{Duration, Instant};

use seckill_engine::{Engine, SaleSpec, Strategy};
use seckill_orders::{Persister, PersisterConfig, Store};
use seckill_testkit::{Options, RedisServer};

mod common;

use common::buy;

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
    replica.wait_synced().unwrap();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_replicas_one_frozen_the_other_alone_does_not_confirm_at_once() {
    let master = RedisServer::start().unwrap();
    let replicas: Vec<RedisServer> = (0..2)
        .map(|_| {
            Options::default()
                .replica_of(master.port())
                .start()
                .unwrap()
        })
        .collect();
    for replica in &replicas {
        replica.wait_synced().unwrap();
    }
    let engine = Engine::connect(&master.url()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("o.db").to_str().unwrap())
        .await
        .unwrap();
    // A batch left unconfirmed is taken over (and committed without
    // asking again) only after `claim_idle`: long enough that the second
    // step below sees only what the replicas confirm.
    let config = PersisterConfig {
        consumer: "p".to_owned(),
        claim_idle: Duration::from_secs(8),
        housekeeping: Duration::from_millis(50),
        replica_wait: Some(Duration::from_millis(200)),
        ..PersisterConfig::default()
    };
    let mut persister = Persister::new(&master.url(), store.clone(), config)
        .await
        .unwrap();
    engine
        .create_sale(&SaleSpec::new("r", 100).per_user_limit(3))
        .await
        .unwrap();
    let generation = engine.sale("r").await.unwrap().generation as i64;
    assert_eq!(buy(&engine, Strategy::Atomic, "r", 10).await.len(), 10);
    let deadline = Instant::now() + Duration::from_secs(10);
    while in_sql(&store, generation).await < 10 {
        let _ = persister.round().await;
        assert!(Instant::now() < deadline, "orders never reached SQL");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // One replica frozen, the other confirming at once: a failover could
    // still promote the frozen one, so nothing is committed.
    replicas[1].pause().unwrap();
    let frozen = Instant::now();
    assert_eq!(buy(&engine, Strategy::Atomic, "r", 10).await.len(), 10);
    let refused = persister.round().await.unwrap_err().to_string();
    assert!(
        frozen.elapsed() < Duration::from_secs(1),
        "the round took {:?}: the master may have stopped waiting for the frozen replica already",
        frozen.elapsed()
    );
    assert!(refused.contains("no replica confirmed"), "{refused}");
    assert_eq!(
        in_sql(&store, generation).await,
        10,
        "committed while a replica lacked it"
    );

    // Unheard of for over two seconds, the frozen replica is no longer
    // waited for: the other confirms what follows.
    tokio::time::sleep(Duration::from_millis(3_500).saturating_sub(frozen.elapsed())).await;
    assert_eq!(buy(&engine, Strategy::Atomic, "r", 10).await.len(), 10);
    let deadline = Instant::now() + Duration::from_secs(2);
    while in_sql(&store, generation).await < 20 {
        let _ = persister.round().await;
        assert!(
            Instant::now() < deadline,
            "the replica in touch never confirmed alone"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        in_sql(&store, generation).await,
        20,
        "the frozen batch committed early"
    );

    // Running again, it is waited for again, and the batch left pending
    // is taken over once idle.
    replicas[1].resume().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while in_sql(&store, generation).await < 30 {
        let _ = persister.round().await;
        assert!(
            Instant::now() < deadline,
            "the frozen orders never reached SQL"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
