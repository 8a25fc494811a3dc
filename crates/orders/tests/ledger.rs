//! A master's ledger against a real redis-server and SQLite: quiet sales
//! are told through it, a busy one is read from its own stream, and what a
//! persister read from the ledger and never committed is taken over.

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use seckill_engine::{Engine, SaleSpec, Strategy};
use seckill_orders::{Persister, PersisterConfig, Store, audit, unpersisted};

mod common;

use common::{Rig, assert_left, buy, persister_config as config, rig};

/// One server's ledger and news set (its only master's tag is 0).
const LEDGER: &str = "seckill:{news:0}:ledger:2";
const NEWS: &str = "seckill:{news:0}";
const DUE: &str = "seckill:{news:0}:due";

/// The server's clock, ms.
async fn server_ms(conn: &mut impl redis::aio::ConnectionLike) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    s * 1_000 + us / 1_000
}

/// Sale `id`'s field `n`: where its events are told, once armed.
async fn armed(engine: &Engine, id: &str) -> Option<String> {
    engine
        .connection()
        .hget(format!("seckill:{{sale:{id}}}:sale"), "n")
        .await
        .unwrap()
}

/// Rounds of `persister` until `done` holds, for at most 10 s.
async fn rounds_until<F: Future<Output = bool>>(persister: &mut Persister, done: impl Fn() -> F) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done().await {
        assert!(Instant::now() < deadline, "never came to pass");
        persister.round().await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The last id sale `id`'s stream delivered to the persisters' group.
async fn delivered(conn: &mut impl redis::aio::ConnectionLike, id: &str) -> String {
    let groups: Vec<std::collections::HashMap<String, redis::Value>> = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(format!("seckill:{{sale:{id}}}:orders"))
        .query_async(conn)
        .await
        .unwrap();
    redis::from_redis_value_ref(&groups[0]["last-delivered-id"]).unwrap()
}

/// The id of the last entry of sale `id`'s stream.
async fn last_entry(conn: &mut seckill_redis::Conn, id: &str) -> String {
    let last: redis::streams::StreamRangeReply = conn
        .xrevrange_count(format!("seckill:{{sale:{id}}}:orders"), "+", "-", 1)
        .await
        .unwrap();
    last.ids[0].id.clone()
}

/// Rounds of `persister` until every one of `sales` is armed.
async fn arm(persister: &mut Persister, engine: &Engine, sales: &[String]) {
    rounds_until(persister, || async {
        for sale in sales {
            if armed(engine, sale).await.is_none() {
                return false;
            }
        }
        true
    })
    .await;
}

/// Rounds of `persister` until nothing of `sales` is left unpersisted.
async fn drain(persister: &mut Persister, engine: &Engine, sales: &[String]) {
    rounds_until(persister, || async {
        let mut conn = engine.connection();
        for sale in sales {
            if unpersisted(&mut conn, sale).await.unwrap() > 0 {
                return false;
            }
        }
        true
    })
    .await;
}

/// A persister with `config`, run until it armed sale `sale`, made with
/// `stock` units.
async fn armed_persister(rig: &Rig, sale: &str, stock: u64, config: PersisterConfig) -> Persister {
    let engine = &rig.engine;
    engine
        .create_sale(&SaleSpec::new(sale, stock))
        .await
        .unwrap();
    let mut persister = Persister::new(&rig.server.url(), rig.store.clone(), config)
        .await
        .unwrap();
    rounds_until(&mut persister, || async {
        armed(engine, sale).await.is_some()
    })
    .await;
    persister
}

/// Every order of `sale` in Redis is in SQL, in the same state.
async fn assert_persisted(engine: &Engine, store: &Store, sale: &str, orders: usize) {
    let report = audit(engine, store, sale).await.unwrap();
    assert!(report.clean && report.backlog == 0, "{report:#?}");
    let generation = engine.sale(sale).await.unwrap().generation as i64;
    assert_eq!(store.orders(sale, generation).await.unwrap().len(), orders);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_dead_persister_read_from_the_ledger_is_taken_over() {
    let rig = rig().await;
    let (server, engine, store) = (&rig.server, &rig.engine, &rig.store);
    let sales: Vec<String> = (0..20).map(|i| format!("q{i}")).collect();
    for sale in &sales {
        engine.create_sale(&SaleSpec::new(sale, 10)).await.unwrap();
    }
    let mut first = Persister::new(&server.url(), store.clone(), config("first"))
        .await
        .unwrap();
    arm(&mut first, engine, &sales).await;
    drop(first);

    // One order in each: told through the ledger, not the sales' streams.
    let mut conn = engine.connection();
    let before: u64 = conn.xlen(LEDGER).await.unwrap();
    let bought_from = server_ms(&mut conn).await;
    let mut orders = Vec::new();
    for sale in &sales {
        let bought = buy(engine, Strategy::Atomic, sale, 1).await;
        assert_eq!(bought.len(), 1);
        orders.extend(bought);
    }
    let bought_by = server_ms(&mut conn).await;
    let after: u64 = conn.xlen(LEDGER).await.unwrap();
    assert_eq!(after - before, 20, "each purchase told once");

    // A persister reads them all from the ledger and dies before its commit.
    let filed: u64 = conn.zcard(DUE).await.unwrap();
    assert_eq!(filed, 0, "nothing is filed before its read is committed");
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("persister")
        .arg("doomed")
        .arg("COUNT")
        .arg(100)
        .arg("STREAMS")
        .arg(LEDGER)
        .arg(">")
        .query_async(&mut conn)
        .await
        .unwrap();
    for sale in &sales {
        assert_eq!(
            unpersisted(&mut conn, sale).await.unwrap(),
            1,
            "{sale}: read and not committed still counts"
        );
    }

    // One order filed meanwhile under a later time, as a read committed
    // before this take-over with a later timeout would: the earlier
    // stands. Filed as the sweep takes an order alone: "<sale key> <ref>
    // <generation> <quantity> <buyer>", from "<sale>-<generation>-<ref>".
    let (generation, local) = orders[0]
        .strip_prefix(&format!("{}-", sales[0]))
        .and_then(|rest| rest.split_once('-'))
        .unwrap();
    let later = format!(
        "seckill:{{sale:{}}}:sale {local} {generation} 1 u0",
        sales[0]
    );
    let _: u64 = conn.zadd(DUE, &later, u64::MAX >> 12).await.unwrap();

    // Its heir takes them over once they have been idle long enough.
    let mut heir = Persister::new(&server.url(), store.clone(), config("heir"))
        .await
        .unwrap();
    drain(&mut heir, engine, &sales).await;
    for sale in &sales {
        assert_persisted(engine, store, sale, 1).await;
    }
    // Filed for expiry with the heir's acknowledgement, each sale's one
    // order under its pay-by time: the dead one's read filed nothing.
    let timeout_ms = engine.sale(&sales[0]).await.unwrap().payment_timeout_secs * 1_000;
    let filed: Vec<(String, u64)> = conn.zrange_withscores(DUE, 0, -1).await.unwrap();
    assert_eq!(filed.len(), sales.len(), "one order each: {filed:?}");
    assert!(filed.iter().any(|(member, _)| *member == later));
    for sale in &sales {
        let key = format!("seckill:{{sale:{sale}}}:sale ");
        let due = filed.iter().find(|(member, _)| member.starts_with(&key));
        let (_, due) = due.unwrap_or_else(|| panic!("{sale} is not in the due index"));
        let due = *due;
        assert!(
            (bought_from + timeout_ms..=bought_by + timeout_ms).contains(&due),
            "{sale} filed at {due}, bought between {bought_from} and {bought_by}"
        );
    }
    let pending: (u64, redis::Value, redis::Value, redis::Value) = redis::cmd("XPENDING")
        .arg(LEDGER)
        .arg("persister")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(pending.0, 0, "every entry acknowledged");
    let left: u64 = conn.xlen(LEDGER).await.unwrap();
    assert_eq!(left, 0, "the ledger is trimmed once all is committed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_sale_is_read_from_its_own_stream_and_told_again_once_quiet() {
    let rig = rig().await;
    let (engine, store) = (&rig.engine, &rig.store);
    let mut persister = armed_persister(&rig, "hot", 1_000, config("p")).await;
    let mut conn = engine.connection();

    // Many events in one read of the ledger: disarmed, and in the news set.
    assert_eq!(buy(engine, Strategy::Atomic, "hot", 100).await.len(), 100);
    persister.round().await.unwrap();
    assert_eq!(armed(engine, "hot").await, None, "busy: disarmed");
    assert_eq!(
        delivered(&mut conn, "hot").await,
        last_entry(&mut conn, "hot").await,
        "disarmed: its stream is read past all it told"
    );
    let queued: bool = conn
        .sismember(NEWS, "seckill:{sale:hot}:sale")
        .await
        .unwrap();
    assert!(queued, "busy: read from its own stream next round");

    // Its purchases now tell nothing; its stream is read.
    let told: u64 = conn.xlen(LEDGER).await.unwrap();
    assert_eq!(
        buy(engine, Strategy::Coalesced, "hot", 100).await.len(),
        100
    );
    let now_told: u64 = conn.xlen(LEDGER).await.unwrap();
    assert_eq!(now_told, told, "a busy sale's purchases are not told");
    persister.round().await.unwrap();
    assert_eq!(unpersisted(&mut conn, "hot").await.unwrap(), 0);

    // Quiet again: armed by the next read, told once more.
    rounds_until(&mut persister, || async {
        armed(engine, "hot").await.is_some()
    })
    .await;
    let told: u64 = conn.xlen(LEDGER).await.unwrap();
    assert_eq!(buy(engine, Strategy::Atomic, "hot", 1).await.len(), 1);
    let now_told: u64 = conn.xlen(LEDGER).await.unwrap();
    assert_eq!(now_told, told + 1, "quiet again: told through the ledger");
    rounds_until(&mut persister, || async {
        unpersisted(&mut engine.connection(), "hot").await.unwrap() == 0
    })
    .await;
    assert_persisted(engine, store, "hot", 201).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_no_master_names_any_more_is_drained() {
    let rig = rig().await;
    let (server, engine, store) = (&rig.server, &rig.engine, &rig.store);
    drop(armed_persister(&rig, "o", 100, config("first")).await);

    // Armed on the ledger of a tag no master has now, as a slot moved
    // under a change of masters leaves it: the purchases are told there
    // alone, and the sale's stream counts them delivered.
    let orphan = "seckill:{news:5}:ledger";
    let mut conn = engine.connection();
    let _: () = conn
        .hset(
            "seckill:{sale:o}:sale",
            "n",
            format!("{orphan} persister 30"),
        )
        .await
        .unwrap();
    assert_eq!(buy(engine, Strategy::Atomic, "o", 3).await.len(), 3);
    let told: u64 = conn.xlen(orphan).await.unwrap();
    assert_eq!(told, 3);
    assert_eq!(unpersisted(&mut conn, "o").await.unwrap(), 3);
    assert_left(engine, "o", 0, 3).await;

    // A persister's start finds it and drains it.
    let mut heir = Persister::new(&server.url(), store.clone(), config("heir"))
        .await
        .unwrap();
    rounds_until(&mut heir, || async {
        let left: u64 = engine.connection().xlen(orphan).await.unwrap();
        left == 0
    })
    .await;
    assert_persisted(engine, store, "o", 3).await;
}

/// Acknowledging ids this ledger's group never delivered (read from a
/// master that has since failed over) trims nothing it has not delivered:
/// with nothing pending, the ledger is cut after the last entry the group
/// delivered, not after the last id acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledging_ids_never_delivered_here_keeps_what_is_unread() {
    let rig = rig().await;
    let (server, engine) = (&rig.server, &rig.engine);
    // Its rounds load the persister's functions.
    let _persister = armed_persister(&rig, "t", 10, config("p")).await;
    let done = seckill_testkit::function_named(server.port(), "ledger_done_")
        .unwrap()
        .expect("ledger_done is loaded");
    // A ledger of the same master's tag whose group delivered one entry
    // of two: the second, below the id acknowledged, is still to be read.
    let ledger = "seckill:{news:0}:ledger-drill";
    let mut conn = engine.connection();
    let () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(ledger)
        .arg("persister")
        .arg("0")
        .arg("MKSTREAM")
        .query_async(&mut conn)
        .await
        .unwrap();
    for id in ["100-1", "150-1"] {
        let _: String = conn.xadd(ledger, id, &[("s", "x")]).await.unwrap();
    }
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("persister")
        .arg("c")
        .arg("COUNT")
        .arg(1)
        .arg("STREAMS")
        .arg(ledger)
        .arg(">")
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: i64 = conn.xack(ledger, "persister", &["100-1"]).await.unwrap();
    let acked: i64 = redis::cmd("FCALL")
        .arg(&done)
        .arg(3)
        .arg(ledger)
        .arg(DUE)
        .arg(NEWS)
        .arg("persister")
        .arg(0)
        .arg(0)
        .arg("200-0")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(acked, 0, "200-0 was never delivered here");
    let left: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(ledger)
        .arg("-")
        .arg("+")
        .query_async(&mut conn)
        .await
        .unwrap();
    let ids: Vec<&str> = left.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["150-1"], "the unread entry is kept, the read one cut");
}

/// A sale disarmed as busy while part of what it told is still unread in
/// the ledger: that part is counted as not yet persisted (the sale's hash
/// still names its ledger), so waiting for the sale to drain waits for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_disarmed_with_entries_still_in_the_ledger_counts_them() {
    let rig = rig().await;
    let (engine, store) = (&rig.engine, &rig.store);
    let config = PersisterConfig {
        batch: 50,
        ..config("p")
    };
    let mut persister = armed_persister(&rig, "hot", 1_000, config).await;
    assert_eq!(buy(engine, Strategy::Atomic, "hot", 100).await.len(), 100);
    // One read of the ledger takes 50 of the 100 told: busy, disarmed.
    persister.round().await.unwrap();
    assert_eq!(armed(engine, "hot").await, None, "busy: disarmed");
    let mut conn = engine.connection();
    let generation = engine.sale("hot").await.unwrap().generation as i64;
    let in_sql = store.orders("hot", generation).await.unwrap().len() as u64;
    assert!(in_sql < 100, "{in_sql} in SQL after one read of 50");
    assert_eq!(unpersisted(&mut conn, "hot").await.unwrap(), 100 - in_sql);
    rounds_until(&mut persister, || async {
        unpersisted(&mut engine.connection(), "hot").await.unwrap() == 0
    })
    .await;
    assert_persisted(engine, store, "hot", 100).await;
}

/// What an armed sale told reaches SQL from the ledger alone: its stream's
/// group stays where the arming read left it, a read of every sale skips
/// the armed one, and a purchase the ledger refuses disarms it with the
/// group just before that purchase, so its stream delivers only that; an
/// armed sale's stream a trim emptied holds nothing unread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_an_armed_sale_told_is_never_read_from_its_stream() {
    let rig = rig().await;
    let (engine, store) = (&rig.engine, &rig.store);
    let mut persister = armed_persister(&rig, "q", 100, config("p")).await;
    let mut conn = engine.connection();
    let armed_at = delivered(&mut conn, "q").await;
    assert_eq!(buy(engine, Strategy::Atomic, "q", 2).await.len(), 2);
    assert_eq!(buy(engine, Strategy::Coalesced, "q", 1).await.len(), 1);
    assert_eq!(unpersisted(&mut conn, "q").await.unwrap(), 3, "told");
    // A new persister's first round reads every sale.
    let mut other = Persister::new(&rig.server.url(), store.clone(), config("p2"))
        .await
        .unwrap();
    other.round().await.unwrap();
    drain(&mut persister, engine, &["q".to_owned()]).await;
    assert!(armed(engine, "q").await.is_some());
    assert_eq!(
        delivered(&mut conn, "q").await,
        armed_at,
        "its stream unread"
    );

    let before = last_entry(&mut conn, "q").await;
    let _: () = conn.rename(LEDGER, "aside").await.unwrap();
    let _: () = conn.set(LEDGER, "not a stream").await.unwrap();
    assert_eq!(buy(engine, Strategy::Atomic, "q", 1).await.len(), 1);
    let _: () = conn.del(LEDGER).await.unwrap();
    let _: () = conn.rename("aside", LEDGER).await.unwrap();
    assert_eq!(armed(engine, "q").await, None, "disarmed");
    assert_eq!(delivered(&mut conn, "q").await, before);
    assert_eq!(unpersisted(&mut conn, "q").await.unwrap(), 1);
    let mut heir = Persister::new(&rig.server.url(), store.clone(), config("heir"))
        .await
        .unwrap();
    drain(&mut heir, engine, &["q".to_owned()]).await;
    assert_persisted(engine, store, "q", 4).await;

    // Armed again by that read, and told more; its stream emptied by a
    // trim, as one is once every order of it expired: nothing is unread.
    assert!(armed(engine, "q").await.is_some());
    assert_eq!(buy(engine, Strategy::Atomic, "q", 2).await.len(), 2);
    drain(&mut heir, engine, &["q".to_owned()]).await;
    let _: i64 = conn
        .xtrim(
            "seckill:{sale:q}:orders",
            redis::streams::StreamMaxlen::Equals(0),
        )
        .await
        .unwrap();
    assert_eq!(unpersisted(&mut conn, "q").await.unwrap(), 0);
}

/// A persister started now persists every order of `sales`, one each.
async fn heir_persists(rig: &Rig, sales: &[String]) {
    let (engine, store) = (&rig.engine, &rig.store);
    let mut heir = Persister::new(&rig.server.url(), store.clone(), config("heir"))
        .await
        .unwrap();
    drain(&mut heir, engine, sales).await;
    for sale in sales {
        assert_persisted(engine, store, sale, 1).await;
    }
}

/// `n` quiet sales, each armed, with one order bought, persisted and come
/// due (a payment timeout of 1 s).
async fn quiet_sales_due(rig: &Rig, n: usize) -> Vec<String> {
    let engine = &rig.engine;
    let sales: Vec<String> = (0..n).map(|i| format!("d{i}")).collect();
    for sale in &sales {
        let spec = SaleSpec::new(sale, 10).payment_timeout_secs(1);
        engine.create_sale(&spec).await.unwrap();
    }
    let mut persister = Persister::new(&rig.server.url(), rig.store.clone(), config("p"))
        .await
        .unwrap();
    arm(&mut persister, engine, &sales).await;
    for sale in &sales {
        assert_eq!(buy(engine, Strategy::Atomic, sale, 1).await.len(), 1);
    }
    drain(&mut persister, engine, &sales).await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    sales
}

/// An expiry the ledger refuses (as a ledger left on another node would)
/// disarms its sale and is appended to the sale's own stream instead,
/// from where SQL learns it: the sweep neither fails nor loses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiry_the_ledger_refuses_is_left_in_its_sales_stream_and_persisted() {
    let rig = rig().await;
    let engine = &rig.engine;
    let sales = quiet_sales_due(&rig, 10).await;
    let mut conn = engine.connection();
    // The ledger, set aside; a string in its place refuses the XADD.
    let _: () = conn.rename(LEDGER, "aside").await.unwrap();
    let _: () = conn.set(LEDGER, "not a stream").await.unwrap();
    let (expired, _, _) = engine.expire_due_in(DUE, 500).await.unwrap();
    assert_eq!(expired, 10);
    for sale in &sales {
        assert_eq!(armed(engine, sale).await, None, "{sale}: disarmed");
        let last: redis::streams::StreamRangeReply = conn
            .xrevrange_count(format!("seckill:{{sale:{sale}}}:orders"), "+", "-", 1)
            .await
            .unwrap();
        assert!(last.ids[0].map.contains_key("expired"), "{sale}: {last:?}");
    }
    let _: () = conn.del(LEDGER).await.unwrap();
    let _: () = conn.rename("aside", LEDGER).await.unwrap();
    // A persister's first round reads every sale's own stream.
    heir_persists(&rig, &sales).await;
}

/// A sweep tells the expiries of the quiet sales armed with the ledger in
/// one entry of it; a sale an earlier release's persister armed (its
/// ledger, which that release reads an entry of as one sale's) is told
/// there, one entry each; a persister of this release reads both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_tells_its_expiries_in_one_entry_and_the_earlier_ledger_is_still_read() {
    const EARLIER: &str = "seckill:{news:0}:ledger";
    let rig = rig().await;
    let engine = &rig.engine;
    let sales = quiet_sales_due(&rig, 10).await;
    let mut conn = engine.connection();
    for sale in &sales[..3] {
        let _: () = conn
            .hset(
                format!("seckill:{{sale:{sale}}}:sale"),
                "n",
                format!("{EARLIER} persister 1"),
            )
            .await
            .unwrap();
    }
    let len = |key: &'static str| {
        let mut conn = engine.connection();
        async move { conn.xlen::<_, u64>(key).await.unwrap() }
    };
    let (before, earlier_before) = (len(LEDGER).await, len(EARLIER).await);
    let (expired, _, _) = engine.expire_due_in(DUE, 500).await.unwrap();
    assert_eq!(expired, 10);
    assert_eq!(len(LEDGER).await, before + 1, "seven expiries, one entry");
    assert_eq!(len(EARLIER).await, earlier_before + 3, "one entry each");
    heir_persists(&rig, &sales).await;
}

/// A command failing partway through a sweep (here a key of the wrong
/// type) leaves no expiry written before it untold: those are in the
/// ledger, the rest expire at the next sweep, and SQL learns every one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_failing_partway_tells_the_expiries_it_wrote() {
    let rig = rig().await;
    let sales = quiet_sales_due(&rig, 10).await;
    let mut conn = rig.engine.connection();
    let _: () = conn.set("seckill:{sale:d5}:settled", "x").await.unwrap();
    assert!(rig.engine.expire_due_in(DUE, 500).await.is_err());
    let last: redis::streams::StreamRangeReply =
        conn.xrevrange_count(LEDGER, "+", "-", 1).await.unwrap();
    let told = |i| {
        last.ids[0]
            .map
            .contains_key(&format!("seckill:{{sale:d{i}}}:sale"))
    };
    assert!((0..5).all(told) && !(5..10).any(told), "{last:?}");
    let _: () = conn.del("seckill:{sale:d5}:settled").await.unwrap();
    assert_eq!(rig.engine.expire_due_in(DUE, 500).await.unwrap().0, 5);
    heir_persists(&rig, &sales).await;
}
