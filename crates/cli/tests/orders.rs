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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persist_then_audit_is_clean_and_a_planted_mismatch_exits_1() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("orders.db");
    let (url, db) = (server.url(), db.to_str().unwrap().to_owned());
    let engine = Engine::connect(&url).await.unwrap();
    engine
        .create_sale(&SaleSpec::new("cli", 100))
        .await
        .unwrap();
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
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = audit(&["--json"]);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if report["backlog"] == 0 && report["orders_in_sql"] == 40 {
            assert_eq!(out.status.code(), Some(0), "{report}");
            break;
        }
        assert!(Instant::now() < deadline, "never persisted: {report}");
        std::thread::sleep(Duration::from_millis(100));
    }
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
