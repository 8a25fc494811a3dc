//! The HTTP API end to end over real HTTP: every route and every error code,
//! against a private redis-server and a SQLite file.

use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::{Method, StatusCode};
use seckill_service::client::Http;
use seckill_testkit::RedisServer;
use serde_json::{Value, json};

mod common;

const TOKEN: &str = "test-admin-token";

struct Rig {
    server: RedisServer,
    running: seckill_service::Running,
    http: Http,
    admin: Http,
    _dir: tempfile::TempDir,
}

async fn rig(rate: f64, burst: f64) -> Rig {
    rig_with(|c| {
        c.rate_per_user = rate;
        c.burst_per_user = burst;
    })
    .await
}

/// A service on a private redis-server and SQLite file, its configuration
/// changed by `edit`.
async fn rig_with(edit: impl FnOnce(&mut seckill_service::Config)) -> Rig {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::config(
        seckill_redis::Target::server(&server.url()),
        &dir.path().join("o.db").to_string_lossy(),
        TOKEN,
    );
    edit(&mut config);
    let running = seckill_service::start(config).await.unwrap();
    let base = format!("http://{}", running.addr);
    Rig {
        server,
        http: Http::new(&base, None),
        admin: Http::new(&base, Some(TOKEN.to_owned())),
        running,
        _dir: dir,
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Asserts an error answer: status and stable code.
fn expect(answer: (StatusCode, Value), status: u16, code: &str) {
    assert_eq!(answer.0.as_u16(), status, "{}", answer.1);
    assert_eq!(answer.1["code"], code, "{}", answer.1);
    let message = answer.1["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "{}", answer.1);
    // Plain words: nothing of the frameworks inside shows through.
    assert_eq!(common::internal_word(message), None, "{message}");
}

async fn create(rig: &Rig, body: Value) -> (StatusCode, Value) {
    rig.admin.post("/v1/sales", &body).await.unwrap()
}

async fn buy(rig: &Rig, sale: &str, body: Value) -> (StatusCode, Value) {
    rig.http
        .post(&format!("/v1/sales/{sale}/purchase"), &body)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sales_purchases_and_orders_answer_as_documented() {
    let rig = rig(0.0, 1.0).await;
    // Health, readiness, documentation, metrics.
    assert_eq!(rig.http.get("/healthz").await.unwrap().0, StatusCode::OK);
    assert_eq!(rig.http.get("/readyz").await.unwrap().1["status"], "ready");
    let (status, doc) = rig.http.get("/openapi.json").await.unwrap();
    assert_eq!(status, StatusCode::OK);
    for (method, path) in [
        ("post", "/v1/sales"),
        ("get", "/v1/sales"),
        ("get", "/v1/sales/{id}"),
        ("post", "/v1/sales/{id}/end"),
        ("post", "/v1/sales/{id}/stock"),
        ("post", "/v1/sales/{id}/purchase"),
        ("get", "/v1/sales/{id}/orders"),
        ("get", "/v1/orders"),
        ("get", "/v1/orders/{order_id}"),
        ("post", "/v1/orders/{order_id}/pay"),
        ("post", "/v1/orders/{order_id}/cancel"),
        ("get", "/healthz"),
        ("get", "/readyz"),
        ("get", "/metrics"),
        ("get", "/dashboard"),
        ("get", "/v1/dashboard/stream"),
    ] {
        assert!(
            doc["paths"][path][method].is_object(),
            "{method} {path} undocumented"
        );
    }
    // One place for a purchase's request id: the body.
    let purchase = doc["paths"]["/v1/sales/{id}/purchase"]["post"].to_string();
    assert!(!purchase.contains("Idempotency-Key"), "{purchase}");

    // Creating sales: admin only.
    let spec = json!({ "id": "s1", "name": "Drop", "stock": 3, "per_user_limit": 2 });
    expect(
        rig.http.post("/v1/sales", &spec).await.unwrap(),
        401,
        "unauthorized",
    );
    for malformed in [
        "Basic dGVzdA==",
        "bearer test-admin-token",
        "Bearer",
        "test-admin-token",
    ] {
        let body = spec.to_string();
        let head = raw_text(
            &rig,
            "POST",
            "/v1/sales",
            &[("authorization", malformed)],
            &body,
        )
        .await;
        assert!(head.starts_with("HTTP/1.1 401"), "{malformed}: {head}");
        assert!(head.contains("\"code\":\"unauthorized\""), "{head}");
    }
    let wrong = Http::new(&format!("http://{}", rig.running.addr), Some("nope".into()));
    expect(
        wrong.post("/v1/sales", &spec).await.unwrap(),
        401,
        "unauthorized",
    );
    let (status, sale) = create(&rig, spec.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    assert_eq!(
        (sale["stock"].as_u64(), sale["remaining"].as_u64()),
        (Some(3), Some(3))
    );
    expect(create(&rig, spec).await, 409, "sale_exists");
    for bad in [
        json!({ "id": "bad id", "name": "x", "stock": 1, "per_user_limit": 1 }),
        json!({ "id": "x", "name": "x", "stock": 1, "per_user_limit": 0 }),
        json!({ "id": "x", "name": "x", "stock": -1, "per_user_limit": 1 }),
        json!({ "id": "x", "name": "x", "stock": "many", "per_user_limit": 1 }),
        json!({ "id": "x", "name": "x", "stock": 1 }),
        json!({ "id": "x", "name": "x", "stock": 1, "per_user_limit": 1, "color": "red" }),
        json!({ "id": "x", "name": "x", "stock": 1, "per_user_limit": 1, "payment_timeout_secs": 0 }),
        // A sale of nothing; null where a field, when sent, holds a value.
        json!({ "id": "x", "name": "x", "stock": 0, "per_user_limit": 1 }),
        json!({ "id": "x", "name": "x", "stock": 1, "per_user_limit": 1, "ends_at": null }),
        json!({ "id": "x", "name": "x", "stock": 1.5, "per_user_limit": 1 }),
        json!({ "id": "x", "name": "x", "stock": 1, "per_user_limit": 1, "starts_at": "2026-11-23t10:00:00z" }),
    ] {
        expect(create(&rig, bad).await, 400, "invalid_request");
    }
    // Each field valid, together not: 422, as the document says.
    let backwards = json!({ "id": "x", "name": "x", "stock": 1, "per_user_limit": 1, "starts_at": 10, "ends_at": 5 });
    expect(create(&rig, backwards).await, 422, "fields_disagree");
    // JSON Schema's integers include 2.0; so do the service's.
    let whole =
        json!({ "id": "w", "name": "x", "stock": 2.0, "per_user_limit": 1.0, "ends_at": 4.0e12 });
    let (status, made) = create(&rig, whole).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(made["stock"], 2);

    // Reading a sale.
    let (status, sale) = rig.http.get("/v1/sales/s1").await.unwrap();
    assert_eq!(status, StatusCode::OK);
    for field in [
        "id",
        "name",
        "stock",
        "remaining",
        "sold",
        "per_user_limit",
        "status",
        "starts_at",
        "ends_at",
    ] {
        assert!(sale.get(field).is_some(), "missing {field}: {sale}");
    }
    assert_eq!(sale["status"], "active");
    expect(
        rig.http.get("/v1/sales/nope").await.unwrap(),
        404,
        "sale_not_found",
    );
    expect(
        rig.http.get("/v1/sales/bad%7Bid%7D").await.unwrap(),
        400,
        "invalid_request",
    );

    // Purchases, idempotent retries, limits, sold out.
    let first = buy(&rig, "s1", json!({ "user_id": "ann", "request_id": "q1" })).await;
    assert_eq!(first.0, StatusCode::OK, "{}", first.1);
    assert_eq!(first.1["status"], "pending_payment");
    assert_eq!(first.1["quantity"], 1);
    let again = buy(&rig, "s1", json!({ "user_id": "ann", "request_id": "q1" })).await;
    assert_eq!(again, first, "a retry gets the first answer");
    assert_eq!(
        buy(&rig, "s1", json!({ "user_id": "ann" })).await.0,
        StatusCode::OK
    );
    expect(
        buy(&rig, "s1", json!({ "user_id": "ann" })).await,
        409,
        "limit_exceeded",
    );
    let order = first.1["order_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no order_id in {}", first.1))
        .to_owned();
    let bob = buy(&rig, "s1", json!({ "user_id": "bob" })).await;
    assert_eq!(bob.0, StatusCode::OK);
    expect(
        buy(&rig, "s1", json!({ "user_id": "cy" })).await,
        409,
        "sold_out",
    );
    expect(
        buy(&rig, "s1", json!({ "user_id": "cy" })).await,
        409,
        "sold_out",
    );
    expect(
        buy(&rig, "nope", json!({ "user_id": "cy" })).await,
        404,
        "sale_not_found",
    );
    for bad in [
        json!({}),
        json!({ "user_id": "" }),
        json!({ "user_id": "a b" }),
        json!({ "user_id": "x".repeat(65) }),
        json!({ "user_id": 7 }),
        json!({ "user_id": "d", "quantity": 0 }),
        json!({ "user_id": "d", "quantity": -1 }),
        json!({ "user_id": "d", "quantity": 1e20 }),
        json!({ "user_id": "d", "quantity": 1.5 }),
        json!({ "user_id": "d", "request_id": null }),
        json!({ "user_id": "d", "quantity": "2" }),
        json!({ "user_id": "d", "request_id": "no/slash" }),
        json!({ "user_id": "d", "extra": true }),
    ] {
        expect(buy(&rig, "s1", bad).await, 400, "invalid_request");
    }
    // Above the sale's own limit: the sale refuses it, not the document.
    expect(
        buy(&rig, "s1", json!({ "user_id": "d", "quantity": 3 })).await,
        409,
        "limit_exceeded",
    );

    // Orders: read, pay, pay again, cancel refusals.
    let (status, info) = rig.http.get(&format!("/v1/orders/{order}")).await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (info["state"].as_str(), info["user_id"].as_str()),
        (Some("pending_payment"), Some("ann"))
    );
    let pay = format!("/v1/orders/{order}/pay");
    assert_eq!(
        rig.admin.post(&pay, &json!({})).await.unwrap().1["state"],
        "paid"
    );
    assert_eq!(
        rig.admin.post(&pay, &json!({})).await.unwrap().1["state"],
        "paid"
    );
    expect(
        rig.http
            .post(&format!("/v1/orders/{order}/cancel"), &json!({}))
            .await
            .unwrap(),
        409,
        "order_paid",
    );
    let bob_order = bob.1["order_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no order_id in {}", bob.1))
        .to_owned();
    let cancel = format!("/v1/orders/{bob_order}/cancel");
    assert_eq!(
        rig.http.post(&cancel, &json!({})).await.unwrap().1["state"],
        "cancelled"
    );
    expect(
        rig.admin
            .post(&format!("/v1/orders/{bob_order}/pay"), &json!({}))
            .await
            .unwrap(),
        409,
        "order_cancelled",
    );
    // The cancelled unit is back, and this instance learns it (restock).
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let (status, _) = buy(&rig, "s1", json!({ "user_id": "cy" })).await;
        if status == StatusCode::OK {
            break;
        }
        assert!(Instant::now() < deadline, "restocked unit never sold");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    expect(
        rig.http.get("/v1/orders/s1-1-999-0-0").await.unwrap(),
        404,
        "order_not_found",
    );
    expect(
        rig.http.get("/v1/orders/not-an-order").await.unwrap(),
        404,
        "order_not_found",
    );

    // Windows and expiry.
    let later = json!({ "id": "later", "name": "x", "stock": 1, "per_user_limit": 1, "starts_at": now_ms() + 60_000 });
    assert_eq!(create(&rig, later).await.0, StatusCode::CREATED);
    expect(
        buy(&rig, "later", json!({ "user_id": "d" })).await,
        409,
        "not_started",
    );
    let over = json!({ "id": "over", "name": "x", "stock": 1, "per_user_limit": 1,
                       "starts_at": now_ms() - 60_000, "ends_at": now_ms() - 1_000 });
    assert_eq!(create(&rig, over).await.0, StatusCode::CREATED);
    expect(
        buy(&rig, "over", json!({ "user_id": "d" })).await,
        409,
        "ended",
    );
    let quick = json!({ "id": "quick", "name": "x", "stock": 1, "per_user_limit": 1, "payment_timeout_secs": 1 });
    assert_eq!(create(&rig, quick).await.0, StatusCode::CREATED);
    let (_, slow) = buy(&rig, "quick", json!({ "user_id": "slow" })).await;
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let late_pay = format!(
        "/v1/orders/{}/pay",
        slow["order_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no order_id in {}", slow))
    );
    expect(
        rig.admin.post(&late_pay, &json!({})).await.unwrap(),
        409,
        "order_expired",
    );

    // Admin listing from SQL, paginated.
    let list = "/v1/sales/s1/orders";
    expect(rig.http.get(list).await.unwrap(), 401, "unauthorized");
    let deadline = Instant::now() + Duration::from_secs(10);
    let all = loop {
        let (status, page) = rig.admin.get(&format!("{list}?limit=100")).await.unwrap();
        assert_eq!(status, StatusCode::OK, "{page}");
        if page["orders"]
            .as_array()
            .unwrap_or_else(|| panic!("no orders in {}", page))
            .len()
            == 4
        {
            break page;
        }
        assert!(
            Instant::now() < deadline,
            "orders never reached SQL: {page}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(all["next_after"].is_null());
    let (_, first_page) = rig.admin.get(&format!("{list}?limit=3")).await.unwrap();
    let after = first_page["next_after"]
        .as_str()
        .unwrap_or_else(|| panic!("no next_after in {}", first_page))
        .to_owned();
    let (_, rest) = rig
        .admin
        .get(&format!("{list}?limit=3&after={after}"))
        .await
        .unwrap();
    assert_eq!(
        first_page["orders"]
            .as_array()
            .unwrap_or_else(|| panic!("no orders in {}", first_page))
            .len()
            + rest["orders"]
                .as_array()
                .unwrap_or_else(|| panic!("no orders in {}", rest))
                .len(),
        4
    );
    let (_, anns) = rig.admin.get(&format!("{list}?user_id=ann")).await.unwrap();
    assert_eq!(
        anns["orders"]
            .as_array()
            .unwrap_or_else(|| panic!("no orders in {}", anns))
            .len(),
        2
    );
    expect(
        rig.admin.get(&format!("{list}?limit=0")).await.unwrap(),
        400,
        "invalid_request",
    );
    expect(
        rig.admin.get(&format!("{list}?limit=abc")).await.unwrap(),
        400,
        "invalid_request",
    );
    expect(
        rig.admin.get(&format!("{list}?sort=asc")).await.unwrap(),
        400,
        "invalid_request",
    );
    expect(
        rig.admin.get("/v1/sales/nope/orders").await.unwrap(),
        404,
        "sale_not_found",
    );

    // Unknown routes and methods.
    expect(
        rig.http.get("/v2/everything").await.unwrap(),
        404,
        "not_found",
    );
    expect(
        rig.http.get("/v1/sales/s1/purchase").await.unwrap(),
        405,
        "method_not_allowed",
    );
    expect(
        rig.http
            .raw(Method::DELETE, "/v1/sales/s1", None, Bytes::new())
            .await
            .unwrap(),
        405,
        "method_not_allowed",
    );

    // Bodies that are not JSON, or too big.
    let path = "/v1/sales/s1/purchase";
    for (content_type, body) in [
        (
            Some("application/json"),
            Bytes::from_static(b"{\"user_id\": "),
        ),
        (Some("application/json"), Bytes::from_static(b"[1, 2, 3]")),
        (
            Some("text/plain"),
            Bytes::from_static(b"{\"user_id\": \"a\"}"),
        ),
        (None, Bytes::from_static(b"{\"user_id\": \"a\"}")),
        (
            Some("application/json"),
            Bytes::from(vec![0xff, 0xfe, 0x00]),
        ),
    ] {
        expect(
            rig.http
                .raw(Method::POST, path, content_type, body)
                .await
                .unwrap(),
            400,
            "invalid_request",
        );
    }
    let huge = format!("{{\"user_id\": \"{}\"}}", "a".repeat(20 * 1024));
    expect(
        rig.http
            .raw(
                Method::POST,
                path,
                Some("application/json"),
                Bytes::from(huge),
            )
            .await
            .unwrap(),
        413,
        "payload_too_large",
    );

    // Metrics count routes, codes and purchase outcomes.
    let metrics = raw_text(&rig, "GET", "/metrics", &[], "").await;
    for needle in [
        "seckill_http_requests_total",
        "route=\"/v1/sales/{id}/purchase\"",
        "seckill_purchase_outcomes_total",
        "seckill_http_request_duration_seconds",
        "seckill_stream_backlog",
    ] {
        assert!(metrics.contains(needle), "metrics lack {needle}");
    }
    rig.running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_unknown_orders_and_idempotency_keys_answer_as_operators_expect() {
    let rig = rig(0.0, 1.0).await;
    // Times in as RFC 3339 (any offset) or ms; out as RFC 3339.
    let (status, sale) = create(
        &rig,
        json!({ "id": "t1", "name": "t", "stock": 5, "per_user_limit": 5,
                "starts_at": "2020-01-01T08:00:00+08:00", "ends_at": 4_102_444_800_000u64 }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    assert_eq!(sale["starts_at"], "2020-01-01T00:00:00Z");
    assert_eq!(sale["ends_at"], "2100-01-01T00:00:00Z");
    let (_, read) = rig.http.get("/v1/sales/t1").await.unwrap();
    assert_eq!(read["starts_at"], sale["starts_at"]);
    for (bad, field, expected) in [
        (json!({ "starts_at": "tomorrow" }), "starts_at", "RFC 3339"),
        (json!({ "ends_at": -5 }), "ends_at", "RFC 3339"),
        (json!({ "ends_at": true }), "ends_at", "RFC 3339"),
        (json!({ "stock": "many" }), "stock", "whole number"),
        (json!({ "stock": null }), "stock", "whole number"),
        (json!({ "color": "red" }), "color", "not a field"),
    ] {
        let mut body = json!({ "id": "t2", "name": "t", "stock": 1, "per_user_limit": 1 });
        for (k, v) in bad.as_object().unwrap() {
            body[k] = v.clone();
        }
        let answer = create(&rig, body).await;
        let message = answer.1["message"].as_str().unwrap_or_default().to_owned();
        expect(answer, 400, "invalid_request");
        assert!(message.starts_with(&format!("{field}: ")), "{message}");
        assert!(message.contains(expected), "{message}");
    }
    let answer = create(
        &rig,
        json!({ "id": "t2", "name": "t", "per_user_limit": 1 }),
    )
    .await;
    assert_eq!(answer.1["message"], "stock: required");

    // An id of the right characters that names no order is not found.
    for path in ["/v1/orders/nosuch-abc", "/v1/orders/t1-1-2-3-4"] {
        expect(rig.http.get(path).await.unwrap(), 404, "order_not_found");
        let pay = rig
            .admin
            .post(&format!("{path}/pay"), &json!({}))
            .await
            .unwrap();
        expect(pay, 404, "order_not_found");
    }
    expect(
        rig.http.get("/v1/orders/no%20such").await.unwrap(),
        400,
        "invalid_request",
    );

    // The request id is the body's; a purchase refuses the header it once
    // also took, as a client relying on it would buy twice.
    let path = "/v1/sales/t1/purchase";
    let first = buy(&rig, "t1", json!({ "user_id": "ann", "request_id": "k-1" })).await;
    assert_eq!(first.0, StatusCode::OK, "{}", first.1);
    let again = buy(&rig, "t1", json!({ "user_id": "ann", "request_id": "k-1" })).await;
    assert_eq!(again, first);
    let keyed = rig
        .http
        .post_idempotent(path, &json!({ "user_id": "ann" }), "k-1")
        .await
        .unwrap();
    expect(keyed, 400, "invalid_request");
    let (_, sale) = rig.http.get("/v1/sales/t1").await.unwrap();
    assert_eq!(sale["sold"], 1, "one purchase however often repeated");
    let order = first.1["order_id"].as_str().unwrap();
    let pay = format!("/v1/orders/{order}/pay");
    let paid = rig
        .admin
        .post_idempotent(&pay, &json!({}), "p-1")
        .await
        .unwrap();
    assert_eq!(paid.1["state"], "paid", "{}", paid.1);
    let repeat = rig
        .admin
        .post_idempotent(&pay, &json!({}), "p-1")
        .await
        .unwrap();
    assert_eq!(repeat, paid);
    let (_, info) = rig.http.get(&format!("/v1/orders/{order}")).await.unwrap();
    assert!(
        info["pay_by"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{info}"
    );
    rig.running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_lists_ends_and_restocks_sales_over_http() {
    let rig = rig(0.0, 1.0).await;
    for (id, stock) in [("a1", 1), ("a2", 5), ("a3", 5), ("a4", 5)] {
        let body = json!({ "id": id, "name": id, "stock": stock, "per_user_limit": 5 });
        assert_eq!(create(&rig, body).await.0, StatusCode::CREATED);
    }
    let later = json!({ "id": "a5", "name": "x", "stock": 1, "per_user_limit": 1,
                        "starts_at": now_ms() + 3_600_000 });
    assert_eq!(create(&rig, later).await.0, StatusCode::CREATED);
    assert_eq!(
        buy(&rig, "a1", json!({ "user_id": "u" })).await.0,
        StatusCode::OK
    );

    // Listing: by id, in pages, by status; admin only.
    expect(
        rig.http.get("/v1/sales").await.unwrap(),
        401,
        "unauthorized",
    );
    let (_, page) = rig.admin.get("/v1/sales?limit=2").await.unwrap();
    let ids = |page: &Value| -> Vec<String> {
        page["sales"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&page), ["a1", "a2"]);
    assert_eq!(page["next_after"], "a2");
    let (_, rest) = rig.admin.get("/v1/sales?limit=10&after=a2").await.unwrap();
    assert_eq!(ids(&rest), ["a3", "a4", "a5"]);
    assert!(rest["next_after"].is_null());
    let (_, sold_out) = rig.admin.get("/v1/sales?status=sold_out").await.unwrap();
    assert_eq!(ids(&sold_out), ["a1"]);
    let (_, upcoming) = rig.admin.get("/v1/sales?status=upcoming").await.unwrap();
    assert_eq!(ids(&upcoming), ["a5"]);
    for bad in [
        "/v1/sales?status=gone",
        "/v1/sales?limit=0",
        "/v1/sales?limit=x",
        "/v1/sales?after=a%20b",
    ] {
        expect(rig.admin.get(bad).await.unwrap(), 400, "invalid_request");
    }

    // Ending: purchases refused as ended; a pending order stays payable.
    let (_, order) = buy(&rig, "a2", json!({ "user_id": "u" })).await;
    let order = order["order_id"].as_str().unwrap().to_owned();
    expect(
        rig.http.post("/v1/sales/a2/end", &json!({})).await.unwrap(),
        401,
        "unauthorized",
    );
    let (status, ended) = rig
        .admin
        .post("/v1/sales/a2/end", &json!({}))
        .await
        .unwrap();
    assert_eq!(status, StatusCode::OK, "{ended}");
    assert_eq!(ended["status"], "ended");
    assert!(ended["ends_at"].is_string(), "{ended}");
    expect(
        buy(&rig, "a2", json!({ "user_id": "v" })).await,
        409,
        "ended",
    );
    let (_, paid) = rig
        .admin
        .post(&format!("/v1/orders/{order}/pay"), &json!({}))
        .await
        .unwrap();
    assert_eq!(paid["state"], "paid");
    let (_, upcoming_ended) = rig
        .admin
        .post("/v1/sales/a5/end", &json!({}))
        .await
        .unwrap();
    assert_eq!(upcoming_ended["status"], "ended");
    expect(
        rig.admin
            .post("/v1/sales/nope/end", &json!({}))
            .await
            .unwrap(),
        404,
        "sale_not_found",
    );

    // Stock: add or set, never below what is sold.
    let (_, added) = rig
        .admin
        .post("/v1/sales/a1/stock", &json!({ "add": 4 }))
        .await
        .unwrap();
    assert_eq!(
        (added["stock"].as_u64(), added["remaining"].as_u64()),
        (Some(5), Some(4))
    );
    assert_eq!(
        buy(&rig, "a1", json!({ "user_id": "w" })).await.0,
        StatusCode::OK
    );
    let (_, set) = rig
        .admin
        .post("/v1/sales/a1/stock", &json!({ "set": 2 }))
        .await
        .unwrap();
    assert_eq!(
        (
            set["stock"].as_u64(),
            set["remaining"].as_u64(),
            set["sold"].as_u64()
        ),
        (Some(2), Some(0), Some(2))
    );
    expect(
        rig.admin
            .post("/v1/sales/a1/stock", &json!({ "set": 1 }))
            .await
            .unwrap(),
        409,
        "sale_conflict",
    );
    for bad in [
        json!({ "add": 1, "set": null }),
        json!({ "add": 0 }),
        json!({ "add": 1, "set": 3 }),
        json!({}),
        json!({ "add": -1 }),
        json!({ "add": 1, "more": 1 }),
    ] {
        expect(
            rig.admin.post("/v1/sales/a1/stock", &bad).await.unwrap(),
            400,
            "invalid_request",
        );
    }
    expect(
        rig.http
            .post("/v1/sales/a1/stock", &json!({ "add": 1 }))
            .await
            .unwrap(),
        401,
        "unauthorized",
    );
    let (_, a1) = rig.http.get("/v1/sales/a1").await.unwrap();
    assert_eq!(
        (a1["stock"].as_u64(), a1["sold"].as_u64()),
        (Some(2), Some(2))
    );
    rig.running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archived_sale_answers_from_sql_with_the_same_bodies() {
    let rig = rig_with(|c| c.archive_after = Duration::from_millis(1_500)).await;
    let engine = seckill_engine::Engine::connect(&rig.server.url())
        .await
        .unwrap();
    let body = json!({ "id": "old", "name": "old", "stock": 10, "per_user_limit": 2,
                       "payment_timeout_secs": 1 });
    assert_eq!(create(&rig, body).await.0, StatusCode::CREATED);
    let mut orders = Vec::new();
    for u in 0..3 {
        let (_, order) = buy(&rig, "old", json!({ "user_id": format!("u{u}") })).await;
        orders.push(order["order_id"].as_str().unwrap().to_owned());
    }
    let keyed = json!({ "user_id": "k", "request_id": "key-1" });
    let first = buy(&rig, "old", keyed.clone()).await;
    assert_eq!(first.0, StatusCode::OK, "{}", first.1);
    let keyed_order = first.1["order_id"].as_str().unwrap().to_owned();
    let paid = rig
        .admin
        .post(&format!("/v1/orders/{keyed_order}/pay"), &json!({}))
        .await;
    assert_eq!(paid.unwrap().0, StatusCode::OK);
    let pay = |o: &str| format!("/v1/orders/{o}/pay");
    let cancel = |o: &str| format!("/v1/orders/{o}/cancel");
    assert_eq!(
        rig.admin
            .post(&pay(&orders[0]), &json!({}))
            .await
            .unwrap()
            .0,
        200
    );
    assert_eq!(
        rig.http
            .post(&cancel(&orders[1]), &json!({}))
            .await
            .unwrap()
            .0,
        200
    );
    assert_eq!(
        rig.admin
            .post("/v1/sales/old/end", &json!({}))
            .await
            .unwrap()
            .0,
        200
    );
    // The third expires; once persisted, every answer is taken from Redis…
    let settled = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, third) = rig
            .http
            .get(&format!("/v1/orders/{}", orders[2]))
            .await
            .unwrap();
        if third["state"] == "expired" {
            break;
        }
        assert!(Instant::now() < settled, "{third}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    seckill_orders::wait_drained(&mut engine.connection(), "old", Duration::from_secs(10))
        .await
        .unwrap();
    let paths: Vec<String> = [
        "/v1/sales/old".to_owned(),
        "/v1/sales/old/orders".to_owned(),
    ]
    .into_iter()
    .chain(orders.iter().map(|o| format!("/v1/orders/{o}")))
    .collect();
    let mut before = Vec::new();
    for path in &paths {
        before.push(rig.admin.get(path).await.unwrap());
    }
    assert!(
        engine.sale("old").await.is_ok(),
        "archived too early to compare"
    );
    // …then the sale leaves Redis at its time, and SQL answers the same.
    let archived = Instant::now() + Duration::from_secs(15);
    while engine.sale("old").await.is_ok() {
        assert!(Instant::now() < archived, "never archived");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (path, was) in paths.iter().zip(&before) {
        assert_eq!(&rig.admin.get(path).await.unwrap(), was, "{path}");
    }
    let (_, listed) = rig.admin.get("/v1/sales?status=ended").await.unwrap();
    assert_eq!(listed["sales"][0], before[0].1, "{listed}");
    // Settled for good: a repeat answers as before, anything else conflicts.
    let (status, paid) = rig.admin.post(&pay(&orders[0]), &json!({})).await.unwrap();
    assert_eq!(
        (status.as_u16(), paid["state"].as_str()),
        (200, Some("paid"))
    );
    expect(
        rig.http
            .post(&cancel(&orders[0]), &json!({}))
            .await
            .unwrap(),
        409,
        "order_paid",
    );
    expect(
        rig.admin.post(&pay(&orders[2]), &json!({})).await.unwrap(),
        409,
        "order_expired",
    );
    // Purchases answer as the ended sale did: refused as ended, and a retry
    // of a purchase it made gets that order back.
    expect(
        buy(&rig, "old", json!({ "user_id": "late" })).await,
        409,
        "ended",
    );
    let again = buy(&rig, "old", keyed).await;
    assert_eq!(again, first);
    // Another buyer sending that request id is not answered that order.
    expect(
        buy(
            &rig,
            "old",
            json!({ "user_id": "other", "request_id": "key-1" }),
        )
        .await,
        409,
        "ended",
    );
    let (status, ended) = rig
        .admin
        .post("/v1/sales/old/end", &json!({}))
        .await
        .unwrap();
    assert_eq!((status.as_u16(), &ended), (200, &before[0].1));
    let store = seckill_orders::Store::open(&rig._dir.path().join("o.db").to_string_lossy())
        .await
        .unwrap();
    let report = seckill_orders::audit(&engine, &store, "old").await.unwrap();
    assert!(report.clean && report.archived, "{report:#?}");
    rig.running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restocking_while_64_buyers_race_never_oversells_and_audits_clean() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let rig = rig(0.0, 1.0).await;
    let body = json!({ "id": "hot", "name": "hot", "stock": 50, "per_user_limit": 1_000 });
    assert_eq!(create(&rig, body).await.0, StatusCode::CREATED);
    let base = format!("http://{}", rig.running.addr);
    let done = Arc::new(AtomicBool::new(false));
    let acknowledged = Arc::new(AtomicU64::new(0));
    let buyers: Vec<_> = (0..64)
        .map(|b| {
            let (http, done, acknowledged) =
                (Http::new(&base, None), done.clone(), acknowledged.clone());
            tokio::spawn(async move {
                let mut i = 0;
                while !done.load(Ordering::Relaxed) {
                    let body =
                        json!({ "user_id": format!("b{b}"), "request_id": format!("b{b}-{i}") });
                    let (status, answer) =
                        http.post("/v1/sales/hot/purchase", &body).await.unwrap();
                    match status.as_u16() {
                        200 => drop(acknowledged.fetch_add(1, Ordering::Relaxed)),
                        409 => assert_eq!(answer["code"], "sold_out", "{answer}"),
                        other => panic!("{other}: {answer}"),
                    }
                    i += 1;
                }
            })
        })
        .collect();
    // Every look at the sale: sold within stock, units left never negative.
    let watcher = {
        let (http, done) = (Http::new(&base, None), done.clone());
        tokio::spawn(async move {
            let mut looks = 0;
            while !done.load(Ordering::Relaxed) {
                let (_, sale) = http.get("/v1/sales/hot").await.unwrap();
                let (stock, sold, left) = (
                    sale["stock"].as_u64().unwrap(),
                    sale["sold"].as_u64().unwrap(),
                    sale["remaining"].as_u64().unwrap(),
                );
                assert!(sold <= stock && sold + left == stock, "{sale}");
                looks += 1;
            }
            looks
        })
    };
    let mut changes = 0;
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        let change = if changes % 3 == 2 {
            json!({ "set": 1 })
        } else {
            json!({ "add": 40 })
        };
        let (status, answer) = rig
            .admin
            .post("/v1/sales/hot/stock", &change)
            .await
            .unwrap();
        // Setting below what is sold is refused, never applied.
        assert!(
            status == StatusCode::OK || answer["code"] == "sale_conflict",
            "{answer}"
        );
        changes += 1;
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    done.store(true, Ordering::Relaxed);
    for buyer in buyers {
        buyer.await.unwrap();
    }
    assert!(watcher.await.unwrap() > 10);
    let (_, sale) = rig.http.get("/v1/sales/hot").await.unwrap();
    let sold = sale["sold"].as_u64().unwrap();
    assert_eq!(sold, acknowledged.load(Ordering::Relaxed), "{sale}");
    assert!(sold > 50, "restocks sold: {sale}");

    let engine = seckill_engine::Engine::connect(&rig.server.url())
        .await
        .unwrap();
    let store = seckill_orders::Store::open(&rig._dir.path().join("o.db").to_string_lossy())
        .await
        .unwrap();
    seckill_orders::wait_drained(&mut engine.connection(), "hot", Duration::from_secs(20))
        .await
        .unwrap();
    let report = seckill_orders::audit(&engine, &store, "hot").await.unwrap();
    assert!(report.clean, "{report:#?}");
    let generation = engine.sale("hot").await.unwrap().generation as i64;
    assert_eq!(
        store.orders("hot", generation).await.unwrap().len() as u64,
        sold
    );
    rig.running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_user_bursting_is_rate_limited_while_others_are_served() {
    let rig = rig(1.0, 3.0).await;
    let sale = json!({ "id": "r", "name": "x", "stock": 1000, "per_user_limit": 1000 });
    assert_eq!(create(&rig, sale).await.0, StatusCode::CREATED);
    let mut limited = 0;
    for _ in 0..10 {
        let (status, body) = buy(&rig, "r", json!({ "user_id": "flood" })).await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(body["code"], "rate_limited");
            limited += 1;
        }
    }
    assert!(limited >= 6, "{limited} of 10 limited");
    assert_eq!(
        buy(&rig, "r", json!({ "user_id": "calm" })).await.0,
        StatusCode::OK
    );
    rig.running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_the_service_answers_503_fast_and_recovers() {
    let mut rig = rig(0.0, 1.0).await;
    let sale = json!({ "id": "u", "name": "x", "stock": 10, "per_user_limit": 5 });
    assert_eq!(create(&rig, sale).await.0, StatusCode::CREATED);
    rig.server.kill();
    let started = Instant::now();
    expect(
        buy(&rig, "u", json!({ "user_id": "a" })).await,
        503,
        "unavailable",
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    expect(rig.http.get("/readyz").await.unwrap(), 503, "unavailable");
    assert_eq!(rig.http.get("/healthz").await.unwrap().0, StatusCode::OK);
    rig.server.restart().unwrap();
    // A fresh Redis: the sale is gone, but the service answers again, and
    // says the sale SQL holds as live was lost rather than never was.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _) = rig.http.get("/readyz").await.unwrap();
        if status == StatusCode::OK {
            break;
        }
        assert!(Instant::now() < deadline, "never recovered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    expect(
        buy(&rig, "u", json!({ "user_id": "a" })).await,
        503,
        "sale_lost",
    );
    rig.running.stop().await;
}

/// A request written by hand (for headers the JSON client never sends, and
/// for `/metrics`, which is text); answers the whole response as text.
async fn raw_text(
    rig: &Rig,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> String {
    common::raw_text(rig.running.addr, method, path, headers, body)
}

/// The first `frames` frames of `GET /v1/dashboard/stream` with `token`:
/// the status line, then each frame's JSON.
fn dashboard_frames(rig: &Rig, token: &str, frames: usize) -> (String, Vec<Value>) {
    use std::io::{BufRead, BufReader, Write};
    let mut stream = std::net::TcpStream::connect(rig.running.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let request = format!(
        "GET /v1/dashboard/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut lines = BufReader::new(stream).lines().map_while(Result::ok);
    let status = lines.next().unwrap_or_default();
    let mut found = Vec::new();
    if status.contains(" 200 ") {
        for line in lines {
            if let Some(data) = line.strip_prefix("data: ") {
                found.push(serde_json::from_str(data).unwrap());
                if found.len() == frames {
                    break;
                }
            }
        }
    }
    (status, found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_page_is_public_and_its_data_is_for_admins_only() {
    let rig = rig(0.0, 1.0).await;
    let (status, _) = create(
        &rig,
        json!({ "id": "zq-drop-7", "name": "Seen", "stock": 2, "per_user_limit": 1 }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    for user in ["a", "b", "c"] {
        buy(&rig, "zq-drop-7", json!({ "user_id": user })).await;
    }
    // The page and its script: served from the binary, no sale data in them.
    for path in ["/dashboard", "/dashboard/app.js"] {
        let page = raw_text(&rig, "GET", path, &[], "").await;
        assert!(page.starts_with("HTTP/1.1 200"), "{path}: {page}");
        assert!(!page.contains("zq-drop-7"), "{path} holds sale data");
        assert!(
            !page.contains("http://") && !page.contains("https://"),
            "{path} loads from elsewhere"
        );
    }
    // The stream: 401 in plain words without the right token.
    for token in ["", "wrong"] {
        let (status, frames) = dashboard_frames(&rig, token, 1);
        assert!(status.contains(" 401 "), "{status}");
        assert!(frames.is_empty());
    }
    // With it: a frame at once, then one a second, each with the sale.
    let started = Instant::now();
    let (status, frames) = dashboard_frames(&rig, TOKEN, 2);
    assert!(status.contains(" 200 "), "{status}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let frame = &frames[1];
    assert_eq!(
        (frame["redis"].as_bool(), frame["sql"].as_bool()),
        (Some(true), Some(true))
    );
    let sale = &frame["sales"][0];
    assert_eq!(sale["id"], "zq-drop-7", "{frame}");
    assert_eq!(
        (
            sale["stock"].as_u64(),
            sale["sold"].as_u64(),
            sale["remaining"].as_u64()
        ),
        (Some(2), Some(2), Some(0))
    );
    // This second's answers reach the history once it is over.
    let deadline = Instant::now() + Duration::from_secs(3);
    let answered = loop {
        let (_, frames) = dashboard_frames(&rig, TOKEN, 1);
        let seconds = frames[0]["sales"][0]["seconds"].as_array().unwrap().clone();
        let count = |code: &str| {
            seconds
                .iter()
                .map(|s| s["codes"][code].as_u64().unwrap_or(0))
                .sum::<u64>()
        };
        if count("ok") == 2 || Instant::now() > deadline {
            break (count("ok"), count("sold_out"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(answered, (2, 1));
    rig.running.stop().await;
}

/// Every metric that `docs/grafana/seckill.json` queries is one the service
/// exports (after a little traffic: counters appear once touched).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grafana_dashboard_queries_only_metrics_the_service_exports() {
    let rig = rig(0.0, 1.0).await;
    create(
        &rig,
        json!({ "id": "g", "name": "g", "stock": 1, "per_user_limit": 1 }),
    )
    .await;
    buy(&rig, "g", json!({ "user_id": "a" })).await;
    buy(&rig, "g", json!({ "user_id": "b" })).await;
    let metrics = raw_text(&rig, "GET", "/metrics", &[], "").await;
    let exported: std::collections::HashSet<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("seckill_"))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();

    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/grafana/seckill.json"
    );
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    let mut queried = std::collections::BTreeSet::new();
    for panel in panels {
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{panel}");
        for target in targets {
            let expr = target["expr"].as_str().unwrap();
            let names: Vec<&str> = expr
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.starts_with("seckill_"))
                .collect();
            assert!(!names.is_empty(), "{expr} names no seckill metric");
            queried.extend(names);
        }
    }
    for name in &queried {
        assert!(
            exported.contains(name),
            "{name} is queried but not exported:\n{metrics}"
        );
    }
    assert!(queried.len() >= 8, "{queried:?}");
    rig.running.stop().await;
}
