//! `seckill persist` and `seckill audit` as processes, on a private
//! redis-server and a SQLite file.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use seckill_engine::{Engine, PurchaseRequest, SaleSpec, Strategy};
use seckill_testkit::RedisServer;

mod common;

use common::run as seckill;

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_seckill"))
        .args(args)
        .spawn()
        .unwrap()
}

fn terminate(mut child: Child) {
    // SAFETY: a signal to a child we own and have not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "persist exited with {status}");
}

/// A private redis-server with sale `sale` of `stock` units, and a SQLite
/// path in a temporary folder: both gone when the first value is dropped.
/// Answers it, the Redis URL, the database path and an engine.
async fn stores(
    sale: &str,
    stock: u64,
) -> ((RedisServer, tempfile::TempDir), String, String, Engine) {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("orders.db").to_str().unwrap().to_owned();
    let url = server.url();
    let engine = Engine::connect(&url).await.unwrap();
    engine
        .create_sale(&SaleSpec::new(sale, stock))
        .await
        .unwrap();
    ((server, dir), url, db, engine)
}

/// Runs `audit` (with `--json`) until its report shows no backlog and
/// `orders` orders in SQL, within 30 s; that run must exit 0. Answers it.
fn audit_until_persisted(
    orders: u64,
    audit: impl Fn() -> std::process::Output,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = audit();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
        if report["backlog"] == 0 && report["orders_in_sql"] == orders {
            assert_eq!(out.status.code(), Some(0), "{report}");
            return report;
        }
        assert!(Instant::now() < deadline, "never persisted: {report}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persist_then_audit_is_clean_and_a_planted_mismatch_exits_1() {
    let (_stores, url, db, engine) = stores("cli", 100).await;
    let buy = engine.purchaser(Strategy::Atomic, "cli").await.unwrap();
    for u in 0..40 {
        buy.purchase(&PurchaseRequest::new(&format!("u{u}")))
            .await
            .unwrap();
    }
    let persist = spawn(&[
        "persist",
        "--redis-url",
        &url,
        "--database-url",
        &db,
        "--no-sweeper",
    ]);
    let audit = |extra: &[&str]| {
        let mut args = vec![
            "audit",
            "--sale",
            "cli",
            "--redis-url",
            &url,
            "--database-url",
            &db,
        ];
        args.extend_from_slice(extra);
        seckill(&args)
    };
    let report = audit_until_persisted(40, || audit(&["--json"]));
    assert_eq!(report["orders_in_sql"], 40);
    terminate(persist);

    let store = seckill_orders::Store::open(&db).await.unwrap();
    sqlx::query("UPDATE orders SET state = 'paid' WHERE user_id = 'u7'")
        .execute(store.pool())
        .await
        .unwrap();
    let out = audit(&[]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("state_mismatch") && text.contains("MISMATCHES FOUND"),
        "{text}"
    );

    // Could not check: exit 2 with a message.
    let bad = seckill(&[
        "audit",
        "--sale",
        "no such",
        "--redis-url",
        &url,
        "--database-url",
        &db,
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("sale id"));
    let down = seckill(&[
        "audit",
        "--sale",
        "cli",
        "--redis-url",
        "redis://127.0.0.1:1/",
        "--database-url",
        &db,
    ]);
    assert_eq!(down.status.code(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_refuses_a_live_sale_then_moves_a_finished_one_to_sql() {
    let (_stores, url, db, engine) = stores("arc", 10).await;
    let buy = engine.purchaser(Strategy::Atomic, "arc").await.unwrap();
    let mut orders = Vec::new();
    for u in 0..4 {
        match buy
            .purchase(&PurchaseRequest::new(&format!("u{u}")))
            .await
            .unwrap()
        {
            seckill_engine::Outcome::Ok(order) => orders.push(order.order_id),
            other => panic!("{other:?}"),
        }
    }
    let archive = |sale: &str| {
        seckill(&[
            "archive",
            "--sale",
            sale,
            "--redis-url",
            &url,
            "--database-url",
            &db,
        ])
    };
    // Live: refused with the reason, exit 1.
    let out = archive("arc");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has not ended"));
    engine.end_sale("arc").await.unwrap();
    let out = archive("arc");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("await payment"));
    for (i, order) in orders.iter().enumerate() {
        if i % 2 == 0 {
            engine.pay(order).await.unwrap();
        } else {
            engine.cancel(order).await.unwrap();
        }
    }
    let out = archive("arc");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not in SQL yet"));
    let persist = spawn(&[
        "persist",
        "--redis-url",
        &url,
        "--database-url",
        &db,
        "--no-sweeper",
    ]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = archive("arc");
        if out.status.success() {
            assert!(String::from_utf8_lossy(&out.stdout).contains("4 orders (2 units sold)"));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    terminate(persist);
    assert!(engine.sale("arc").await.is_err(), "its Redis keys are gone");
    // Archived: audit checks SQL alone; archiving again is a no-op.
    let out = seckill(&[
        "audit",
        "--sale",
        "arc",
        "--redis-url",
        &url,
        "--database-url",
        &db,
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            report["archived"].as_bool(),
            report["orders_in_sql"].as_u64()
        ),
        (Some(true), Some(4))
    );
    assert!(archive("arc").status.success());
    let out = archive("nosuch");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(archive("bad id").status.code(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persist_archives_a_finished_sale_when_due() {
    let (_stores, url, db, engine) = stores("due", 5).await;
    let buy = engine.purchaser(Strategy::Atomic, "due").await.unwrap();
    let order = match buy.purchase(&PurchaseRequest::new("u")).await.unwrap() {
        seckill_engine::Outcome::Ok(order) => order.order_id,
        other => panic!("{other:?}"),
    };
    engine.pay(&order).await.unwrap();
    engine.end_sale("due").await.unwrap();
    let persist = spawn(&[
        "persist",
        "--redis-url",
        &url,
        "--database-url",
        &db,
        "--archive-after",
        "0",
    ]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while engine.sale("due").await.is_ok() {
        assert!(Instant::now() < deadline, "never archived");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    terminate(persist);
    let store = seckill_orders::Store::open(&db).await.unwrap();
    let stored = store.sale("due").await.unwrap().unwrap();
    assert_eq!(stored.archived_sold, Some(1));
    common::assert_refused(&[
        &["persist", "--archive-after", "-1"],
        &[
            "serve",
            "--admin-token",
            "t",
            "--buyer-auth",
            "body",
            "--archive-after",
            "1e9",
        ],
    ]);
}

/// `--redis-cluster` instead of `--redis-url`: `persist` drains a sale on a
/// local cluster and `audit` finds it clean; an empty node list is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persist_and_audit_run_on_a_cluster() {
    let cluster = seckill_testkit::RedisCluster::start(3, 1).unwrap();
    let nodes = cluster.addresses().join(",");
    let engine = Engine::connect_target(&seckill_redis::Target::cluster(&nodes).unwrap())
        .await
        .unwrap();
    engine
        .create_sale(&SaleSpec::new("on-cluster", 30))
        .await
        .unwrap();
    let buyer = engine
        .purchaser(Strategy::Atomic, "on-cluster")
        .await
        .unwrap();
    for i in 0..30 {
        buyer
            .purchase(&PurchaseRequest::new(&format!("u{i}")))
            .await
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db").to_string_lossy().into_owned();
    let persist = spawn(&["persist", "--redis-cluster", &nodes, "--database-url", &db]);
    let report = audit_until_persisted(30, || {
        seckill(&[
            "audit",
            "--sale",
            "on-cluster",
            "--redis-cluster",
            &nodes,
            "--database-url",
            &db,
            "--json",
        ])
    });
    assert_eq!(report["orders_in_sql"], 30);
    terminate(persist);

    let empty = seckill(&[
        "audit",
        "--sale",
        "x",
        "--redis-cluster",
        ",",
        "--database-url",
        &db,
    ]);
    assert_eq!(empty.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&empty.stderr).contains("seed node"));
}

/// A sale Redis lost (`FLUSHALL`) after its orders reached SQL:
/// `audit --repair-from-sql` rebuilds it, and `persist
/// --restore-lost-sales` does so by itself the next time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_redis_lost_is_rebuilt_from_sql_by_audit_or_by_persist() {
    let (_keep, url, db, engine) = stores("l", 10).await;
    let purchaser = engine.purchaser(Strategy::Atomic, "l").await.unwrap();
    for user in ["a", "b"] {
        purchaser
            .purchase(&PurchaseRequest::new(user))
            .await
            .unwrap();
    }
    let audit_with = |flag: &str| {
        seckill(&[
            "audit",
            "--sale",
            "l",
            "--redis-url",
            &url,
            "--database-url",
            &db,
            flag,
        ])
    };
    let audit = || audit_with("--json");
    let flush = || async {
        let () = redis::cmd("FLUSHALL")
            .query_async(&mut engine.connection())
            .await
            .unwrap();
    };
    let sold = || async { engine.sale("l").await.map(|s| s.sold) };

    let persist = spawn(&["persist", "--redis-url", &url, "--database-url", &db]);
    audit_until_persisted(2, audit);
    terminate(persist);
    flush().await;
    assert!(matches!(
        sold().await,
        Err(seckill_engine::Error::SaleNotFound(_))
    ));
    let repaired = audit_with("--repair-from-sql");
    common::assert_success(&repaired);
    let said = String::from_utf8_lossy(&repaired.stderr);
    assert!(
        said.contains("2 orders") && said.contains("could not be rebuilt"),
        "{said}"
    );
    assert_eq!(sold().await.unwrap(), 2);

    flush().await;
    let persist = spawn(&[
        "persist",
        "--redis-url",
        &url,
        "--database-url",
        &db,
        "--restore-lost-sales",
    ]);
    let deadline = Instant::now() + Duration::from_secs(15);
    while sold().await.ok() != Some(2) {
        assert!(Instant::now() < deadline, "persist never restored the sale");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The rebuilt stream's entries are read again (inserting an order twice
    // is a no-op), which files the pending orders for expiry.
    audit_until_persisted(2, audit);
    terminate(persist);
}

/// The README's table of exit codes: a command that cannot run (Redis
/// away, a setting missing) exits 2, never 0 or 1.
#[test]
fn commands_that_cannot_run_exit_2() {
    let down = "redis://127.0.0.1:1/";
    for args in [
        &["bench", "--strategy", "atomic", "--redis-url", down][..],
        &[
            "lock-bench",
            "--mode",
            "hot",
            "--clients",
            "2",
            "--duration",
            "1",
            "--redis-url",
            down,
        ],
        &[
            "archive",
            "--sale",
            "s",
            "--redis-url",
            down,
            "--database-url",
            "sqlite::memory:",
        ],
        // serve without an admin token refuses to start.
        &["serve", "--buyer-auth", "body", "--redis-url", down],
    ] {
        let out = seckill(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `persist --durability replica` commits only what a replica has: on a
/// master without one the orders stay out of SQL; once a replica has
/// synced, the batch left pending is taken over and committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persist_with_replica_durability_waits_for_a_replica() {
    let ((master, _dir), url, db, engine) = stores("rep", 100).await;
    let buy = engine.purchaser(Strategy::Atomic, "rep").await.unwrap();
    for u in 0..20 {
        buy.purchase(&PurchaseRequest::new(&format!("u{u}")))
            .await
            .unwrap();
    }
    let persist = spawn(&[
        "persist",
        "--redis-url",
        &url,
        "--database-url",
        &db,
        "--no-sweeper",
        "--durability",
        "replica",
        "--replica-timeout-ms",
        "100",
        "--claim-idle-secs",
        "3",
    ]);
    let audit = {
        let (url, db) = (url.clone(), db.clone());
        move || {
            let args = [
                "audit",
                "--sale",
                "rep",
                "--redis-url",
                &url,
                "--database-url",
                &db,
            ];
            seckill(&[&args[..], &["--json"]].concat())
        }
    };
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let report: serde_json::Value = serde_json::from_slice(&audit().stdout).unwrap();
    assert_eq!(
        report["orders_in_sql"], 0,
        "committed with no replica: {report}"
    );

    let replica = seckill_testkit::Options::default()
        .replica_of(master.port())
        .start()
        .unwrap();
    let report = tokio::task::spawn_blocking(move || audit_until_persisted(20, audit))
        .await
        .unwrap();
    assert_eq!(report["orders_in_sql"], 20);
    terminate(persist);
    drop(replica);
}
