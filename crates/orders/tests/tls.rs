//! The order database over TLS: a private PostgreSQL with `ssl = on` and a
//! private MariaDB with TLS, each with a certificate made by the test,
//! reached with the URL parameters the README shows. Each is skipped,
//! saying so, where its binaries are missing.

use seckill_engine::SaleSpec;
use seckill_orders::Store;
use seckill_testkit::{Certs, MariaServer, PgServer};

fn postgres(certs: &Certs) -> Option<PgServer> {
    let server = PgServer::start(Some(certs)).unwrap();
    if server.is_none() {
        eprintln!("skipped: PostgreSQL's binaries (initdb, postgres) are not installed");
    }
    server
}

/// `sslmode=verify-full&sslrootcert=CA`: the store opens, migrates and
/// writes over an encrypted connection whose certificate was checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_verify_full_connects_encrypted() {
    let certs = Certs::generate().unwrap();
    let Some(server) = postgres(&certs) else {
        return;
    };
    let ca = certs.ca();
    let url = format!(
        "{}?sslmode=verify-full&sslrootcert={}",
        server.url(),
        ca.display()
    );
    let store = Store::open(&url).await.unwrap();
    let engine_sale = {
        let redis = seckill_testkit::RedisServer::start().unwrap();
        let engine = seckill_engine::Engine::connect(&redis.url()).await.unwrap();
        engine
            .create_sale(&SaleSpec::new("tls", 5).per_user_limit(2))
            .await
            .unwrap()
    };
    store.upsert_sale(&engine_sale).await.unwrap();
    let stored = store.sale("tls").await.unwrap().unwrap();
    assert_eq!(stored.rules, engine_sale.rules);
    // The server says this very connection is encrypted.
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let (ssl,): (bool,) =
        sqlx::query_as("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(ssl, "the connection is not encrypted");
}

/// A certificate the given CA did not sign is refused, and so is a host
/// name the certificate is not for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_refuses_a_certificate_it_cannot_verify() {
    let certs = Certs::generate().unwrap();
    let other = Certs::generate().unwrap();
    let Some(server) = postgres(&certs) else {
        return;
    };
    let wrong_ca = format!(
        "{}?sslmode=verify-full&sslrootcert={}",
        server.url(),
        other.ca().display()
    );
    let err = Store::open(&wrong_ca).await.unwrap_err().to_string();
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    let wrong_name = format!(
        "postgres://postgres@127.0.0.2:{}/postgres?sslmode=verify-full&sslrootcert={}",
        server.port(),
        certs.ca().display()
    );
    assert!(Store::open(&wrong_name).await.is_err());
}

/// `ssl-mode=VERIFY_IDENTITY&ssl-ca=CA` on a private MariaDB with TLS: the
/// store opens, migrates and writes encrypted; another CA, or a host name
/// the certificate is not for, is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_verify_identity_connects_encrypted() {
    let certs = Certs::generate().unwrap();
    let other = Certs::generate().unwrap();
    let Some(server) = MariaServer::start(Some(&certs)).unwrap() else {
        eprintln!("skipped: MariaDB's binaries (mariadb-install-db, mariadbd) are not installed");
        return;
    };
    let verified = |url: String, ca: &std::path::Path| {
        format!("{url}?ssl-mode=VERIFY_IDENTITY&ssl-ca={}", ca.display())
    };
    let url = verified(server.url(), &certs.ca());
    let store = Store::open(&url).await.unwrap();
    assert!(store.sale("none").await.unwrap().is_none());
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let (_, cipher): (String, String) = sqlx::query_as("SHOW STATUS LIKE 'Ssl_cipher'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(!cipher.is_empty(), "the connection is not encrypted");
    let wrong_ca = verified(server.url(), &other.ca());
    assert!(
        Store::open(&wrong_ca).await.is_err(),
        "another CA's certificate was taken"
    );
    let wrong_name = verified(
        format!("mysql://root@127.0.0.2:{}/seckill", server.port()),
        &certs.ca(),
    );
    assert!(
        Store::open(&wrong_name).await.is_err(),
        "a certificate for another name was taken"
    );
}
