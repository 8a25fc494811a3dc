//! Redis under Sentinel, as an operator runs it: `--redis-sentinel` and
//! `--sentinel-master` (or their environment variables), over TLS with
//! the servers' and the sentinels' passwords in files; the commands that
//! talk to Redis all reach the master the sentinels name. Real sentinels
//! and servers (`redis-server --sentinel`) started by the test.

use std::time::Duration;

use seckill_service::client::Http;
use seckill_testkit::{Certs, SentinelOptions};
use serde_json::json;

mod common;

use common::{assert_refused_saying, assert_success, run};

fn path(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// `serve` given only the sentinels (TLS, passwords from files, the
/// sentinels in the environment) sells, persists, and the tools reach the
/// same master; no password shows in the output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_and_the_tools_run_under_sentinel_over_tls() {
    let certs = Certs::generate().unwrap();
    let rig = SentinelOptions::default()
        .tls(&certs)
        .password("server-pw-1")
        .sentinel_password("sentinel-pw-2")
        .start()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db");
    let (server_pw, sentinel_pw) = (dir.path().join("pw"), dir.path().join("spw"));
    std::fs::write(&server_pw, "server-pw-1\n").unwrap();
    std::fs::write(&sentinel_pw, "sentinel-pw-2\n").unwrap();
    let ca = certs.ca();
    let access = [
        "--redis-ca-file",
        path(&ca),
        "--redis-password-file",
        path(&server_pw),
        "--sentinel-password-file",
        path(&sentinel_pw),
    ];
    let sentinels = rig.sentinels();
    let under = [
        &["--redis-sentinel", sentinels.as_str()][..],
        &["--sentinel-master", rig.name()],
        &access,
    ]
    .concat();
    // `start_serve` gives a --redis-url too: --redis-sentinel wins over it.
    let (_serve, base) = common::start_serve("redis://127.0.0.1:1/", &db, &under);
    let admin = Http::new(&base, Some("t".into()));
    let sale = json!({"id": "st", "name": "st", "stock": 3, "per_user_limit": 1});
    let (status, body) = admin.post("/v1/sales", &sale).await.unwrap();
    assert_eq!(status, 201, "{body}");
    let (status, order) = Http::new(&base, None)
        .post("/v1/sales/st/purchase", &json!({"user_id": "u1"}))
        .await
        .unwrap();
    assert_eq!(status, 200, "{order}");
    let id = order["order_id"].as_str().unwrap().to_owned();
    let store = seckill_orders::Store::open(path(&db)).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.order(&id).await.unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "{id} never reached SQL"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The sentinels from the environment this time.
    let audit = std::process::Command::new(env!("CARGO_BIN_EXE_seckill"))
        .args(["audit", "--sale", "st", "--database-url", path(&db)])
        .args(access)
        .env("SECKILL_REDIS_SENTINEL", &sentinels)
        .env("SECKILL_SENTINEL_MASTER", rig.name())
        .output()
        .unwrap();
    assert_success(&audit);
    // `archive` reaches the sale too: a live sale is refused (exit 1) for
    // what it is, not for want of a connection.
    let archive = [
        &["archive", "--sale", "st", "--database-url", path(&db)][..],
        &under,
    ]
    .concat();
    let out = run(&archive);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("refused:"), "{said}");
    let bench = |strategy| {
        [
            &["bench", "--strategy", strategy, "--stock", "100"][..],
            &["--buyers", "300", "--concurrency", "16"],
            &under,
        ]
        .concat()
    };
    assert_success(&run(&bench("coalesced")));
    // `watch` opens connections of its own, which would not follow.
    assert_refused_saying(&bench("watch"), "would not follow the master");
    let lock = [
        &["lock-bench", "--clients", "4", "--duration", "1"][..],
        &under,
    ]
    .concat();
    let out = run(&lock);
    assert_success(&out);
    for out in [&audit, &out] {
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!all.contains("pw-"), "a password was shown: {all}");
    }
}

/// The settings that cannot go together, or miss a part, are named.
#[test]
fn sentinel_settings_are_checked() {
    let rig = SentinelOptions::default().replicas(0).start().unwrap();
    let sentinels = rig.sentinels();
    let bench = [
        "bench",
        "--strategy",
        "atomic",
        "--stock",
        "10",
        "--buyers",
        "20",
    ];
    let no_name = [&bench[..], &["--redis-sentinel", sentinels.as_str()]].concat();
    assert_refused_saying(&no_name, "--sentinel-master");
    let both = [
        &bench[..],
        &[
            "--redis-sentinel",
            sentinels.as_str(),
            "--sentinel-master",
            "seckill",
        ],
        &["--redis-cluster", "127.0.0.1:7000"],
    ]
    .concat();
    assert_refused_saying(&both, "cannot be used with");
    let wrong = [
        &bench[..],
        &[
            "--redis-sentinel",
            sentinels.as_str(),
            "--sentinel-master",
            "nosuch",
        ],
    ]
    .concat();
    assert_refused_saying(&wrong, "no sentinel names a master");
    // Plain sentinels with TLS settings: the mistake is named.
    let certs = Certs::generate().unwrap();
    let ca = certs.ca();
    let tls_on_plain = [
        &bench[..],
        &[
            "--redis-sentinel",
            sentinels.as_str(),
            "--sentinel-master",
            "seckill",
        ],
        &["--redis-ca-file", path(&ca)],
    ]
    .concat();
    assert_refused_saying(&tls_on_plain, "rediss:// sentinels");
    let works = [
        &bench[..],
        &[
            "--redis-sentinel",
            sentinels.as_str(),
            "--sentinel-master",
            "seckill",
        ],
    ]
    .concat();
    assert_success(&run(&works));
}
