//! Drills with real processes: a persister SIGKILLed under load and another
//! taking over; `seckill serve` SIGKILLed mid-load and started again.

use std::collections::HashSet;
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
    let (mut first, base) = common::start_serve(&redis.url(), &db, &[]);
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
    let (mut second, base) = common::start_serve(&redis.url(), &db, &[]);
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

/// Drill 16: the refiller of a sharded sale SIGKILLed mid-transfer. Two
/// `seckill serve` processes share one Redis; only the first sells at
/// first, so its refiller is the one acting. It is frozen (SIGSTOP) until a
/// transfer is seen open, then SIGKILLed; the second, once the dead
/// holder's lease lapses, finishes that transfer and sells the rest.
/// Nothing lost or made: the books balance, every unit sells, every
/// acknowledged order is in SQL, the audit is clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drill_16_the_refiller_killed_mid_transfer_is_replaced_without_loss() {
    const STOCK: u64 = 8_000;
    let redis = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db");
    let (mut first, base) = common::start_serve(&redis.url(), &db, &[]);
    let (mut second, second_base) = common::start_serve(&redis.url(), &db, &[]);
    let admin = Http::new(&base, Some("t".into()));
    let sale = json!({ "id": "s", "name": "x", "stock": STOCK, "per_user_limit": 2, "shards": 4 });
    let (status, body) = admin.post("/v1/sales", &sale).await.unwrap();
    assert_eq!(status.as_u16(), 201, "{body}");
    let load = {
        let base = base.clone();
        tokio::spawn(async move { buy_for(&base, "a", Duration::from_secs(60)).await })
    };
    // Frozen, the first process sends nothing: what the sale's hash shows
    // is where its refiller stopped.
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // Tries, not seconds: on a loaded machine the refiller, given a few
    // ms between freezes, gets less done in each, so a wall-clock limit
    // left it fewer chances to be caught mid-transfer.
    let mut tries = 0;
    let (open, fence_at_kill) = loop {
        tries += 1;
        assert!(
            tries <= 600 && !load.is_finished(),
            "no transfer was ever seen open in {tries} tries"
        );
        tokio::time::sleep(Duration::from_millis(3)).await;
        // SAFETY: signals to our own child process.
        unsafe { libc::kill(first.id() as i32, libc::SIGSTOP) };
        // A step the refiller sent just before it stopped may still be on
        // its way: let it land, so an open transfer seen now stays open.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (open, fence): (Option<String>, Option<u64>) = redis::cmd("HMGET")
            .arg("seckill:{sale:s}:sale")
            .arg("xopen")
            .arg("fence")
            .query_async(&mut conn)
            .await
            .unwrap();
        match open.filter(|o| !o.is_empty()) {
            Some(open) => break (open, fence.unwrap()),
            None => unsafe { libc::kill(first.id() as i32, libc::SIGCONT) },
        };
    };
    let killed = Instant::now();
    kill(&mut first, libc::SIGKILL);
    let mut acknowledged = load.await.unwrap();
    let number: u64 = open.split('|').next().unwrap().parse().unwrap();

    // The second process sells the rest.
    let engine = Engine::connect(&redis.url()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    for round in 0.. {
        if engine.sale("s").await.unwrap().remaining == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the rest never sold");
        let tag = format!("b{round}-");
        acknowledged.extend(buy_for(&second_base, &tag, Duration::from_secs(1)).await);
    }
    let sold_out_after = killed.elapsed();
    for part in engine.parts("s").await.unwrap() {
        drained(&engine, &part).await;
    }
    kill(&mut second, libc::SIGTERM);

    let check = engine.sharding_check("s").await.unwrap();
    assert!(check.problems.is_empty(), "{:?}", check.problems);
    let numbers: Vec<u64> = check.transfers.iter().map(|t| t.number).collect();
    let expected: Vec<u64> = (1..=numbers.len() as u64).collect();
    assert_eq!(numbers, expected, "each transfer recorded once, in order");
    let finished = check.transfers.iter().find(|t| t.number == number);
    let finished = finished.unwrap_or_else(|| panic!("transfer {open} never ended"));
    assert!(
        finished.fence > fence_at_kill,
        "transfer {open} was ended by fence {}, not by a later refiller",
        finished.fence
    );
    let state = engine.sale("s").await.unwrap();
    assert_eq!((state.sold, state.stock), (STOCK, STOCK));
    // Purchases in flight at the kill may have sold unacknowledged.
    let unique: HashSet<&String> = acknowledged.iter().collect();
    assert_eq!(
        unique.len(),
        acknowledged.len(),
        "an order acknowledged twice"
    );
    assert!(acknowledged.len() as u64 <= STOCK);
    audit_clean(&redis.url(), &db, "s");
    let store = Store::open(db.to_str().unwrap()).await.unwrap();
    let mut in_sql = HashSet::new();
    for part in engine.parts("s").await.unwrap() {
        let generation = engine.sale(&part).await.unwrap().generation as i64;
        let orders = store.orders(&part, generation).await.unwrap();
        in_sql.extend(orders.into_iter().map(|o| o.order_id));
    }
    for order in &acknowledged {
        assert!(in_sql.contains(order), "acknowledged {order} not in SQL");
    }
    println!(
        "drill-figures {}",
        json!({ "drill": "16", "figures": {
            "open_at_kill": open,
            "fence_at_kill": fence_at_kill,
            "finished_by_fence": finished.fence,
            "transfers": numbers.len(),
            "sold": state.sold,
            "stock": STOCK,
            "sold_out_after_kill_ms": sold_out_after.as_millis() as u64,
            "acknowledged_in_sql": acknowledged.len(),
            "problems": check.problems.len(),
        }})
    );
}
