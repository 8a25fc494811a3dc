//! Drill 2: a lock holder frozen (SIGSTOP) past its lease and then resumed.
//! Another process takes the lock meanwhile; the frozen holder's late write
//! is refused by the protected resource because its fencing token is older,
//! and its lock-lost signal has fired.

use std::io::Write;
use std::time::Duration;

mod common;

use common::fenced_write;

use seckill_testkit::RedisServer;

/// The holder process: takes the lock with a watchdog, says its fence, then
/// on each line of input writes through the fence and reports.
#[tokio::test]
#[ignore = "helper process for another test"]
async fn frozen_holder() {
    let Ok(url) = std::env::var("SECKILL_TEST_CHILD_URL") else {
        return;
    };
    let locks = common::connect(&url).await;
    let guard = locks
        .lock("fenced")
        .unwrap()
        .lease(Duration::from_millis(300))
        .watchdog(true)
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    println!("FENCE {}", guard.fence());
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let lost = guard.is_lost();
    let written = fenced_write(&url, guard.fence(), "stale").await;
    println!("WRITE {written} LOST {lost}");
}

#[tokio::test]
async fn a_holder_paused_past_its_lease_cannot_write_through_the_fence() {
    let server = RedisServer::start().unwrap();
    let (mut child, mut out) = common::child("frozen_holder", &server.url(), &[]);
    let mut next = |prefix: &str| {
        out.by_ref()
            .map_while(Result::ok)
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} line"))
    };
    let old: u64 = next("FENCE ")["FENCE ".len()..].trim().parse().unwrap();

    // Freeze the holder for twice its lease: its watchdog cannot renew.
    // SAFETY: signals to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGSTOP) };
    let locks = common::connect(&server.url()).await;
    let guard = locks
        .lock("fenced")
        .unwrap()
        .acquire(Duration::from_secs(2))
        .await
        .expect("the frozen holder's lease ran out");
    assert!(guard.fence() > old);
    assert!(fenced_write(&server.url(), guard.fence(), "fresh").await);
    unsafe { libc::kill(child.id() as i32, libc::SIGCONT) };

    writeln!(child.stdin.as_mut().unwrap(), "write").unwrap();
    assert_eq!(next("WRITE "), "WRITE false LOST true");
    child.wait().unwrap();
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let value: String = redis::cmd("GET")
        .arg("resource:value")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value, "fresh");
    guard.release().await.unwrap();
}
