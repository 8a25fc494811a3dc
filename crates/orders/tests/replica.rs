//! With `replica_wait` (`--durability replica`) the persister commits to
//! SQL only what every replica has: while the replica is frozen (SIGSTOP)
//! the orders read stay out of SQL, and once it runs again they arrive;
//! with two replicas and one frozen, the other alone never confirms, not
//! even once the master has not heard from the frozen one for over two
//! seconds (a purchase's wait passes over it then); a ledger left by a
//! change of masters is drained under the same rule. Against a real
//! master, its replicas and SQLite.

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use seckill_engine::{Engine, SaleSpec, Strategy};
use seckill_orders::{Persister, PersisterConfig, Store};
use seckill_testkit::RedisServer;

mod common;

use common::buy;

/// A master with `replicas` synced replicas, a sale "r" on it, and a
/// persister that commits only what every online replica has; a batch
/// left unconfirmed is taken over once `claim_idle` old, under the same
/// rule.
struct Rig {
    master: RedisServer,
    replicas: Vec<RedisServer>,
    engine: Engine,
    store: Store,
    persister: Persister,
    generation: i64,
    _dir: tempfile::TempDir,
}

/// Persister `consumer`'s settings: housekeeping every 50 ms, a replica
/// waited for 200 ms, a batch taken over once `claim_idle` old.
fn config(consumer: &str, claim_idle: Duration) -> PersisterConfig {
    PersisterConfig {
        consumer: consumer.to_owned(),
        claim_idle,
        housekeeping: Duration::from_millis(50),
        replica_wait: Some(Duration::from_millis(200)),
        ..PersisterConfig::default()
    }
}

impl Rig {
    async fn start(replicas: usize, claim_idle: Duration) -> Self {
        let (master, replicas) = RedisServer::start_with_replicas(replicas).unwrap();
        let engine = Engine::connect(&master.url()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("o.db").to_str().unwrap())
            .await
            .unwrap();
        let persister = Persister::new(&master.url(), store.clone(), config("p", claim_idle))
            .await
            .unwrap();
        engine
            .create_sale(&SaleSpec::new("r", 100).per_user_limit(3))
            .await
            .unwrap();
        let generation = engine.sale("r").await.unwrap().generation as i64;
        Self {
            master,
            replicas,
            engine,
            store,
            persister,
            generation,
            _dir: dir,
        }
    }

    /// Ten purchases, by u0 … u9.
    async fn buy_ten(&self) {
        assert_eq!(buy(&self.engine, Strategy::Atomic, "r", 10).await.len(), 10);
    }

    async fn in_sql(&self) -> usize {
        self.store.orders("r", self.generation).await.unwrap().len()
    }

    /// Rounds until sale "r" is armed: what it sells next is told through
    /// its master's ledger, not read from its own stream.
    async fn until_armed(&mut self) {
        let mut conn = self.engine.connection();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let armed: Option<String> = conn.hget("seckill:{sale:r}:sale", "n").await.unwrap();
            if armed.is_some() {
                return;
            }
            let _ = self.persister.round().await;
            assert!(Instant::now() < deadline, "the sale was never armed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Persister rounds until `n` orders are in SQL, at most `within`.
    async fn until_in_sql(&mut self, n: usize, within: Duration, what: &str) {
        let deadline = Instant::now() + within;
        while self.in_sql().await < n {
            let _ = self.persister.round().await;
            assert!(Instant::now() < deadline, "{what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_reach_sql_only_once_a_replica_has_them() {
    let mut rig = Rig::start(1, Duration::from_millis(500)).await;

    // A replica confirms: the orders are committed in the round that read them.
    rig.buy_ten().await;
    rig.until_in_sql(10, Duration::from_secs(10), "orders never reached SQL")
        .await;

    // The replica frozen: the master acknowledges (durability primary),
    // the persister reads, no replica confirms, nothing is committed.
    rig.replicas[0].pause().unwrap();
    rig.buy_ten().await;
    let refused = rig.persister.round().await.unwrap_err().to_string();
    assert!(refused.contains("no replica confirmed"), "{refused}");
    assert_eq!(rig.in_sql().await, 10, "committed without a replica");

    // Running again, the replica catches up; the batch left pending is
    // taken over once idle, and committed.
    rig.replicas[0].resume().unwrap();
    rig.until_in_sql(
        20,
        Duration::from_secs(10),
        "the frozen orders never reached SQL",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_replicas_one_frozen_the_other_alone_never_confirms() {
    // Taken over only after 8 s: the steps below see only what the
    // replicas confirm.
    let mut rig = Rig::start(2, Duration::from_secs(8)).await;
    rig.buy_ten().await;
    rig.until_in_sql(10, Duration::from_secs(10), "orders never reached SQL")
        .await;

    // One replica frozen, the other confirming at once: a failover could
    // still promote the frozen one, so nothing is committed.
    rig.replicas[1].pause().unwrap();
    let frozen = Instant::now();
    rig.buy_ten().await;
    let refused = rig.persister.round().await.unwrap_err().to_string();
    assert!(refused.contains("no replica confirmed"), "{refused}");
    assert_eq!(
        rig.in_sql().await,
        10,
        "committed while a replica lacked it"
    );

    // Nor once the master has not heard from it for over two seconds: a
    // purchase no longer waits for it then, but the sentinels may still
    // promote it, and SQL must not keep what it lacks.
    tokio::time::sleep(Duration::from_millis(3_500).saturating_sub(frozen.elapsed())).await;
    rig.buy_ten().await;
    let refused = rig.persister.round().await.unwrap_err().to_string();
    assert!(refused.contains("no replica confirmed"), "{refused}");
    assert!(
        frozen.elapsed() < Duration::from_secs(8),
        "the round took until {:?}: the batches may be taken over already",
        frozen.elapsed()
    );
    assert_eq!(
        rig.in_sql().await,
        10,
        "committed while an online replica lacked it"
    );

    // Running again, it confirms; the batches left pending are taken over
    // once idle.
    rig.replicas[1].resume().unwrap();
    rig.until_in_sql(
        30,
        Duration::from_secs(20),
        "the frozen orders never reached SQL",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_no_master_names_is_drained_only_once_every_replica_has_it() {
    // Taken over after 8 s, well after the look below.
    let claim_idle = Duration::from_secs(8);
    let mut rig = Rig::start(1, claim_idle).await;
    rig.buy_ten().await;
    rig.until_in_sql(10, Duration::from_secs(10), "orders never reached SQL")
        .await;

    // Armed on the ledger of a tag no master has now, as a slot moved
    // under a change of masters leaves it, ten purchases are told there
    // while the replica is frozen.
    let orphan = "seckill:{news:5}:ledger";
    let mut conn = rig.engine.connection();
    rig.until_armed().await;
    let () = conn
        .hset(
            "seckill:{sale:r}:sale",
            "n",
            format!("{orphan} persister 30"),
        )
        .await
        .unwrap();
    rig.replicas[0].pause().unwrap();
    rig.buy_ten().await;
    let told: u64 = conn.xlen(orphan).await.unwrap();
    assert_eq!(told, 10);

    // A persister's start finds the ledger and reads it, but commits
    // nothing the replica lacks.
    let mut heir = Persister::new(
        &rig.master.url(),
        rig.store.clone(),
        config("heir", claim_idle),
    )
    .await
    .unwrap();
    let looked = Instant::now();
    for _ in 0..5 {
        let _ = heir.round().await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        looked.elapsed() < claim_idle,
        "the look took {:?}: the reads may be taken over already",
        looked.elapsed()
    );
    assert_eq!(rig.in_sql().await, 10, "committed what no replica had");
    let pending: (u64, Option<String>, Option<String>, redis::Value) = redis::cmd("XPENDING")
        .arg(orphan)
        .arg(seckill_orders::GROUP)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(pending.0, 10, "the ledger was not read");

    // Running again, the replica has them; the reads left pending are
    // taken over once idle, and the ledger drained.
    rig.replicas[0].resume().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while rig.in_sql().await < 20 {
        let _ = heir.round().await;
        assert!(Instant::now() < deadline, "the ledger was never drained");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_taken_over_waits_for_the_replicas_too() {
    // Taken over after 300 ms: the frozen spell below lasts many times that.
    let claim_idle = Duration::from_millis(300);
    let mut rig = Rig::start(1, claim_idle).await;
    rig.buy_ten().await;
    rig.until_in_sql(10, Duration::from_secs(10), "orders never reached SQL")
        .await;
    rig.until_armed().await;

    // The replica frozen, as a master cut off from its replicas is: ten
    // purchases told through the master's ledger ("r", armed), ten read
    // from a new sale's own stream ("s", bought before any read). The
    // read is not confirmed.
    rig.replicas[0].pause().unwrap();
    let spec = SaleSpec::new("s", 100).per_user_limit(3);
    rig.engine.create_sale(&spec).await.unwrap();
    assert_eq!(buy(&rig.engine, Strategy::Atomic, "s", 10).await.len(), 10);
    rig.buy_ten().await;
    let s_generation = rig.engine.sale("s").await.unwrap().generation as i64;
    let in_s = |store: Store| async move { store.orders("s", s_generation).await.unwrap().len() };
    let frozen = Instant::now();
    while frozen.elapsed() < claim_idle * 8 {
        let _ = rig.persister.round().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Taken over many times since, neither was committed.
    assert_eq!(
        rig.in_sql().await,
        10,
        "the ledger's took over without a replica"
    );
    assert_eq!(
        in_s(rig.store.clone()).await,
        0,
        "the batch was taken over without a replica"
    );

    // Running again, the replica has them: both are committed.
    rig.replicas[0].resume().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while rig.in_sql().await < 20 || in_s(rig.store.clone()).await < 10 {
        let _ = rig.persister.round().await;
        assert!(
            Instant::now() < deadline,
            "the frozen orders never reached SQL"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
