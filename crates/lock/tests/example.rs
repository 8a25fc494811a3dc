//! The lock crate's example runs as written, against a private server.

#[path = "../examples/guarded_counter.rs"]
mod guarded_counter;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guarded_counter_example_counts_every_update() {
    let server = seckill_testkit::RedisServer::start().unwrap();
    let total = guarded_counter::run(&server.url()).await.unwrap();
    assert_eq!(total, 200);
}
