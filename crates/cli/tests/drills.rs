//! Drills with real processes: a persister SIGKILLed under load and another
//! taking over; `seckill serve` SIGKILLed mid-load and started again.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use seckill_engine::bench::race;
use seckill_engine::{Engine, PurchaseRequest, SaleSpec, Strategy};
use seckill_orders::{Store, wait_drained};
use seckill_service::client::Http;
use seckill_testkit::RedisServer;
use serde_json::json;

mod common;

fn seckill() -> Command {
    Command::new(env!("CARGO_BIN_EXE_seckill"))
}

fn kill(child: &mut Child, signal: i32) {
    // SAFETY: a signal to our own child process.
    unsafe { libc::kill(child.id() as i32, signal) };
    child.wait().unwrap();
}

async fn drained(engine: &Engine, sale: &str) {
    let mut conn = engine.connection();
    wait_drained(&mut conn, sale, Duration::from_secs(30))
        .await
        .unwrap();
}

fn audit_clean(redis: &str, db: &Path, sale: &str) {
    let out = common::run(&[
        "audit",
        "--sale",
        sale,
        "--redis-url",
        redis,
        "--database-url",
        db.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Drill 5: a persister process killed mid-batch under load; another takes
/// over the batch it left uncommitted: nothing lost, nothing duplicated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persister_killed_under_load_is_replaced_without_loss_or_duplicates() {
    let redis = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db");
    let url = redis.url();
    let persist = |extra: &[&str]| {
        seckill()
            .args(["persist", "--redis-url", &url, "--no-sweeper"])
            .arg("--database-url")
            .arg(&db)
            .args(extra)
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let engine = Engine::connect(&url).await.unwrap();
    engine
        .create_sale(&SaleSpec::new("p", 30_000))
        .await
        .unwrap();
    let mut first = persist(&[]);
    let buyer = engine.purchaser(Strategy::Atomic, "p").await.unwrap();
    let requests = (0..30_000)
        .map(|i| PurchaseRequest::new(&format!("u{i}")))
        .collect();
    let load = tokio::spawn(async move { race(&buyer, requests, 128, |_| {}).await });
    tokio::time::sleep(Duration::from_millis(700)).await;
    kill(&mut first, libc::SIGKILL);
    let race = load.await.unwrap();
    assert_eq!(race.demand.acknowledged.len(), 30_000);
    let mut second = persist(&["--claim-idle-secs", "1"]);
    drained(&engine, "p").await;
    kill(&mut second, libc::SIGTERM);

    audit_clean(&url, &db, "p");
    let store = Store::open(db.to_str().unwrap()).await.unwrap();
    let generation = engine.sale("p").await.unwrap().generation as i64;
    let rows = store.orders("p", generation).await.unwrap();
    let ids: HashSet<&str> = rows.iter().map(|o| o.order_id.as_str()).collect();
    assert_eq!((rows.len(), ids.len()), (30_000, 30_000));
    for order in &race.demand.acknowledged {
        assert!(
            ids.contains(order.order_id.as_str()),
            "lost {}",
            order.order_id
        );
    }
}

fn start_serve(redis: &str, db: &Path) -> (Child, String) {
    let mut child = seckill()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-token",
            "t",
            "--redis-url",
            redis,
        ])
        .arg("--database-url")
        .arg(db)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let line = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .next()
        .unwrap()
        .unwrap();
    let base = line.strip_prefix("listening on ").unwrap().to_owned();
    (child, base)
}

async fn buy_for(base: &str, tag: &str, window: Duration) -> Vec<String> {
    let http = Http::new(base, None);
    let deadline = Instant::now() + window;
    let mut tasks = Vec::new();
    for t in 0..16 {
        let (http, tag) = (http.clone(), tag.to_owned());
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut i) = (Vec::new(), 0);
            while Instant::now() < deadline {
                i += 1;
                let body = json!({ "user_id": format!("{tag}{t}x{i}"), "request_id": format!("{tag}{t}r{i}") });
                match http.post("/v1/sales/s/purchase", &body).await {
                    Ok((status, answer)) if status.is_success() => {
                        ok.push(answer["order_id"].as_str().unwrap_or_else(|| panic!("no order_id in {}", answer)).to_owned())
                    }
                    Ok((status, answer)) => assert!(
                        status.is_client_error() || status.as_u16() == 503,
                        "{status}: {answer}"
                    ),
                    Err(_) => break, // the server was killed under us
                }
            }
            ok
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

/// Drill 6: `seckill serve` SIGKILLed mid-load and started again: every
/// purchase answered 200 is in SQL, in-flight ones either completed or never
/// happened, and the audit is clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_killed_mid_load_and_restarted_leaves_a_clean_audit() {
    let redis = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db");
    let (mut first, base) = start_serve(&redis.url(), &db);
    let admin = Http::new(&base, Some("t".into()));
    let sale = json!({ "id": "s", "name": "x", "stock": 50_000, "per_user_limit": 2 });
    assert_eq!(
        admin.post("/v1/sales", &sale).await.unwrap().0.as_u16(),
        201
    );
    let load = {
        let base = base.clone();
        tokio::spawn(async move { buy_for(&base, "a", Duration::from_secs(3)).await })
    };
    tokio::time::sleep(Duration::from_millis(800)).await;
    kill(&mut first, libc::SIGKILL);
    let mut acknowledged = load.await.unwrap();
    assert!(!acknowledged.is_empty());
    let (mut second, base) = start_serve(&redis.url(), &db);
    acknowledged.extend(buy_for(&base, "b", Duration::from_millis(500)).await);
    let engine = Engine::connect(&redis.url()).await.unwrap();
    drained(&engine, "s").await;
    kill(&mut second, libc::SIGTERM);

    audit_clean(&redis.url(), &db, "s");
    let store = Store::open(db.to_str().unwrap()).await.unwrap();
    let generation = engine.sale("s").await.unwrap().generation as i64;
    let in_sql: HashSet<String> = store
        .orders("s", generation)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.order_id)
        .collect();
    for order in &acknowledged {
        assert!(in_sql.contains(order), "acknowledged {order} not in SQL");
    }
}
