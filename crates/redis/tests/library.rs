//! A library on a real redis-server: loaded on first use and again after
//! `FUNCTION FLUSH`, two versions side by side, errors passed through.

use seckill_redis::Library;
use seckill_testkit::RedisServer;

fn counter(step: &str) -> Library {
    Library::builder("test_counter")
        .prelude("local STEP = 1")
        .function(
            "bump",
            &[&format!(
                "return redis.call('INCRBY', KEYS[1], ARGV[1] * STEP * {step})"
            )],
        )
        .read_only("peek", &["return redis.call('GET', KEYS[1])"])
        .function("fail", &["return redis.error_reply('REFUSED said so')"])
        .build()
}

#[tokio::test]
async fn calls_load_the_library_when_the_server_lacks_it() {
    let server = RedisServer::start().unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let one = counter("1");
    let ten = counter("10");

    let n: i64 = one
        .call("bump", &["c"])
        .arg(2)
        .invoke(&mut conn)
        .await
        .unwrap();
    assert_eq!(n, 2);
    // Another version of the same library runs beside it, each its own code.
    let n: i64 = ten
        .call("bump", &["c"])
        .arg(1)
        .invoke(&mut conn)
        .await
        .unwrap();
    assert_eq!(n, 12);
    let n: i64 = one
        .call("bump", &["c"])
        .arg(1)
        .invoke(&mut conn)
        .await
        .unwrap();
    assert_eq!(n, 13);
    let libraries: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(libraries.len(), 2);

    // After a flush the next call loads it again, and runs once.
    let () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    let n: i64 = one
        .call("bump", &["c"])
        .arg(1)
        .invoke(&mut conn)
        .await
        .unwrap();
    assert_eq!(n, 14);
    let seen: String = one.call("peek", &["c"]).invoke(&mut conn).await.unwrap();
    assert_eq!(seen, "14");

    // Loading what is there already is fine.
    one.load(&mut conn).await.unwrap();

    let e = one
        .call("fail", &["c"])
        .invoke::<redis::Value, _>(&mut conn)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("REFUSED"), "{e}");
}

#[tokio::test]
async fn a_read_only_function_runs_on_a_replica() {
    let master = RedisServer::start().unwrap();
    let replica = RedisServer::start().unwrap();
    let mut m = redis::Client::open(master.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let mut r = redis::Client::open(replica.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // Full sync at once, not after the default 5 s wait for more replicas.
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-diskless-sync-delay")
        .arg(0)
        .query_async(&mut m)
        .await
        .unwrap();
    let () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port())
        .query_async(&mut r)
        .await
        .unwrap();
    let lib = counter("1");
    let _: i64 = lib
        .call("bump", &["c"])
        .arg(3)
        .invoke(&mut m)
        .await
        .unwrap();
    // The library reached the replica by replication, with the data.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let seen: redis::RedisResult<Option<String>> =
            lib.call("peek", &["c"]).invoke(&mut r).await;
        match seen {
            Ok(Some(v)) => {
                assert_eq!(v, "3");
                break;
            }
            other => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "replica never caught up: {other:?}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}
