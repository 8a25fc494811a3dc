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
