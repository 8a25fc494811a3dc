//! A library on a real redis-server: loaded on first use and again after
//! `FUNCTION FLUSH`, two versions side by side, errors passed through; on a
//! cluster, loaded node by node and still there after a failover.

use seckill_redis::{Library, Target};
use seckill_testkit::{RedisCluster, RedisServer};

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

async fn bump(lib: &Library, conn: &mut seckill_redis::Conn, key: &str, by: i64) -> i64 {
    lib.call("bump", &[key]).arg(by).invoke(conn).await.unwrap()
}

#[tokio::test]
async fn calls_load_the_library_when_the_server_lacks_it() {
    let server = RedisServer::start().unwrap();
    let mut conn = Target::server(&server.url()).connect().await.unwrap();
    let one = counter("1");
    let ten = counter("10");

    let n = bump(&one, &mut conn, "c", 2).await;
    assert_eq!(n, 2);
    // Another version of the same library runs beside it, each its own code.
    let n = bump(&ten, &mut conn, "c", 1).await;
    assert_eq!(n, 12);
    let n = bump(&one, &mut conn, "c", 1).await;
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
    let n = bump(&one, &mut conn, "c", 1).await;
    assert_eq!(n, 14);
    let seen: String = one.call("peek", &["c"]).invoke(&mut conn).await.unwrap();
    assert_eq!(seen, "14");

    // Loading what is there already is fine.
    one.load(&mut conn, b"c").await.unwrap();

    let e = one
        .call("fail", &["c"])
        .invoke::<redis::Value>(&mut conn)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("REFUSED"), "{e}");
}

#[tokio::test]
async fn a_read_only_function_runs_on_a_replica() {
    let master = RedisServer::start().unwrap();
    let replica = RedisServer::start().unwrap();
    let mut m = Target::server(&master.url()).connect().await.unwrap();
    let mut r = Target::server(&replica.url()).connect().await.unwrap();
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
    bump(&lib, &mut m, "c", 3).await;
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

#[tokio::test]
async fn on_a_cluster_each_master_loads_it_and_a_promoted_replica_has_it() {
    let cluster = RedisCluster::start(3, 1).unwrap();
    let target = Target::cluster(&cluster.addresses().join(",")).unwrap();
    let mut conn = target.connect().await.unwrap();
    let lib = counter("1");
    // Keys in every master's slots: each call loads the library where it runs.
    let keys: Vec<String> = (0..30).map(|i| format!("{{k{i}}}:n")).collect();
    for key in &keys {
        let n = bump(&lib, &mut conn, key, 1).await;
        assert_eq!(n, 1);
    }
    let masters = cluster.masters().unwrap();
    let mut owners = std::collections::HashSet::new();
    for key in &keys {
        owners.insert(cluster.master_of(cluster.slot_of(key).unwrap()).unwrap());
    }
    assert_eq!(owners.len(), masters.len(), "the keys reach every master");

    // Promote a replica: it already has the library, by replication.
    let owner = cluster
        .master_of(cluster.slot_of(&keys[0]).unwrap())
        .unwrap();
    let replica = cluster.replicas_of(owner).unwrap()[0];
    cluster.failover(replica).unwrap();
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &replica.to_string(), "function", "list"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(lib.name()),
        "the promoted replica lacks the library"
    );
    for key in &keys {
        let n = bump(&lib, &mut conn, key, 1).await;
        assert_eq!(n, 2, "{key}");
    }
}

/// Over `maxmemory`, Redis refuses a writing function whole, before it
/// runs (so even a refusal it would have answered is an error), while a
/// read-only one still answers: what the README says of the service's 503.
#[tokio::test]
async fn out_of_memory_refuses_writing_functions_whole() {
    let server = RedisServer::start().unwrap();
    let mut conn = Target::server(&server.url()).connect().await.unwrap();
    let lib = counter("1");
    assert_eq!(bump(&lib, &mut conn, "c", 1).await, 1);
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(1)
        .query_async(&mut conn)
        .await
        .unwrap();
    let e = lib
        .call("fail", &["c"])
        .invoke::<redis::Value>(&mut conn)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("OOM"), "{e}");
    let seen: String = lib.call("peek", &["c"]).invoke(&mut conn).await.unwrap();
    assert_eq!(seen, "1");
}

/// A group's head is made once (its count of helper calls goes on from
/// call to call), and its helpers read the `KEYS` of the function that
/// calls them, whichever function of the group it is.
#[tokio::test]
async fn a_groups_helpers_read_each_calls_keys() {
    let server = RedisServer::start().unwrap();
    let mut conn = Target::server(&server.url()).connect().await.unwrap();
    let lib = Library::builder("test_group")
        .group(
            "local calls = 0\nlocal function first() calls = calls + 1 return KEYS[1] end",
            |group| {
                group
                    .function("set_first", &["return redis.call('SET', first(), ARGV[1])"])
                    .function("first_and_calls", &["return { first(), calls }"])
            },
        )
        .function("alone", &["return KEYS[1]"])
        .build();
    for (i, key) in ["a", "b", "a"].into_iter().enumerate() {
        let ok: String = lib
            .call("set_first", &[key])
            .arg(format!("to {key}"))
            .invoke(&mut conn)
            .await
            .unwrap();
        assert_eq!(ok, "OK");
        let (first, calls): (String, i64) = lib
            .call("first_and_calls", &[key, "other"])
            .invoke(&mut conn)
            .await
            .unwrap();
        // Two helper calls a round: set_first's and this one's.
        assert_eq!((first.as_str(), calls), (key, 2 * (i as i64 + 1)));
    }
    let (a, b): (String, String) = redis::cmd("MGET")
        .arg("a")
        .arg("b")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!((a.as_str(), b.as_str()), ("to a", "to b"));
    let alone: String = lib.call("alone", &["z"]).invoke(&mut conn).await.unwrap();
    assert_eq!(alone, "z");
}
