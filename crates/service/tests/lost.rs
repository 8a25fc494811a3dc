//! A sale Redis lost while SQL holds it as live: answered 503 `sale_lost`,
//! never sold again by re-creating it, reported, and restored from SQL.

use std::time::{Duration, Instant};

use hyper::StatusCode;
use seckill_engine::Engine;
use seckill_orders::{Store, repair_from_sql};
use seckill_service::client::Http;
use seckill_testkit::{Options, RedisServer};
use serde_json::{Value, json};

mod common;

use common::{Buyers, TOKEN, raw_text};

/// One test at a time: `cargo test` runs a file's tests on threads of one
/// process, and the gauge of lost sales is the process's, which each
/// test's service sets.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Rig {
    redis: RedisServer,
    _dir: tempfile::TempDir,
    db: String,
    running: seckill_service::Running,
    http: Http,
    admin: Http,
}

/// A service with its background work on a private redis-server that keeps
/// nothing on disk (Debian's default here).
async fn rig(restore_lost_sales: bool) -> Rig {
    let redis = Options::default().start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db").to_string_lossy().into_owned();
    let running = seckill_service::start(seckill_service::Config {
        restore_lost_sales,
        ..common::config(seckill_redis::Target::server(&redis.url()), &db, TOKEN)
    })
    .await
    .unwrap();
    let base = format!("http://{}", running.addr);
    Rig {
        redis,
        _dir: dir,
        db,
        running,
        http: Http::new(&base, None),
        admin: Http::new(&base, Some(TOKEN.into())),
    }
}

impl Rig {
    async fn engine_and_store(&self) -> (Engine, Store) {
        (
            Engine::connect(&self.redis.url()).await.unwrap(),
            Store::open(&self.db).await.unwrap(),
        )
    }
}

fn sale(id: &str, stock: u64) -> Value {
    json!({ "id": id, "name": "x", "stock": stock, "per_user_limit": 1, "payment_timeout_secs": 60 })
}

async fn buy(http: &Http, sale: &str, user: &str) -> (StatusCode, Value) {
    http.post(
        &format!("/v1/sales/{sale}/purchase"),
        &json!({ "user_id": user, "request_id": format!("{user}-r") }),
    )
    .await
    .unwrap()
}

/// Waits until SQL holds `n` orders of `sale`.
async fn in_sql(store: &Store, engine: &Engine, sale: &str, n: usize) {
    let generation = engine.sale(sale).await.unwrap().generation as i64;
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.orders(sale, generation).await.unwrap().len() < n {
        assert!(Instant::now() < deadline, "orders never reached SQL");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The gauge of lost sales as `/metrics` shows it.
fn lost_gauge(rig: &Rig) -> Option<f64> {
    let text = raw_text(rig.running.addr, "GET", "/metrics", &[], "");
    text.lines()
        .find_map(|l| l.strip_prefix("seckill_sales_lost_in_redis "))
        .and_then(|v| v.trim().parse().ok())
}

async fn wait_gauge(rig: &Rig, want: f64) -> Duration {
    let start = Instant::now();
    while lost_gauge(rig) != Some(want) {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "seckill_sales_lost_in_redis never showed {want} (shows {:?})",
            lost_gauge(rig)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    start.elapsed()
}

fn code(answer: &(StatusCode, Value)) -> (StatusCode, &str) {
    (answer.0, answer.1["code"].as_str().unwrap_or(""))
}

const LOST: (StatusCode, &str) = (StatusCode::SERVICE_UNAVAILABLE, "sale_lost");

/// The walk of the issue: three orders in SQL, Redis flushed. Every route
/// of the sale answers 503 `sale_lost` (not 404), re-creating it is
/// refused, the gauge shows it within seconds; restored from SQL, its sold
/// units stay sold and its orders stay payable; `replace` starts a new
/// generation over another lost sale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_sale_is_answered_as_lost_until_restored() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let rig = rig(false).await;
    for id in ["f1", "f2"] {
        let answer = rig.admin.post("/v1/sales", &sale(id, 10)).await.unwrap();
        assert_eq!(answer.0, StatusCode::CREATED, "{}", answer.1);
    }
    let sharded = json!({ "id": "h", "name": "x", "stock": 10, "per_user_limit": 1, "shards": 2 });
    let answer = rig.admin.post("/v1/sales", &sharded).await.unwrap();
    assert_eq!(answer.0, StatusCode::CREATED, "{}", answer.1);
    let mut orders = Vec::new();
    for user in ["a", "b", "c"] {
        let (status, body) = buy(&rig.http, "f1", user).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        orders.push(body["order_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(buy(&rig.http, "f2", "a").await.0, StatusCode::OK);
    let engine = Engine::connect(&rig.redis.url()).await.unwrap();
    let store = Store::open(&rig.db).await.unwrap();
    in_sql(&store, &engine, "f1", 3).await;
    in_sql(&store, &engine, "f2", 1).await;
    wait_gauge(&rig, 0.0).await;

    let () = redis::cmd("FLUSHALL")
        .query_async(&mut engine.connection())
        .await
        .unwrap();
    let buying = buy(&rig.http, "f1", "d").await;
    assert_eq!(code(&buying), LOST, "{}", buying.1);
    assert!(
        buying.1["message"]
            .as_str()
            .unwrap()
            .contains("seckill audit --sale f1 --repair-from-sql"),
        "{}",
        buying.1
    );
    assert_eq!(code(&rig.admin.get("/v1/sales/f1").await.unwrap()), LOST);
    assert_eq!(code(&rig.http.get("/v1/sales/f1").await.unwrap()), LOST);
    let order = format!("/v1/orders/{}", orders[0]);
    assert_eq!(code(&rig.admin.get(&order).await.unwrap()), LOST);
    let pay = format!("{order}/pay");
    assert_eq!(code(&rig.admin.post(&pay, &json!({})).await.unwrap()), LOST);
    // A sale SQL never knew is still 404.
    assert_eq!(
        code(&buy(&rig.http, "nope", "a").await),
        (StatusCode::NOT_FOUND, "sale_not_found")
    );
    let again = rig.admin.post("/v1/sales", &sale("f1", 10)).await.unwrap();
    assert_eq!(code(&again), (StatusCode::CONFLICT, "sale_exists"));
    assert!(again.1["message"].as_str().unwrap().contains("replace"));
    let noticed = wait_gauge(&rig, 3.0).await;
    eprintln!("the gauge showed the lost sales {noticed:?} after the look began");
    assert_eq!(code(&buy(&rig.http, "h", "z").await), LOST);

    repair_from_sql(&engine, &store, "f1").await.unwrap();
    let restored = rig.admin.get("/v1/sales/f1").await.unwrap();
    assert_eq!(restored.0, StatusCode::OK, "{}", restored.1);
    assert_eq!(
        (
            restored.1["sold"].as_u64(),
            restored.1["remaining"].as_u64()
        ),
        (Some(3), Some(7))
    );
    let retry = buy(&rig.http, "f1", "a").await;
    assert_eq!(
        (retry.0, retry.1["order_id"].as_str()),
        (StatusCode::OK, Some(orders[0].as_str())),
        "a retry of a restored purchase gets its order back"
    );
    let more = rig
        .http
        .post(
            "/v1/sales/f1/purchase",
            &json!({ "user_id": "a", "request_id": "a-2" }),
        )
        .await
        .unwrap();
    assert_eq!(
        code(&more),
        (StatusCode::CONFLICT, "limit_exceeded"),
        "a buyer's count survives the restore"
    );
    let paid = rig.admin.post(&pay, &json!({})).await.unwrap();
    assert_eq!(paid.0, StatusCode::OK, "{}", paid.1);
    assert_eq!(buy(&rig.http, "f1", "d").await.0, StatusCode::OK);

    // f2 and h replaced: a new generation each, the old one's orders stay
    // in SQL.
    for id in ["f2", "h"] {
        let body =
            json!({ "id": id, "name": "x", "stock": 5, "per_user_limit": 1, "replace": true });
        let replaced = rig.admin.post("/v1/sales", &body).await.unwrap();
        assert_eq!(replaced.0, StatusCode::CREATED, "{}", replaced.1);
        assert_eq!(replaced.1["remaining"].as_u64(), Some(5));
    }
    wait_gauge(&rig, 0.0).await;
    // `replace` over a sale Redis holds changes nothing: it exists.
    let clash = rig
        .admin
        .post(
            "/v1/sales",
            &json!({ "id": "f2", "name": "x", "stock": 5, "per_user_limit": 1, "replace": true }),
        )
        .await
        .unwrap();
    assert_eq!(code(&clash), (StatusCode::CONFLICT, "sale_exists"));
    rig.running.stop().await;
}

/// One shard's keys lost while its sale's remain (on a cluster, the
/// shard's master restarted empty): reported under its sale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_lost_alone_is_reported_under_its_sale() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let rig = rig(false).await;
    wait_gauge(&rig, 0.0).await;
    let (engine, store) = rig.engine_and_store().await;
    sharded((&rig.http, &rig.admin), &engine, &store, "h", 2).await;
    let shard = engine.parts("h").await.unwrap().remove(0);
    lose(&engine, &[&shard]).await;
    wait_gauge(&rig, 1.0).await;
    // A buyer whose home is the lost shard; the other shard sells on.
    let user = (0..)
        .map(|i| format!("z{i}"))
        .find(|u| seckill_engine::home_shard(u, 2) == 0)
        .unwrap();
    assert_eq!(code(&buy(&rig.http, "h", &user).await), LOST);
    rig.running.stop().await;
}

/// A sharded sale of 10 units, 1 per buyer, over `shards` shards (on a
/// cluster, one per master up to the masters), with 3 orders in SQL and
/// SQL knowing its shards. Answers the first order's id (of buyer `a`).
async fn sharded(
    (http, admin): (&Http, &Http),
    engine: &Engine,
    store: &Store,
    id: &str,
    shards: u32,
) -> String {
    let body = json!({ "id": id, "name": "x", "stock": 10, "per_user_limit": 1, "shards": shards });
    let answer = admin.post("/v1/sales", &body).await.unwrap();
    assert_eq!(answer.0, StatusCode::CREATED, "{}", answer.1);
    assert_eq!(
        buy_all(http, id, ["a", "b", "c"].map(String::from)).await,
        3
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let known = store
            .sale(id)
            .await
            .unwrap()
            .and_then(|s| s.shards)
            .is_some();
        if known && sharded_in_sql(store, engine, id).await == 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the orders or shards never reached SQL"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let first = buy(http, id, "a").await;
    first.1["order_id"].as_str().unwrap().to_owned()
}

/// Orders of sharded sale `id` in SQL, over its shards.
async fn sharded_in_sql(store: &Store, engine: &Engine, id: &str) -> usize {
    let generation = engine.sale(id).await.unwrap().generation as i64;
    let mut n = 0;
    for part in engine.parts(id).await.unwrap() {
        n += store.orders(&part, generation).await.unwrap().len();
    }
    n
}

/// Buys one unit for each of `users`, each asking again while units move
/// between shards; answers how many bought.
async fn buy_all(http: &Http, id: &str, users: impl IntoIterator<Item = String>) -> usize {
    let mut bought = 0;
    for user in users {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let answer = buy(http, id, &user).await;
            if answer.0 != StatusCode::SERVICE_UNAVAILABLE {
                bought += usize::from(answer.0 == StatusCode::OK);
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{user} never got an answer: {}",
                answer.1
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    bought
}

/// What a master restarting empty takes: the keys of `parts` and the
/// master's mark (one server: the mark of tag 0).
async fn lose(engine: &Engine, parts: &[&str]) {
    let mut conn = engine.connection();
    for part in parts {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("seckill:{{sale:{part}}}:*"))
            .query_async(&mut conn)
            .await
            .unwrap();
        let () = redis::cmd("DEL")
            .arg(&keys)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let () = redis::cmd("DEL")
        .arg("seckill:{news:0}:mark")
        .query_async(&mut conn)
        .await
        .unwrap();
}

/// A sharded sale rebuilt from SQL, whichever of its parts Redis lost (a
/// shard, the sale's own hash with its pool and ledger, or all): see
/// [`rebuilt_sells_its_stock`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_sale_is_rebuilt_whichever_parts_were_lost() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let rig = rig(true).await;
    wait_gauge(&rig, 0.0).await;
    let (engine, store) = rig.engine_and_store().await;
    for (id, lost) in [("hs", "shard"), ("hp", "sale"), ("ha", "all")] {
        let first = sharded((&rig.http, &rig.admin), &engine, &store, id, 2).await;
        let shards = engine.parts(id).await.unwrap();
        let parts: Vec<&str> = match lost {
            "shard" => vec![&shards[0]],
            "sale" => vec![id],
            _ => shards.iter().map(String::as_str).chain([id]).collect(),
        };
        lose(&engine, &parts).await;
        rebuilt_sells_its_stock(&rig.http, &engine, &store, id, &first).await;
    }
    wait_gauge(&rig, 0.0).await;
    rig.running.stop().await;
}

/// What sharded sale `id` (made by [`sharded`], `first` its first order)
/// must show once rebuilt: its units add up, the orders SQL held stay
/// sold, a retried purchase gets its order back, it sells exactly its
/// stock, and every order bought after reaches SQL.
async fn rebuilt_sells_its_stock(
    http: &Http,
    engine: &Engine,
    store: &Store,
    id: &str,
    first: &str,
) {
    let deadline = Instant::now() + Duration::from_secs(15);
    let check = loop {
        match engine.sharding_check(id).await {
            Ok(check) => break check,
            Err(e) => assert!(Instant::now() < deadline, "{id} never came back: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(check.problems.is_empty(), "{id}: {:?}", check.problems);
    let sale = engine.sale(id).await.unwrap();
    assert_eq!((sale.sold, sale.remaining), (3, 7), "{id}");
    let again = buy(http, id, "a").await;
    assert_eq!(
        (again.0, again.1["order_id"].as_str()),
        (StatusCode::OK, Some(first)),
        "{id}: a retried purchase gets its order back"
    );
    let bought = buy_all(http, id, (0..20).map(|i| format!("u{i}"))).await;
    let check = engine.sharding_check(id).await.unwrap();
    assert!(check.problems.is_empty(), "{id}: {:?}", check.problems);
    let sale = engine.sale(id).await.unwrap();
    assert_eq!(
        (bought, sale.sold, sale.remaining),
        (7, 10, 0),
        "{id}: sold exactly its stock"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while sharded_in_sql(store, engine, id).await < 10 {
        assert!(Instant::now() < deadline, "{id}: orders never reached SQL");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Asks for sale `sale` until it answers 200: until then only 503s
/// (`unavailable` while Redis is away, `sale_lost` once it answers without
/// the sale), never 404; at the first `sale_lost` an admin re-creating the
/// sale is refused. Answers when the first `sale_lost` came and when it was
/// back, since `lost_at`.
async fn until_restored(
    admin: &Http,
    sale: &str,
    lost_at: Instant,
) -> (Option<Duration>, Duration) {
    let mut first_lost = None;
    loop {
        let answer = admin.get(&format!("/v1/sales/{sale}")).await.unwrap();
        match code(&answer) {
            (StatusCode::OK, _) => return (first_lost, lost_at.elapsed()),
            LOST if first_lost.is_none() => {
                first_lost = Some(lost_at.elapsed());
                let again = admin.post("/v1/sales", &drill_sale(sale)).await.unwrap();
                assert_eq!(
                    code(&again),
                    (StatusCode::CONFLICT, "sale_exists"),
                    "{}",
                    again.1
                );
            }
            LOST | (StatusCode::SERVICE_UNAVAILABLE, "unavailable") => {}
            other => panic!("a lost sale answered {other:?}: {}", answer.1),
        }
        assert!(
            lost_at.elapsed() < Duration::from_secs(20),
            "never restored"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What a restored sale must show once its buyers stopped: units sold in
/// Redis = units of the live orders SQL holds (read between two equal
/// readings of Redis, so that no expiry fell in between), sold ≤ stock,
/// no buyer over its limit of 1; an order bought before the loss (at
/// `lost_ms`) is paid, and every other expires. Answers the acknowledged
/// orders Redis took with it (not in SQL) and the orders in SQL.
async fn honoured(
    admin: &Http,
    engine: &Engine,
    store: &Store,
    sale_id: &str,
    seen: &common::Bought,
    lost_ms: i64,
) -> (usize, usize) {
    let (sale, rows) = loop {
        let before = engine.sale(sale_id).await.unwrap();
        seckill_orders::wait_drained(&mut engine.connection(), sale_id, Duration::from_secs(20))
            .await
            .unwrap();
        let rows = store
            .orders(sale_id, before.generation as i64)
            .await
            .unwrap();
        if engine.sale(sale_id).await.unwrap().sold == before.sold {
            break (before, rows);
        }
    };
    let in_sql: std::collections::HashSet<&str> =
        rows.iter().map(|o| o.order_id.as_str()).collect();
    let acknowledged_lost = seen
        .acknowledged
        .iter()
        .filter(|(o, _)| !in_sql.contains(o.as_str()))
        .count();
    let live_in_sql: u64 = rows
        .iter()
        .filter(|o| {
            o.state == seckill_engine::OrderState::PendingPayment
                || o.state == seckill_engine::OrderState::Paid
        })
        .map(|o| o.quantity as u64)
        .sum();
    assert_eq!(
        sale.sold, live_in_sql,
        "Redis and SQL disagree on units sold"
    );
    assert!(sale.sold <= sale.stock);
    let mut users: Vec<&str> = rows.iter().map(|o| o.user_id.as_str()).collect();
    users.sort_unstable();
    let before = users.len();
    users.dedup();
    assert_eq!(users.len(), before, "a buyer over the limit of 1");
    let first = &rows
        .iter()
        .filter(|o| o.created_ms < lost_ms && o.state == seckill_engine::OrderState::PendingPayment)
        .max_by_key(|o| o.created_ms)
        .expect("no order from before the loss left to pay")
        .order_id;
    let paid = admin
        .post(&format!("/v1/orders/{first}/pay"), &json!({}))
        .await
        .unwrap();
    assert_eq!(paid.0, StatusCode::OK, "{}", paid.1);
    let deadline = Instant::now() + Duration::from_secs(DRILL_PAYMENT_TIMEOUT_SECS + 20);
    loop {
        let states = store.orders(sale_id, sale.generation as i64).await.unwrap();
        let pending = states
            .iter()
            .filter(|o| o.state == seckill_engine::OrderState::PendingPayment)
            .count();
        if pending == 0 {
            let paid = states
                .iter()
                .filter(|o| o.state == seckill_engine::OrderState::Paid)
                .count();
            assert_eq!(paid, 1, "the paid order");
            break;
        }
        assert!(Instant::now() < deadline, "{pending} orders never expired");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    (acknowledged_lost, rows.len())
}

/// Prints a drill's `drill-figures` line (scripts/drills.sh reads it):
/// what buyers were told, what SQL kept, when the sale answered as lost
/// and when it was back, and the drill's `more`.
fn print_figures(
    drill: &str,
    seen: &common::Bought,
    (acknowledged_lost, in_sql): (usize, usize),
    (first_lost, restored_after): (Option<Duration>, Duration),
    more: Value,
) {
    let mut figures = json!({
        "acknowledged": seen.acknowledged.len(),
        "acknowledged_lost_with_redis": acknowledged_lost,
        "orders_in_sql": in_sql,
        "first_sale_lost_answer_ms": first_lost.map(|d| d.as_millis() as u64),
        "restored_after_ms": restored_after.as_millis() as u64,
    });
    if let (Some(all), Value::Object(more)) = (figures.as_object_mut(), more) {
        all.extend(more);
    }
    println!(
        "drill-figures {}",
        json!({ "drill": drill, "figures": figures })
    );
}

/// How long a drill's buyer has to pay. [`honoured`] pays an order bought
/// before the loss once the sale is restored and the persister drained, and
/// then waits for every other order to expire: long enough for a slow CI
/// machine (with 10 s, CI's drill 19 once reached the payment after that
/// order had expired), short enough to wait for the expiries.
const DRILL_PAYMENT_TIMEOUT_SECS: u64 = 30;

fn drill_sale(id: &str) -> Value {
    json!({ "id": id, "name": "x", "stock": 1_000_000, "per_user_limit": 1, "payment_timeout_secs": DRILL_PAYMENT_TIMEOUT_SECS })
}

/// Drill 19: redis-server restarted empty (no AOF, no snapshot) mid-sale
/// under HTTP load, `--restore-lost-sales` on. While lost the sale answers
/// 503, never 404; restored from SQL within seconds, it sells on (see
/// [`honoured`]). The acknowledged orders that were not yet in SQL are
/// lost with Redis: counted here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drill_19_redis_restarted_empty_mid_sale() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut rig = rig(true).await;
    let created = rig.admin.post("/v1/sales", &drill_sale("e")).await.unwrap();
    assert_eq!(created.0, StatusCode::CREATED, "{}", created.1);
    let buyers = Buyers::start(&rig.http, "e");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    rig.redis.kill();
    let (lost_at, lost_ms) = (Instant::now(), now_ms());
    rig.redis.restart().unwrap();
    let (first_lost, restored_after) = until_restored(&rig.admin, "e", lost_at).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let seen = buyers.finish().await;
    let engine = Engine::connect(&rig.redis.url()).await.unwrap();
    let store = Store::open(&rig.db).await.unwrap();
    let (acknowledged_lost, in_sql) =
        honoured(&rig.admin, &engine, &store, "e", &seen, lost_ms).await;
    print_figures(
        "19",
        &seen,
        (acknowledged_lost, in_sql),
        (first_lost, restored_after),
        json!({}),
    );
    rig.running.stop().await;
}

/// Drill 20: on a cluster of 3 masters with a replica each, the master of
/// one sale SIGKILLed mid-sale and restarted at once with nothing on disk:
/// back within the node timeout (2 s), it keeps its slots, empty, and its
/// replica syncs the emptiness from it. That sale is restored as in drill
/// 19; a sale on another master sells on, never answered `sale_lost`; a
/// sharded sale (a shard on every master) is rebuilt with its books
/// balanced and sells exactly its stock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drill_20_a_cluster_master_restarted_empty() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut cluster = seckill_testkit::RedisCluster::start(3, 1).unwrap();
    let target = seckill_redis::Target::cluster(&cluster.addresses().join(",")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db").to_string_lossy().into_owned();
    let running = seckill_service::start(seckill_service::Config {
        restore_lost_sales: true,
        ..common::config(target.clone(), &db, TOKEN)
    })
    .await
    .unwrap();
    let base = format!("http://{}", running.addr);
    let (http, admin) = (Http::new(&base, None), Http::new(&base, Some(TOKEN.into())));
    let ids = cluster
        .one_id_per_master((0..1000).map(|i| format!("c{i}")), |id| {
            format!("{{sale:{id}}}")
        })
        .unwrap();
    let (lost_sale, other_sale) = (ids[0].clone(), ids[1].clone());
    for id in [&lost_sale, &other_sale] {
        let created = admin.post("/v1/sales", &drill_sale(id)).await.unwrap();
        assert_eq!(created.0, StatusCode::CREATED, "{}", created.1);
    }
    let master = cluster
        .master_of(cluster.slot_of(&format!("{{sale:{lost_sale}}}")).unwrap())
        .unwrap();
    let engine = Engine::connect_target(&target).await.unwrap();
    let store = Store::open(&db).await.unwrap();
    // A shard on every master: the one restarted empty holds one.
    let first = sharded((&http, &admin), &engine, &store, "cs", 3).await;
    let on_master = engine.parts("cs").await.unwrap().iter().any(|part| {
        let slot = cluster.slot_of(&format!("{{sale:{part}}}")).unwrap();
        cluster.master_of(slot).unwrap() == master
    });
    assert!(
        on_master,
        "no shard of the sharded sale on the master to lose"
    );
    let (buyers, others) = (
        Buyers::start(&http, &lost_sale),
        Buyers::start(&http, &other_sale),
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    cluster.node(master).kill();
    let (lost_at, lost_ms) = (Instant::now(), now_ms());
    cluster.node(master).restart().unwrap();
    let (first_lost, restored_after) = until_restored(&admin, &lost_sale, lost_at).await;
    assert_eq!(
        cluster
            .master_of(cluster.slot_of(&format!("{{sale:{lost_sale}}}")).unwrap())
            .unwrap(),
        master,
        "the replica took over: nothing was lost, the drill did not happen"
    );
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let (seen, other) = (buyers.finish().await, others.finish().await);
    let (acknowledged_lost, in_sql) =
        honoured(&admin, &engine, &store, &lost_sale, &seen, lost_ms).await;
    seckill_orders::wait_drained(
        &mut engine.connection(),
        &other_sale,
        Duration::from_secs(20),
    )
    .await
    .unwrap();
    let generation = engine.sale(&other_sale).await.unwrap().generation as i64;
    let other_in_sql: std::collections::HashSet<String> = store
        .orders(&other_sale, generation)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.order_id)
        .collect();
    let other_missing = other
        .acknowledged
        .iter()
        .filter(|(o, _)| !other_in_sql.contains(o))
        .count();
    assert_eq!(other_missing, 0, "the other master's sale lost orders");
    rebuilt_sells_its_stock(&http, &engine, &store, "cs", &first).await;
    print_figures(
        "20",
        &seen,
        (acknowledged_lost, in_sql),
        (first_lost, restored_after),
        json!({ "other_sale_acknowledged": other.acknowledged.len() }),
    );
    running.stop().await;
}
