//! Hostile input over real HTTP: random bodies, paths, methods and sizes.
//! Every answer is a 2xx or a 4xx with a `code`, never a 5xx; refusals
//! change nothing; no id can reach into a Redis key; admin routes refuse
//! every token but the right one.

use std::sync::OnceLock;

use bytes::Bytes;
use hyper::{Method, StatusCode};
use proptest::prelude::*;
use seckill_service::client::Http;
use seckill_testkit::RedisServer;
use serde_json::{Value, json};

mod common;

struct Rig {
    _redis: RedisServer,
    _dir: tempfile::TempDir,
    runtime: tokio::runtime::Runtime,
    http: Http,
    admin: Http,
}

/// One service for every case (cases run one after another).
fn rig() -> &'static Rig {
    static RIG: OnceLock<Rig> = OnceLock::new();
    RIG.get_or_init(|| {
        let redis = RedisServer::start().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let running = runtime
            .block_on(seckill_service::start(seckill_service::Config {
                background: false,
                ..common::config(
                    seckill_redis::Target::server(&redis.url()),
                    &dir.path().join("o.db").to_string_lossy(),
                    "right-token",
                )
            }))
            .unwrap();
        let base = format!("http://{}", running.addr);
        // The service lives as long as the test process.
        std::mem::forget(running);
        let admin = Http::new(&base, Some("right-token".into()));
        // One sale per test that counts sales: `cargo test` runs the tests
        // of this file at once, and one's purchases must not move the
        // other's count.
        for id in ["h", "raw"] {
            let sale = json!({ "id": id, "name": "x", "stock": 1000000, "per_user_limit": 3 });
            let (status, _) = runtime.block_on(admin.post("/v1/sales", &sale)).unwrap();
            assert_eq!(status, StatusCode::CREATED);
        }
        Rig {
            _redis: redis,
            _dir: dir,
            runtime,
            http: Http::new(&base, None),
            admin,
        }
    })
}

fn sold(rig: &Rig, id: &str) -> u64 {
    let path = format!("/v1/sales/{id}");
    let (status, sale) = rig.runtime.block_on(rig.http.get(&path)).unwrap();
    sale["sold"]
        .as_u64()
        .unwrap_or_else(|| panic!("GET {path} answered {status}: {sale}"))
}

fn check(status: StatusCode, body: &Value) -> Result<(), TestCaseError> {
    prop_assert!(!status.is_server_error(), "{status}: {body}");
    if status.is_client_error() {
        prop_assert!(
            body["code"].as_str().is_some_and(|c| !c.is_empty()),
            "{status}: {body}"
        );
        // In plain words: nothing of the frameworks inside shows through.
        let message = body["message"].as_str().unwrap_or_default();
        prop_assert_eq!(common::internal_word(message), None, "{}: {}", status, body);
    }
    Ok(())
}

/// JSON values of every shape, including huge numbers and odd strings.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        Just(json!(1e300)),
        Just(json!(-0)),
        ".{0,80}".prop_map(Value::String),
        "[A-Za-z0-9_-]{0,70}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("user_id".to_owned()),
                    Just("quantity".to_owned()),
                    Just("request_id".to_owned()),
                    ".{0,12}"
                ],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn any_purchase_body_gets_a_coded_answer_and_refusals_sell_nothing(body in json_value()) {
        let rig = rig();
        let before = sold(rig, "h");
        let (status, answer) = rig.runtime.block_on(rig.http.post("/v1/sales/h/purchase", &body)).unwrap();
        check(status, &answer)?;
        let after = sold(rig, "h");
        if status.is_success() {
            prop_assert!(after > before);
        } else {
            prop_assert_eq!(after, before, "a refusal sold something");
        }
    }

    #[test]
    fn any_bytes_any_content_type_any_size_is_refused_cleanly(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
        content_type in prop_oneof![Just(None), Just(Some("application/json")), Just(Some("text/plain")), Just(Some("application/json; charset=latin1"))],
        pad in prop_oneof![Just(0usize), Just(20_000usize), Just(1 << 20)],
    ) {
        let rig = rig();
        let mut body = bytes;
        body.resize(body.len() + pad, b' ');
        let before = sold(rig, "raw");
        // A fresh connection: the server may close it after refusing a body
        // it would not read to the end.
        let fresh = Http::new(rig.http.base(), None);
        let answer = rig.runtime.block_on(
            fresh.raw(Method::POST, "/v1/sales/raw/purchase", content_type, Bytes::from(body)),
        );
        match answer {
            Ok((status, answer)) => {
                check(status, &answer)?;
                if !status.is_success() {
                    prop_assert_eq!(sold(rig, "raw"), before);
                }
            }
            // Only a body over the limit may see its connection closed
            // while still sending (the 413 went out first).
            Err(e) => {
                prop_assert!(pad > seckill_service::BODY_LIMIT, "{e}");
                prop_assert_eq!(sold(rig, "raw"), before);
            }
        }
    }

    #[test]
    fn any_path_and_method_is_answered_without_a_server_error(
        segment in prop_oneof![
            ".{0,40}".prop_map(String::into_bytes),
            prop::collection::vec(any::<u8>(), 0..40),
        ],
        method in prop_oneof![Just(Method::GET), Just(Method::POST), Just(Method::PUT), Just(Method::DELETE), Just(Method::PATCH)],
        route in 0usize..9,
    ) {
        let rig = rig();
        // Any bytes, not only UTF-8: a path segment is bytes on the wire.
        let encoded: String = segment.iter().map(|b| format!("%{b:02X}")).collect();
        let path = match route {
            0 => format!("/v1/sales/{encoded}"),
            1 => format!("/v1/sales/{encoded}/purchase"),
            2 => format!("/v1/orders/{encoded}"),
            3 => format!("/v1/orders/{encoded}/pay"),
            4 => format!("/v1/sales/{encoded}/orders"),
            5 => format!("/v1/sales/{encoded}/end"),
            6 => format!("/v1/sales/{encoded}/stock"),
            7 => format!("/v1/sales?after={encoded}&status={encoded}"),
            _ => format!("/{encoded}"),
        };
        let (status, answer) = rig.runtime.block_on(
            rig.admin.raw(method, &path, Some("application/json"), Bytes::from_static(b"{}")),
        ).unwrap();
        check(status, &answer)?;
    }

    #[test]
    fn admin_routes_refuse_every_token_but_the_right_one(token in "[ -~]{0,60}") {
        prop_assume!(token != "right-token");
        let rig = rig();
        let base = rig.http.base().to_owned();
        let intruder = Http::new(&base, Some(token));
        let sale = json!({ "id": "intrusion", "name": "x", "stock": 1, "per_user_limit": 1 });
        let (status, answer) = rig.runtime.block_on(intruder.post("/v1/sales", &sale)).unwrap();
        prop_assert_eq!(status, StatusCode::UNAUTHORIZED);
        prop_assert_eq!(&answer["code"], "unauthorized");
        let (status, _) = rig.runtime.block_on(intruder.get("/v1/sales/h/orders")).unwrap();
        prop_assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
}

#[test]
fn ids_cannot_reach_other_keys() {
    let rig = rig();
    for id in [
        "h}:stock",
        "{sale:h}",
        "h:stock",
        "h*",
        "../h",
        "h\r\nFLUSHALL",
        "h%00",
    ] {
        let path = format!(
            "/v1/sales/{}/purchase",
            id.bytes().map(|b| format!("%{b:02X}")).collect::<String>()
        );
        let (status, answer) = rig
            .runtime
            .block_on(rig.http.post(&path, &json!({ "user_id": "u" })))
            .unwrap();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{id}: {answer}");
        assert_eq!(answer["code"], "invalid_request");
    }
}
