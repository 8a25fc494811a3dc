//! Redis over TLS, as an operator runs it: `rediss://` URLs, a CA file,
//! mutual TLS, a password from a file, and the plain refusals when a
//! setting is wrong. Real `redis-server --tls-port` processes with
//! certificates made by the test.

use std::time::Duration;

use seckill_service::client::Http;
use seckill_testkit::{Certs, Options, RedisServer};
use serde_json::json;

mod common;

use common::{assert_refused_saying, assert_success, run};

/// A TLS server with certificates from `certs`; `mutual`: clients must
/// show a certificate too.
fn tls_server(certs: &Certs, mutual: bool) -> (RedisServer, String) {
    let server = Options::default().tls(certs, mutual).start().unwrap();
    let url = server.tls_url().unwrap();
    (server, url)
}

fn path(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// Waits until order `id` is in the SQLite database `db`: 10 s at most.
async fn wait_in_sql(db: &std::path::Path, id: &str) {
    let store = seckill_orders::Store::open(path(db)).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.order(id).await.unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "{id} never reached SQL"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `serve` over `rediss://` with the CA: a sale is created, bought and its
/// order reaches SQL, through the same connection kinds as over TCP (the
/// service's, the persister's, the restock subscription).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_sells_and_persists_over_tls() {
    let certs = Certs::generate().unwrap();
    let (_server, url) = tls_server(&certs, false);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db");
    let (_serve, base) = common::start_serve(&url, &db, &["--redis-ca-file", path(&certs.ca())]);
    let admin = Http::new(&base, Some("t".into()));
    let sale = json!({"id": "tls", "name": "tls", "stock": 3, "per_user_limit": 1});
    assert_eq!(admin.post("/v1/sales", &sale).await.unwrap().0, 201);
    let buyer = Http::new(&base, None);
    let (status, order) = buyer
        .post("/v1/sales/tls/purchase", &json!({"user_id": "u1"}))
        .await
        .unwrap();
    assert_eq!(status, 200, "{order}");
    let id = order["order_id"].as_str().unwrap().to_owned();
    // The persister read it from the stream over TLS and wrote it to SQL.
    wait_in_sql(&db, &id).await;
    // `audit` reads the sale over TLS too, and finds Redis and SQL agree.
    let ca = certs.ca();
    let audit = run(&[
        "audit",
        "--sale",
        "tls",
        "--redis-url",
        &url,
        "--redis-ca-file",
        path(&ca),
        "--database-url",
        path(&db),
    ]);
    assert_success(&audit);
}

/// `persist` on its own reads the orders of a `serve --no-background` over
/// TLS and writes them to SQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persist_moves_orders_over_tls() {
    let certs = Certs::generate().unwrap();
    let (_server, url) = tls_server(&certs, false);
    let ca = certs.ca();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db");
    let flags = ["--redis-ca-file", path(&ca), "--no-background"];
    let (_serve, base) = common::start_serve(&url, &db, &flags);
    let admin = Http::new(&base, Some("t".into()));
    let sale = json!({"id": "p", "name": "p", "stock": 3, "per_user_limit": 1});
    assert_eq!(admin.post("/v1/sales", &sale).await.unwrap().0, 201);
    let (status, order) = Http::new(&base, None)
        .post("/v1/sales/p/purchase", &json!({"user_id": "u1"}))
        .await
        .unwrap();
    assert_eq!(status, 200, "{order}");
    let id = order["order_id"].as_str().unwrap().to_owned();
    let persist = std::process::Command::new(env!("CARGO_BIN_EXE_seckill"))
        .args(["persist", "--redis-url", &url, "--redis-ca-file", path(&ca)])
        .arg("--database-url")
        .arg(&db)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _persist = common::Serve(persist);
    wait_in_sql(&db, &id).await;
}

/// The tools speak TLS as `serve` does: `bench` (the engine) and
/// `lock-bench` (the lock and its pub/sub hand-off).
#[test]
fn bench_and_lock_bench_run_over_tls() {
    let certs = Certs::generate().unwrap();
    let (_server, url) = tls_server(&certs, false);
    let ca = certs.ca();
    let tls = ["--redis-url", url.as_str(), "--redis-ca-file", path(&ca)];
    let bench = [
        &["bench", "--strategy", "coalesced", "--stock", "100"][..],
        &["--buyers", "300", "--concurrency", "16"],
        &tls,
    ]
    .concat();
    assert_success(&run(&bench));
    let lock = [
        &["lock-bench", "--clients", "4", "--duration", "1"][..],
        &tls,
    ]
    .concat();
    assert_success(&run(&lock));
}

/// A server asking for client certificates: refused without one, in plain
/// words; served with one.
#[test]
fn mutual_tls_needs_the_client_certificate() {
    let certs = Certs::generate().unwrap();
    let (_server, url) = tls_server(&certs, true);
    let ca = certs.ca();
    let (cert, key) = certs.client();
    let base = [
        &["bench", "--strategy", "atomic", "--stock", "10"][..],
        &["--buyers", "20", "--redis-url", url.as_str()],
        &["--redis-ca-file", path(&ca)],
    ]
    .concat();
    assert_refused_saying(&base, "asks for a client certificate");
    let with = [
        &base[..],
        &["--redis-client-cert-file", path(&cert)],
        &["--redis-client-key-file", path(&key)],
    ]
    .concat();
    assert_success(&run(&with));
    // A certificate without its key is a mistake named at once.
    let half = [&base[..], &["--redis-client-cert-file", path(&cert)]].concat();
    assert_refused_saying(&half, "--redis-client-key-file");
}

/// Certificates are checked by default: the system's roots do not know a
/// private CA, nor does another CA; each refusal says what failed.
/// `--redis-tls-insecure` connects anyway, and warns.
#[test]
fn a_wrong_ca_is_refused_plainly_and_insecure_warns() {
    let certs = Certs::generate().unwrap();
    let other = Certs::generate().unwrap();
    let (_server, url) = tls_server(&certs, false);
    let (ca, other_ca) = (certs.ca(), other.ca());
    let bench = [
        &["bench", "--strategy", "atomic", "--stock", "10"][..],
        &["--buyers", "20", "--redis-url", url.as_str()],
    ]
    .concat();
    let not_trusted = "not signed by a CA this client trusts";
    assert_refused_saying(&bench, not_trusted);
    let wrong = [&bench[..], &["--redis-ca-file", path(&other_ca)]].concat();
    assert_refused_saying(&wrong, not_trusted);
    // The right CA, but a host name the certificate is not for.
    let wrong_host = url.replace("localhost", "127.0.0.2");
    let named = [
        &["bench", "--strategy", "atomic", "--stock", "10"][..],
        &["--buyers", "20", "--redis-url", wrong_host.as_str()],
        &["--redis-ca-file", path(&ca)],
    ]
    .concat();
    assert_refused_saying(&named, "not issued for the host name");
    let insecure = [&bench[..], &["--redis-tls-insecure"]].concat();
    let out = run(&insecure);
    assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--redis-tls-insecure"), "{stderr}");
    // TLS settings on a plain URL are a mistake, said as one.
    let plain = [
        &[
            "bench",
            "--strategy",
            "atomic",
            "--stock",
            "10",
            "--buyers",
            "20",
        ][..],
        &["--redis-url", "redis://127.0.0.1:1/"],
        &["--redis-ca-file", path(&ca)],
    ]
    .concat();
    assert_refused_saying(&plain, "rediss://");
}

/// A password from a file reaches Redis, and is printed nowhere: not in
/// output, not in a refusal.
#[test]
fn a_password_file_authenticates_and_is_never_printed() {
    let secret = "pw-9f8e7d6c5b4a";
    let server = Options::default()
        .arg("requirepass", secret)
        .start()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("redis-password");
    std::fs::write(&file, format!("{secret}\n")).unwrap();
    let url = server.url();
    let bench = [
        &["bench", "--strategy", "atomic", "--stock", "10"][..],
        &["--buyers", "20", "--redis-url", url.as_str()],
    ]
    .concat();
    let out = run(&bench);
    assert!(!out.status.success(), "no password, yet served");
    let with = [&bench[..], &["--redis-password-file", path(&file)]].concat();
    let out = run(&with);
    assert_success(&out);
    std::fs::write(&file, "wrong\n").unwrap();
    let refused = run(&with);
    assert!(!refused.status.success());
    for out in [out, refused] {
        for text in [&out.stdout, &out.stderr] {
            assert!(!String::from_utf8_lossy(text).contains(secret));
        }
    }
}

/// A cluster of 3 TLS masters with a replica each (`tls-cluster yes`):
/// `bench` buys a sale sharded over every master through the cluster
/// client, which is redirected to TLS ports, and `lock-bench` takes locks
/// and their hand-offs (pub/sub on a seed) over TLS.
#[test]
fn a_tls_cluster_sells_and_locks() {
    let certs = Certs::generate().unwrap();
    let cluster = seckill_testkit::RedisCluster::start_tls(3, 1, &certs).unwrap();
    let seeds = cluster.tls_seeds();
    let ca = certs.ca();
    let tls = [
        "--redis-cluster",
        seeds.as_str(),
        "--redis-ca-file",
        path(&ca),
    ];
    let bench = [
        &[
            "bench",
            "--strategy",
            "coalesced",
            "--stock",
            "300",
            "--shards",
            "3",
        ][..],
        &["--buyers", "600", "--concurrency", "32"],
        &tls,
    ]
    .concat();
    assert_success(&run(&bench));
    let lock = [
        &[
            "lock-bench",
            "--mode",
            "spread",
            "--clients",
            "4",
            "--duration",
            "1",
        ][..],
        &tls,
    ]
    .concat();
    assert_success(&run(&lock));
}
