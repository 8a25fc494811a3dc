//! Drill 2: a lock holder frozen (SIGSTOP) past its lease and then resumed.
//! Another process takes the lock meanwhile; the frozen holder's late write
//! is refused by the protected resource because its fencing token is older,
//! and its lock-lost signal has fired.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;

use seckill_testkit::RedisServer;

/// The protected resource: a Redis value that only accepts writes carrying
/// a fence at least as new as the newest it has seen.
const FENCED_SET: &str = r"
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < last then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return 1";

async fn fenced_write(url: &str, fence: u64, value: &str) -> bool {
    let mut conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let written: i64 = redis::Script::new(FENCED_SET)
        .key("resource:fence")
        .key("resource:value")
        .arg(fence)
        .arg(value)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    written == 1
}

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
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["frozen_holder", "--exact", "--ignored", "--nocapture"])
        .env("SECKILL_TEST_CHILD_URL", server.url())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
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
