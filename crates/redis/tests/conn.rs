//! A connection's epoch on a real server: raised by a replica wait that
//! failed on a broken connection, so a `WAIT` sent after the reconnect
//! never confirms what the old connection wrote.

use std::time::Duration;

use redis::AsyncCommands;
use seckill_redis::{Replicas, Target};
use seckill_testkit::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_wait_on_a_broken_connection_raises_the_epoch() {
    let mut server = RedisServer::start().unwrap();
    let mut conn = Target::server(&server.url()).connect().await.unwrap();
    let () = conn.set("k", "1").await.unwrap();
    let epoch = conn.epoch();

    server.kill();
    let waited = conn
        .on_every_replica(b"k", epoch, Duration::from_millis(100), Replicas::Online)
        .await;
    assert!(waited.is_err(), "{waited:?}");
    assert!(
        conn.epoch() > epoch,
        "the connection broke under the wait and the epoch stayed"
    );
}
