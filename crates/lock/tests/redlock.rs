//! Redlock over five real, independent redis-server processes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use seckill_lock::{Error, Locks};
use seckill_testkit::RedisServer;

mod common;

use common::take;

async fn redlock(servers: &[RedisServer]) -> Locks {
    let clients = servers.iter().map(|s| common::client(&s.url())).collect();
    Locks::builder().redlock(clients).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_locks_exclude_each_other_and_fences_increase() {
    let servers = RedisServer::start_many(5).unwrap();
    let clients = [redlock(&servers).await, redlock(&servers).await];
    let inside = Arc::new(Mutex::new((false, Vec::new())));
    let mut tasks = Vec::new();
    for t in 0..8 {
        let lock = clients[t % 2]
            .lock("rl")
            .unwrap()
            .lease(Duration::from_secs(2));
        let inside = inside.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                let guard = lock.acquire(Duration::from_secs(20)).await.unwrap();
                {
                    let mut s = inside.lock().unwrap();
                    assert!(!s.0, "two holders at once");
                    s.0 = true;
                    s.1.push(guard.fence());
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
                inside.lock().unwrap().0 = false;
                guard.release().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let fences = &inside.lock().unwrap().1;
    assert_eq!(fences.len(), 40);
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
}

/// Raised on a quorum, the counter hands out fences above the floor from
/// any later quorum, with a master down.
#[tokio::test]
async fn fence_at_least_holds_on_a_quorum() {
    let mut servers = RedisServer::start_many(3).unwrap();
    let locks = redlock(&servers).await;
    let lock = locks.lock("x").unwrap();
    lock.fence_at_least(100).await.unwrap();
    servers[0].kill();
    let guard = lock.try_acquire().await.unwrap().unwrap();
    assert!(guard.fence() > 100, "fence {}", guard.fence());
}

#[tokio::test]
async fn survives_a_minority_down_and_fails_cleanly_without_quorum() {
    let mut servers = RedisServer::start_many(5).unwrap();
    let locks = redlock(&servers).await;
    let lock = locks.lock("rl").unwrap().lease(Duration::from_secs(5));
    let first = lock.try_acquire().await.unwrap().unwrap();
    let fence = first.fence();
    first.release().await.unwrap();

    servers[0].kill();
    servers[3].kill();
    let second = lock.acquire(Duration::from_secs(2)).await.unwrap();
    assert!(second.fence() > fence);
    // Held on the surviving majority: a second client is refused.
    let other = redlock(&servers).await;
    assert!(take(&other, "rl").await.is_none());
    second.extend(Duration::from_secs(5)).await.unwrap();
    second.release().await.unwrap();

    servers[4].kill();
    match lock.try_acquire().await {
        Err(Error::NoQuorum {
            reachable: 2,
            needed: 3,
        }) => {}
        other => panic!("expected NoQuorum, got {other:?}"),
    }
    match lock.acquire(Duration::from_millis(300)).await {
        Err(Error::NoQuorum { .. }) => {}
        other => panic!("expected NoQuorum, got {other:?}"),
    }

    // A master comes back: the quorum is whole again.
    servers[4].restart().unwrap();
    let back = lock.acquire(Duration::from_secs(2)).await.unwrap();
    assert!(back.fence() > fence);
    back.release().await.unwrap();
}

#[tokio::test]
async fn a_redlock_watchdog_renews_on_the_quorum() {
    let servers = RedisServer::start_many(3).unwrap();
    let locks = redlock(&servers).await;
    let lease = Duration::from_millis(300);
    let guard = locks
        .lock("wd")
        .unwrap()
        .lease(lease)
        .watchdog(true)
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(lease * 3).await;
    assert!(!guard.is_lost());
    let other = redlock(&servers).await;
    assert!(take(&other, "wd").await.is_none());
    guard.release().await.unwrap();
    assert!(take(&other, "wd").await.is_some());
}
