//! Under Sentinel, on real servers: a connection finds the master the
//! sentinels name, follows it through a failover without being made
//! again, and does so over TLS with passwords too; a wrong master name or
//! absent sentinels fail in plain words.

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use seckill_redis::{Target, Tls};
use seckill_testkit::{Certs, SentinelOptions};

/// Writes `key` until a write succeeds, for at most `limit`.
async fn write_until_it_works(
    conn: &mut seckill_redis::Conn,
    key: &str,
    limit: Duration,
) -> Duration {
    let start = Instant::now();
    loop {
        let done: redis::RedisResult<()> = conn.set(key, "after").await;
        if done.is_ok() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "no write worked for {limit:?}: {done:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The port of the server `conn` talks to, as the sentinels name it.
async fn port_of(conn: &mut seckill_redis::Conn, tls: bool) -> u16 {
    let field = if tls { "tls-port" } else { "port" };
    let answer: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(field)
        .query_async(conn)
        .await
        .unwrap();
    answer[1].parse().unwrap()
}

async fn follows_a_failover(mut rig: seckill_testkit::RedisSentinels, target: Target, tls: bool) {
    let mut conn = target.connect().await.unwrap();
    let () = conn.set("before", "1").await.unwrap();
    assert_eq!(port_of(&mut conn, tls).await, rig.master().unwrap());
    let epoch = conn.epoch();

    let (old, new) = rig.kill_master().unwrap();
    let took = write_until_it_works(&mut conn, "after", Duration::from_secs(10)).await;
    assert_eq!(
        port_of(&mut conn, tls).await,
        new,
        "the connection follows the new master"
    );
    assert_ne!(old, new);
    assert!(
        conn.epoch() > epoch,
        "a write before the swap is never confirmed after it"
    );
    // The write acknowledged before the kill was replicated: it is there.
    let before: Option<String> = conn.get("before").await.unwrap();
    assert_eq!(before.as_deref(), Some("1"));
    eprintln!("writes worked again {took:?} after the sentinels named the new master");

    // The old master comes back, empty and claiming to be a master until
    // the sentinels demote it; the connection stays with the new one.
    rig.rejoin(old).unwrap();
    let () = conn.set("later", "1").await.unwrap();
    assert_eq!(port_of(&mut conn, tls).await, new);
    let before: Option<String> = conn.get("before").await.unwrap();
    assert_eq!(before.as_deref(), Some("1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_follows_the_master_through_a_failover() {
    let rig = SentinelOptions::default().start().unwrap();
    let target = Target::sentinel(&rig.sentinels(), rig.name()).unwrap();
    follows_a_failover(rig, target, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_with_passwords_too() {
    let certs = Certs::generate().unwrap();
    let rig = SentinelOptions::default()
        .tls(&certs)
        .password("server-secret")
        .sentinel_password("sentinel-secret")
        .start()
        .unwrap();
    let tls = Tls::from_files(Some(&certs.ca()), None, None).unwrap();
    let target = Target::sentinel(&rig.sentinels(), rig.name())
        .unwrap()
        .with_tls(tls)
        .with_password("server-secret")
        .with_sentinel_password("sentinel-secret");
    assert!(target.is_tls());
    let shown = format!("{target} {target:?}");
    assert!(!shown.contains("secret"), "{shown}");
    follows_a_failover(rig, target, true).await;
}

#[tokio::test]
async fn a_wrong_name_or_no_sentinel_is_a_plain_error() {
    let rig = SentinelOptions::default().replicas(0).start().unwrap();
    let wrong = Target::sentinel(&rig.sentinels(), "nosuch").unwrap();
    let e = wrong.connect().await.unwrap_err().to_string();
    assert!(
        e.contains("no sentinel names a master") && e.contains("'nosuch'"),
        "{e}"
    );

    let gone = Target::sentinel("127.0.0.1:1", "seckill").unwrap();
    let e = gone.connect().await.unwrap_err().to_string();
    assert!(e.to_lowercase().contains("connection refused"), "{e}");

    let e = Target::sentinel("", "seckill").unwrap_err().to_string();
    assert!(e.contains("at least one sentinel"), "{e}");
    let e = Target::sentinel("127.0.0.1:26379", " ")
        .unwrap_err()
        .to_string();
    assert!(e.contains("--sentinel-master"), "{e}");
}
