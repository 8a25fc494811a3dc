//! Fault drills against the running service: Redis killed and restarted
//! with AOF, Redis away from the start, Redis frozen. Each bounded in time.

use std::time::{Duration, Instant};

use hyper::StatusCode;
use seckill_engine::Engine;
use seckill_orders::{Store, audit, wait_drained};
use seckill_service::client::Http;
use seckill_testkit::{Fsync, Options, RedisServer};
use serde_json::json;

mod common;

use common::{Buyers, forgotten_and_in_sql, serve, wait_ready};

async fn drain(redis_url: &str, sale: &str) {
    let engine = Engine::connect(redis_url).await.unwrap();
    let mut conn = engine.connection();
    wait_drained(&mut conn, sale, Duration::from_secs(20))
        .await
        .unwrap();
}

/// A running service on a fresh redis-server started with `options`, with
/// `sale` created. Destructure it binding `_dir` to a name: dropping the
/// directory deletes the SQLite file under the running service.
struct Drill {
    redis: RedisServer,
    _dir: tempfile::TempDir,
    db: String,
    running: seckill_service::Running,
    http: Http,
}

async fn drill(options: Options, sale: serde_json::Value) -> Drill {
    let redis = options.start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db").to_string_lossy().into_owned();
    let (running, http, admin) = serve(
        seckill_redis::Target::server(&redis.url()),
        &db,
        Default::default(),
    )
    .await;
    let (status, body) = admin.post("/v1/sales", &sale).await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{body}");
    Drill {
        redis,
        _dir: dir,
        db,
        running,
        http,
    }
}

/// Drill 3: redis-server SIGKILLed mid-sale and restarted with its AOF
/// (`appendfsync always`): nothing oversold, every purchase answered 200 is
/// in SQL afterwards, 503 while Redis is down, recovery without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_mid_sale_loses_no_acknowledged_purchase() {
    let Drill {
        mut redis,
        db,
        running,
        http,
        _dir: _keep,
        ..
    } = drill(
        Options::default().aof(Fsync::Always),
        json!({ "id": "k", "name": "x", "stock": 3000, "per_user_limit": 3 }),
    )
    .await;

    let buyers = Buyers::start(&http, "k");
    tokio::time::sleep(Duration::from_millis(400)).await;
    redis.kill();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let down = Instant::now();
    let (status, body) = http
        .post("/v1/sales/k/purchase", &json!({ "user_id": "probe" }))
        .await
        .unwrap();
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable"))
    );
    assert!(
        down.elapsed() < Duration::from_secs(1),
        "503 took {:?}",
        down.elapsed()
    );
    redis.restart().unwrap();
    wait_ready(&http, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let seen = buyers.finish().await;
    let acknowledged = seen.acknowledged;
    assert!(seen.unavailable > 0, "the buyers never saw Redis down");
    assert!(!acknowledged.is_empty());

    drain(&redis.url(), "k").await;
    let engine = Engine::connect(&redis.url()).await.unwrap();
    let store = Store::open(&db).await.unwrap();
    let report = audit(&engine, &store, "k").await.unwrap();
    assert!(report.clean, "{report:#?}");
    let sale = engine.sale("k").await.unwrap();
    assert!(sale.sold <= sale.stock);
    let in_sql: std::collections::HashSet<String> = store
        .orders("k", sale.generation as i64)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.order_id)
        .collect();
    let lost: Vec<&String> = acknowledged
        .iter()
        .map(|(o, _)| o)
        .filter(|o| !in_sql.contains(*o))
        .collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged purchases lost: {lost:?}",
        lost.len()
    );
    running.stop().await;
}

/// Drill 7: Redis unreachable from the start: `/readyz` and purchases answer
/// 503 within a second; the service recovers when Redis appears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_away_from_the_start_then_appearing() {
    let mut redis = RedisServer::start().unwrap();
    redis.kill();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db").to_string_lossy().into_owned();
    let (running, http, admin) = serve(
        seckill_redis::Target::server(&redis.url()),
        &db,
        Default::default(),
    )
    .await;
    for _ in 0..20 {
        let started = Instant::now();
        let (status, body) = http
            .post("/v1/sales/a/purchase", &json!({ "user_id": "u" }))
            .await
            .unwrap();
        assert_eq!(
            (status, body["code"].as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable"))
        );
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    }
    assert_eq!(
        http.get("/readyz").await.unwrap().0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // Thousands more 503s: no thread or memory growth while Redis is away.
    let (threads, rss) = process_status();
    let started = Instant::now();
    for i in 0..2_000 {
        let body = json!({ "user_id": format!("u{i}") });
        let (status, _) = http.post("/v1/sales/a/purchase", &body).await.unwrap();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    }
    eprintln!("2000 answers without Redis in {:?}", started.elapsed());
    let (threads_after, rss_after) = process_status();
    assert!(
        threads_after <= threads + 2,
        "threads {threads} -> {threads_after}"
    );
    assert!(
        rss_after <= rss + 8 * 1024,
        "RSS {rss} KiB -> {rss_after} KiB"
    );
    redis.restart().unwrap();
    wait_ready(&http, Duration::from_secs(10)).await;
    let sale = json!({ "id": "a", "name": "x", "stock": 5, "per_user_limit": 1 });
    assert_eq!(
        admin.post("/v1/sales", &sale).await.unwrap().0,
        StatusCode::CREATED
    );
    assert_eq!(
        http.post("/v1/sales/a/purchase", &json!({ "user_id": "u" }))
            .await
            .unwrap()
            .0,
        StatusCode::OK
    );
    running.stop().await;
}

/// Drill 8: Redis frozen (`CLIENT PAUSE`) longer than the service waits:
/// the purchase answers 503; once Redis runs again, the queued purchase
/// applies once, and the buyer's retry with the same request id gets that
/// order instead of buying twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_times_out_as_503_and_retries_never_double_apply() {
    let sale = json!({ "id": "p", "name": "x", "stock": 10, "per_user_limit": 5 });
    let Drill {
        redis,
        running,
        http,
        _dir: _keep,
        ..
    } = drill(Options::default(), sale).await;
    pause_all(&redis.url(), 3_000).await;
    let body = json!({ "user_id": "patient", "request_id": "once" });
    let started = Instant::now();
    let (status, answer) = http.post("/v1/sales/p/purchase", &body).await.unwrap();
    assert_eq!(
        (status, answer["code"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable"))
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await; // the pause ends
    let (status, first) = http.post("/v1/sales/p/purchase", &body).await.unwrap();
    assert_eq!(status, StatusCode::OK, "{first}");
    let (_, second) = http.post("/v1/sales/p/purchase", &body).await.unwrap();
    assert_eq!(first, second);
    let (_, sale) = http.get("/v1/sales/p").await.unwrap();
    assert_eq!(sale["sold"], 1, "applied exactly once: {sale}");
    running.stop().await;
}

/// Freezes the Redis at `url` for `ms` (`CLIENT PAUSE … ALL`): every
/// command sent meanwhile waits, then runs.
async fn pause_all(url: &str, ms: u64) {
    let mut raw = seckill_redis::Target::server(url).connect().await.unwrap();
    let () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(ms)
        .arg("ALL")
        .query_async(&mut raw)
        .await
        .unwrap();
}

/// Drill 4: the same crash with `appendfsync everysec`. Redis may forget up
/// to about a second of acknowledged purchases; this measures how many, and
/// checks the audit reports every one that reached SQL (no silent drift).
/// (Killing the process loses nothing in practice: Redis writes the AOF
/// before it answers and the kernel keeps what was written; the everysec
/// window opens on a host crash, which a test here cannot cause.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_everysec_the_loss_window_is_measured_and_audited() {
    let Drill {
        mut redis,
        db,
        running,
        http,
        _dir: _keep,
        ..
    } = drill(
        Options::default().aof(Fsync::EverySec),
        json!({ "id": "e", "name": "x", "stock": 1000000, "per_user_limit": 5 }),
    )
    .await;
    let buyers = Buyers::start(&http, "e");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    redis.kill();
    let killed = Instant::now();
    let acknowledged = buyers.finish().await.acknowledged;
    redis.restart().unwrap();
    wait_ready(&http, Duration::from_secs(10)).await;
    drain(&redis.url(), "e").await;

    let engine = Engine::connect(&redis.url()).await.unwrap();
    let store = Store::open(&db).await.unwrap();
    let orders = acknowledged.iter().map(|(o, _)| o.as_str());
    let (forgotten, in_sql) = forgotten_and_in_sql(&engine, &store, "e", orders).await;
    let acknowledged_at: std::collections::HashMap<&str, Instant> = acknowledged
        .iter()
        .map(|(o, at)| (o.as_str(), *at))
        .collect();
    let forgotten: Vec<(String, Duration)> = forgotten
        .into_iter()
        .map(|o| {
            let age = killed.duration_since(acknowledged_at[o.as_str()]);
            (o, age)
        })
        .collect();
    let reported = forgotten.iter().filter(|(o, _)| in_sql.contains(o)).count();
    let window = forgotten
        .iter()
        .map(|(_, age)| *age)
        .max()
        .unwrap_or_default();
    eprintln!(
        "everysec: {} acknowledged, {} forgotten by Redis (oldest {:?} before the kill), \
         {} of them in SQL and reported, {} in neither",
        acknowledged.len(),
        forgotten.len(),
        window,
        reported,
        forgotten.len() - reported
    );
    assert!(
        window <= Duration::from_millis(2_500),
        "lost more than everysec allows: {window:?}"
    );
    let report = audit(&engine, &store, "e").await.unwrap();
    let flagged = report
        .findings
        .iter()
        .filter(|f| matches!(f, seckill_orders::Finding::MissingInRedis { .. }))
        .count();
    assert_eq!(flagged, reported, "{report:#?}");
    assert_eq!(report.clean, reported == 0, "{report:#?}");
    running.stop().await;
}

/// `serve` on `master` with `--durability replica` (a 100 ms wait) and
/// SQLite in a throwaway folder, with sale `sale` made; bind `_dir` to a
/// name, as [`Drill`]'s.
struct Durable {
    running: seckill_service::Running,
    http: Http,
    admin: Http,
    db: String,
    _dir: tempfile::TempDir,
}

impl Durable {
    async fn start(master: &RedisServer, sale: &serde_json::Value) -> Self {
        let _dir = tempfile::tempdir().unwrap();
        let db = _dir.path().join("o.db").to_string_lossy().into_owned();
        let durability = seckill_engine::Durability::Replica {
            timeout: Duration::from_millis(100),
        };
        let target = seckill_redis::Target::server(&master.url());
        let (running, http, admin) = serve(target, &db, durability).await;
        let (status, body) = admin.post("/v1/sales", sale).await.unwrap();
        assert_eq!(status, StatusCode::CREATED, "{body}");
        Self {
            running,
            http,
            admin,
            db,
            _dir,
        }
    }
}

/// With `--durability replica`, a master without a replica cannot confirm a
/// purchase: its sale answers 503 (nothing acknowledged), `/readyz` stays
/// 200 and lists the sale, and the gauge counts it; once a replica
/// attaches the sale sells again and leaves the list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_waiting_for_a_replica_is_listed_until_one_attaches() {
    let master = RedisServer::start().unwrap();
    let sale = json!({"id": "w", "name": "w", "stock": 100, "per_user_limit": 100});
    let Durable {
        running,
        http,
        _dir: _keep,
        ..
    } = Durable::start(&master, &sale).await;
    let buy = |n: u32| {
        let http = http.clone();
        async move {
            let body = json!({"user_id": format!("u{n}"), "request_id": format!("r{n}")});
            http.post("/v1/sales/w/purchase", &body).await.unwrap()
        }
    };
    let (status, body) = buy(0).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let (status, ready) = http.get("/readyz").await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ready["sales_waiting_for_replica"], json!(["w"]), "{ready}");
    let metrics = common::raw_text(running.addr, "GET", "/metrics", &[], "");
    assert!(
        metrics.contains("seckill_sales_waiting_for_replica 1"),
        "{metrics}"
    );

    let port = master.port().to_string();
    let _replica = Options::default()
        .arg("replicaof", &format!("127.0.0.1 {port}"))
        .start()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut n = 1;
    while buy(n).await.0 != StatusCode::OK {
        assert!(Instant::now() < deadline, "never sold again with a replica");
        tokio::time::sleep(Duration::from_millis(100)).await;
        n += 1;
    }
    let (_, ready) = http.get("/readyz").await.unwrap();
    assert!(ready.get("sales_waiting_for_replica").is_none(), "{ready}");
    let metrics = common::raw_text(running.addr, "GET", "/metrics", &[], "");
    assert!(
        metrics.contains("seckill_sales_waiting_for_replica 0"),
        "{metrics}"
    );
    running.stop().await;
}

/// With `--durability replica`, a payment no replica confirmed in time
/// answers 503 and records no payment in SQL, nor does a second one sent
/// while the replica is still frozen (done already, it waits all the
/// same); once the replica runs again, sending it again answers the order
/// paid and records the payment once. A purchase sent then without a
/// request id answers 503 naming the one it was made under, and retried
/// with it, answers that order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_no_replica_confirmed_is_refused_and_recorded_nowhere() {
    let (master, replicas) = RedisServer::start_with_replicas(1).unwrap();
    let sale = json!({"id": "p", "name": "p", "stock": 10, "per_user_limit": 3});
    let Durable {
        running,
        http,
        admin,
        db,
        _dir,
    } = Durable::start(&master, &sale).await;
    let body = json!({"user_id": "u0", "request_id": "r0"});
    let (status, order) = http.post("/v1/sales/p/purchase", &body).await.unwrap();
    assert_eq!(status, StatusCode::OK, "{order}");
    let order_id = order["order_id"].as_str().unwrap().to_owned();
    let pay = format!("/v1/orders/{order_id}/pay");
    let store = Store::open(&db).await.unwrap();

    replicas[0].pause().unwrap();
    for _ in 0..2 {
        let (status, body) = admin
            .post(&pay, &json!({"payment_ref": "pay-0"}))
            .await
            .unwrap();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["code"], "unavailable", "{body}");
    }
    assert_eq!(store.payment_ref(&order_id).await.unwrap(), None);
    // A purchase sent without a request id: the 503 names the one it was
    // made under.
    let (status, body) = http
        .post("/v1/sales/p/purchase", &json!({"user_id": "u1"}))
        .await
        .unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let made_for = body["request_id"]
        .as_str()
        .expect("a request id")
        .to_owned();

    replicas[0].resume().unwrap();
    let paid = post_until_ok(&admin, &pay, &json!({"payment_ref": "pay-0"})).await;
    assert_eq!(paid["state"], "paid", "{paid}");
    assert_eq!(
        store.payment_ref(&order_id).await.unwrap().as_deref(),
        Some("pay-0")
    );
    // Retried with it, twice: the one order made, not a second or third.
    let retry = json!({"user_id": "u1", "request_id": made_for});
    let mut answered = Vec::new();
    for _ in 0..2 {
        let (status, body) = http.post("/v1/sales/p/purchase", &retry).await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
        answered.push(body["order_id"].clone());
    }
    assert_eq!(answered[0], answered[1]);
    // Listed from SQL, once persisted.
    let deadline = Instant::now() + Duration::from_secs(10);
    let listed = loop {
        let (_, listed) = admin.get("/v1/sales/p/orders?user_id=u1").await.unwrap();
        if listed["orders"].as_array().is_some_and(|o| !o.is_empty()) {
            break listed;
        }
        assert!(Instant::now() < deadline, "never listed: {listed}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        listed["orders"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    running.stop().await;
}

/// Drill 8 with no request id, where the service makes one (here under
/// `--durability replica`; on a cluster alike): Redis frozen longer than
/// the service waits, the 503 names the id the purchase was made under;
/// retried with it once Redis runs again, it answers the order the frozen
/// call made then, not a second one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_redis_did_not_answer_names_the_request_id_to_retry_with() {
    let (master, _replicas) = RedisServer::start_with_replicas(1).unwrap();
    let sale = json!({"id": "f", "name": "f", "stock": 10, "per_user_limit": 5});
    let Durable {
        running,
        http,
        _dir: _keep,
        ..
    } = Durable::start(&master, &sale).await;
    // The sale's purchaser made first (its first purchase reads the sale).
    let (status, body) = http
        .post("/v1/sales/f/purchase", &json!({"user_id": "first"}))
        .await
        .unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    pause_all(&master.url(), 3_000).await;
    let started = Instant::now();
    let (status, answer) = http
        .post("/v1/sales/f/purchase", &json!({"user_id": "patient"}))
        .await
        .unwrap();
    assert_eq!(
        (status, answer["code"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")),
        "{answer}"
    );
    let made_for = answer["request_id"]
        .as_str()
        .expect("a request id")
        .to_owned();
    tokio::time::sleep(Duration::from_millis(3_500).saturating_sub(started.elapsed())).await;
    let retry = json!({"user_id": "patient", "request_id": made_for});
    post_until_ok(&http, "/v1/sales/f/purchase", &retry).await;
    let (_, sale) = http.get("/v1/sales/f").await.unwrap();
    assert_eq!(
        sale["sold"], 2,
        "the first, and the frozen one once: {sale}"
    );
    running.stop().await;
}

/// POSTs `body` to `path` until it answers 200, at most 10 s (a replica
/// resumed takes a moment to confirm), and answers that 200's body.
async fn post_until_ok(http: &Http, path: &str, body: &serde_json::Value) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, answer) = http.post(path, body).await.unwrap();
        if status == StatusCode::OK {
            return answer;
        }
        assert!(Instant::now() < deadline, "never 200: {answer}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// This process's thread count and resident memory (KiB), from /proc.
fn process_status() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap()
    };
    (field("Threads:"), field("VmRSS:"))
}
