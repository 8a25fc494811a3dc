//! The per-user rate across instances: two `serve` instances on one
//! Redis, one user sending to both. Counted in each instance
//! (`--rate-limit local`) the user gets twice the burst through; counted
//! in Redis (`shared`) the burst holds for both together, and another user
//! is served meanwhile.

use hyper::StatusCode;
use seckill_service::RateScope;
use seckill_service::client::Http;
use seckill_testkit::RedisServer;
use serde_json::json;

mod common;

/// Two instances on `server` with a per-user rate of 0.5/s, burst 4,
/// counted as `scope` says; a sale `r` made on the first.
async fn two_instances(
    server: &RedisServer,
    db: &str,
    scope: RateScope,
) -> Vec<(seckill_service::Running, Http)> {
    let mut instances = Vec::new();
    for _ in 0..2 {
        let mut config = common::config(
            seckill_redis::Target::server(&server.url()),
            db,
            common::TOKEN,
        );
        config.rate_per_user = 0.5;
        config.burst_per_user = 4.0;
        config.rate_limit = scope;
        let running = seckill_service::start(config).await.unwrap();
        let http = Http::new(&format!("http://{}", running.addr), None);
        instances.push((running, http));
    }
    let admin = Http::new(
        &format!("http://{}", instances[0].0.addr),
        Some(common::TOKEN.into()),
    );
    let sale = json!({ "id": "r", "name": "r", "stock": 1000, "per_user_limit": 1000 });
    assert_eq!(
        admin.post("/v1/sales", &sale).await.unwrap().0,
        StatusCode::CREATED
    );
    instances
}

/// Purchases of `user` answered 200, sending `n` to each instance in turn.
async fn admitted(instances: &[(seckill_service::Running, Http)], user: &str, n: usize) -> usize {
    let mut ok = 0;
    for i in 0..n {
        let (_, http) = &instances[i % instances.len()];
        let (status, body) = http
            .post("/v1/sales/r/purchase", &json!({ "user_id": user }))
            .await
            .unwrap();
        match status {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => assert_eq!(body["code"], "rate_limited"),
            other => panic!("{other}: {body}"),
        }
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_rate_holds_across_instances_and_a_local_one_does_not() {
    for (scope, expected) in [(RateScope::Local, 8), (RateScope::Shared, 4)] {
        let server = RedisServer::start().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("o.db").to_string_lossy().into_owned();
        let instances = two_instances(&server, &db, scope).await;
        // 16 purchases within a second: the burst, and no more than one
        // more cell the rate (0.5/s) could add.
        let got = admitted(&instances, "flood", 16).await;
        assert!(
            (expected..=expected + 1).contains(&got),
            "{scope:?}: {got} of 16 admitted"
        );
        assert_eq!(admitted(&instances, "calm", 1).await, 1, "{scope:?}");
        for (running, _) in instances {
            running.stop().await;
        }
    }
}
