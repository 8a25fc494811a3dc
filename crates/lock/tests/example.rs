//! The lock crate's example runs as written, against a private server.

#[path = "../examples/guarded_counter.rs"]
mod guarded_counter;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guarded_counter_example_counts_every_update() {
    let server = seckill_testkit::RedisServer::start().unwrap();
    let total = guarded_counter::run(&server.url()).await.unwrap();
    assert_eq!(total, 200);
}

#[path = "../examples/siblings.rs"]
mod siblings;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_siblings_example_says_what_each_primitive_did() {
    let server = seckill_testkit::RedisServer::start().unwrap();
    let said = siblings::run(&server.url()).await.unwrap();
    assert_eq!(said.len(), 4, "{said:?}");
    assert_eq!(said[0], "every cache warm: the sale opens");
    assert!(said[1].starts_with("two readers at once"), "{said:?}");
    assert_eq!(said[2], "the writer alone");
    assert!(
        said[3].starts_with("3 admitted, then: retry after"),
        "{said:?}"
    );
}
