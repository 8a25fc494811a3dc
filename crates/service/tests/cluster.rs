//! `serve` on a real local Redis Cluster over real HTTP: purchases until
//! sold out, a restock reaching this instance's sold-out marks, and the
//! orders persisted to SQL.

use std::time::{Duration, Instant};

use seckill_service::client::Http;
use seckill_testkit::RedisCluster;
use serde_json::json;

mod common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_sells_restocks_and_persists_on_a_cluster() {
    let cluster = RedisCluster::start(3, 1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let running = seckill_service::start(common::config(
        seckill_redis::Target::cluster(&cluster.addresses().join(",")).unwrap(),
        &dir.path().join("o.db").to_string_lossy(),
        "tok",
    ))
    .await
    .unwrap();
    let base = format!("http://{}", running.addr);
    let http = Http::new(&base, None);
    let admin = Http::new(&base, Some("tok".to_owned()));

    let (status, sale) = admin
        .post(
            "/v1/sales",
            &json!({"id": "cl", "name": "cl", "stock": 50, "per_user_limit": 1}),
        )
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 201, "{sale}");
    let buy = |i: u32| {
        let http = http.clone();
        async move {
            let body = json!({"user_id": format!("u{i}"), "request_id": format!("r{i}")});
            http.post("/v1/sales/cl/purchase", &body).await.unwrap()
        }
    };
    let mut ok = 0;
    for i in 0..80 {
        let (status, body) = buy(i).await;
        match status.as_u16() {
            200 => ok += 1,
            409 => assert_eq!(body["code"], "sold_out", "{body}"),
            other => panic!("{other}: {body}"),
        }
    }
    assert_eq!(ok, 50);

    // The restock is published on the sale's master; this instance hears it
    // (classic pub/sub reaches every node of a cluster) and sells again.
    let (status, body) = admin
        .post("/v1/sales/cl/stock", &json!({"add": 10}))
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 200, "{body}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut i = 1000;
    let mut more = 0;
    while more < 10 {
        let (status, body) = buy(i).await;
        i += 1;
        match status.as_u16() {
            200 => more += 1,
            409 => {
                assert!(
                    Instant::now() < deadline,
                    "the restock never arrived: {body}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => panic!("{other}: {body}"),
        }
    }
    let (_, body) = buy(i).await;
    assert_eq!(body["code"], "sold_out", "{body}");

    // Every acknowledged order reaches SQL.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, page) = admin.get("/v1/sales/cl/orders?limit=100").await.unwrap();
        assert_eq!(status.as_u16(), 200, "{page}");
        if page["orders"].as_array().map(Vec::len) == Some(60) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "orders never all reached SQL: {page}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_sale_sells_exactly_its_stock_over_http_and_shows_its_shards_to_admins() {
    let cluster = RedisCluster::start(3, 0).unwrap();
    let target = seckill_redis::Target::cluster(&cluster.addresses().join(",")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db").to_string_lossy().into_owned();
    let (running, http, admin) =
        common::serve(target.clone(), &db, seckill_engine::Durability::Primary).await;

    let (status, sale) = admin
        .post(
            "/v1/sales",
            &json!({"id": "hot", "name": "hot", "stock": 300, "per_user_limit": 1, "shards": 3}),
        )
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 201, "{sale}");
    assert_eq!(
        sale["sharding"]["shards"].as_array().map(Vec::len),
        Some(3),
        "{sale}"
    );

    // 480 buyers at once for 300 units, over every shard.
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let http = http.clone();
            tokio::spawn(async move {
                let mut codes = Vec::new();
                for i in 0..60 {
                    let body =
                        json!({"user_id": format!("t{t}u{i}"), "request_id": format!("t{t}r{i}")});
                    let (status, answer) =
                        http.post("/v1/sales/hot/purchase", &body).await.unwrap();
                    codes.push(match status.as_u16() {
                        200 => "ok".to_owned(),
                        _ => answer["code"].as_str().unwrap_or("?").to_owned(),
                    });
                }
                codes
            })
        })
        .collect();
    let mut counts = std::collections::BTreeMap::new();
    for task in tasks {
        for code in task.await.unwrap() {
            *counts.entry(code).or_insert(0) += 1;
        }
    }
    assert_eq!(counts.get("ok"), Some(&300), "{counts:?}");
    assert_eq!(counts.get("sold_out"), Some(&180), "{counts:?}");

    // Admins see the pool and each shard; buyers see the sale alone.
    let (_, seen) = admin.get("/v1/sales/hot").await.unwrap();
    assert_eq!(
        (seen["sold"].as_u64(), seen["remaining"].as_u64()),
        (Some(300), Some(0)),
        "{seen}"
    );
    assert_eq!(seen["sharding"]["drained"], true, "{seen}");
    assert_eq!(seen["sharding"]["pool"], 0, "{seen}");
    let (_, public) = http.get("/v1/sales/hot").await.unwrap();
    assert!(public.get("sharding").is_none(), "{public}");
    assert_eq!(public["status"], "sold_out", "{public}");
    // Listed once, shards not.
    let (_, list) = admin.get("/v1/sales").await.unwrap();
    let ids: Vec<&str> = list["sales"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(ids, ["hot"]);

    // Every order reaches SQL, listed as the sale's; the audit is clean.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, page) = admin.get("/v1/sales/hot/orders?limit=1000").await.unwrap();
        assert_eq!(status.as_u16(), 200, "{page}");
        if page["orders"].as_array().map(Vec::len) == Some(300) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "orders never all reached SQL: {page}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let engine = seckill_engine::Engine::connect_target(&target)
        .await
        .unwrap();
    let store = seckill_orders::Store::open(&db).await.unwrap();
    let report = seckill_orders::audit(&engine, &store, "hot").await.unwrap();
    assert!(report.clean, "{report:?}");
    assert_eq!((report.orders_in_redis, report.orders_in_sql), (300, 300));
    running.stop().await;
}
