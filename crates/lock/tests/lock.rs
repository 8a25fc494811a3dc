//! The one-server lock against real redis-server processes.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use seckill_lock::{Error, Locks, Lost};
use seckill_testkit::RedisServer;

mod common;

use common::take;

async fn raw(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion_keeps_an_unprotected_counter_exact() {
    const TASKS: usize = 64;
    const ROUNDS: usize = 10;
    let server = RedisServer::start().unwrap();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(common::connect(&server.url()).await);
    }
    let fences = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let lock = clients[t % 4].lock("counter").unwrap();
        let mut conn = raw(&server).await;
        let fences = fences.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..ROUNDS {
                let guard = lock.acquire(Duration::from_secs(30)).await.unwrap();
                fences.lock().unwrap().push(guard.fence());
                let v: i64 = conn.get("counter").await.unwrap_or(0);
                tokio::task::yield_now().await;
                let () = conn.set("counter", v + 1).await.unwrap();
                guard.release().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let total: i64 = raw(&server).await.get("counter").await.unwrap();
    assert_eq!(total, (TASKS * ROUNDS) as i64);
    let fences = fences.lock().unwrap();
    assert_eq!(fences.len(), TASKS * ROUNDS);
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences must strictly increase in holding order"
    );
}

#[tokio::test]
async fn try_acquire_is_refused_while_held_and_fences_grow() {
    let server = RedisServer::start().unwrap();
    let a = common::connect(&server.url()).await;
    let b = common::connect(&server.url()).await;
    let first = take(&a, "x").await.unwrap();
    assert!(take(&b, "x").await.is_none());
    assert!(take(&b, "other").await.is_some());
    let fence = first.fence();
    first.release().await.unwrap();
    let second = take(&b, "x").await.unwrap();
    assert!(second.fence() > fence);
}

/// Fences raised past those data has seen (rebuilt after Redis lost the
/// lock's keys) are handed out only above them, a floor ahead of the
/// server's clock included, also once the lease of the grant above it
/// ended; never lowered; and no key is kept once the lock is idle and the
/// clock has passed the floor.
#[tokio::test]
async fn fence_at_least_raises_the_next_fence_and_never_lowers_it() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    let lock = locks.lock("x").unwrap().lease(Duration::from_millis(100));
    lock.fence_at_least(41).await.unwrap();
    let first = lock.try_acquire().await.unwrap().unwrap();
    assert!(first.fence() > 41);
    // A floor 300 ms ahead of the clock (fences are its µs).
    let ahead = first.fence() + 300_000;
    first.release().await.unwrap();
    lock.fence_at_least(ahead).await.unwrap();
    let second = lock.try_acquire().await.unwrap().unwrap();
    assert_eq!(second.fence(), ahead + 1);
    second.release().await.unwrap();
    // Past the second's 100 ms lease, not yet past the floor: its fence is
    // still what the next one must pass.
    tokio::time::sleep(Duration::from_millis(150)).await;
    lock.fence_at_least(5).await.unwrap();
    let third = lock.try_acquire().await.unwrap().unwrap();
    assert!(third.fence() > ahead + 1);
    let third_fence = third.fence();
    third.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let keys = common::live_keys(&server.url()).await;
    assert!(keys.is_empty(), "{keys:?}");
    let fourth = lock.try_acquire().await.unwrap().unwrap();
    assert!(fourth.fence() > third_fence);
}

/// A fence the clock has passed lives only in the lock's value: grants,
/// hand-offs and releases write no fence key, and the fences still rise.
#[tokio::test]
async fn a_fence_behind_the_clock_needs_no_key_of_its_own() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    let lock = locks.lock("plain").unwrap();
    let first = lock.try_acquire().await.unwrap().unwrap();
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire(Duration::from_secs(5)).await.unwrap() }
    });
    // The waiter queues (the lock, the queue, the waiters: no fence key),
    // then the release hands the lock on.
    for _ in 0..200 {
        if common::live_keys(&server.url()).await.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let first_fence = first.fence();
    first.release().await.unwrap();
    let second = waiter.await.unwrap();
    let second_fence = second.fence();
    assert!(second_fence > first_fence);
    second.release().await.unwrap();
    let third = lock.try_acquire().await.unwrap().unwrap();
    assert!(third.fence() > second_fence);
    let keys = common::live_keys(&server.url()).await;
    assert!(keys.iter().all(|k| !k.ends_with(":fence")), "{keys:?}");
    third.release().await.unwrap();
    let keys = common::live_keys(&server.url()).await;
    assert!(keys.iter().all(|k| !k.ends_with(":fence")), "{keys:?}");
}

/// 100,000 grants over 1,000 lock names, one in ten left to its lease and
/// some waiters left to their deadline: no key is left once they end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_is_left_once_leases_end() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    common::on_1000_names(&locks, "m", 100_000 / 64 + 1, |locks, name, i| async move {
        let lock = locks.lock(&name).unwrap().lease(Duration::from_millis(300));
        if let Ok(guard) = lock.acquire(Duration::from_millis(50)).await {
            if i % 10 == 0 {
                std::mem::forget(guard);
            } else {
                guard.release().await.unwrap();
            }
        }
        0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let keys = common::live_keys(&server.url()).await;
    assert!(
        keys.is_empty(),
        "{} keys left: {:?}",
        keys.len(),
        &keys[..keys.len().min(5)]
    );
}

#[tokio::test]
async fn lease_expiry_hands_the_lock_to_a_waiter_when_the_holder_vanishes() {
    let server = RedisServer::start().unwrap();
    let lease = Duration::from_millis(400);
    let holder = common::connect(&server.url()).await;
    let guard = holder
        .lock("job")
        .unwrap()
        .lease(lease)
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    // Vanish: no release, connection closed.
    std::mem::forget(guard);
    drop(holder);
    let waiter = common::connect(&server.url()).await;
    let started = Instant::now();
    let guard = waiter
        .lock("job")
        .unwrap()
        .acquire(Duration::from_secs(5))
        .await
        .unwrap();
    let waited = started.elapsed();
    assert!(
        waited <= lease + Duration::from_millis(300),
        "waited {waited:?}"
    );
    guard.release().await.unwrap();
}

/// Run by `holder_process_killed_blocks_no_longer_than_its_lease` as a child
/// process: takes the lock, says so, and waits to be killed.
#[tokio::test]
#[ignore = "helper process for another test"]
async fn child_holder() {
    let Ok(url) = std::env::var("SECKILL_TEST_CHILD_URL") else {
        return;
    };
    let locks = common::connect(&url).await;
    let guard = locks
        .lock("crash")
        .unwrap()
        .lease(Duration::from_millis(500))
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    println!("ACQUIRED {}", guard.fence());
    tokio::time::sleep(Duration::from_secs(60)).await;
}

#[tokio::test]
async fn holder_process_killed_blocks_no_longer_than_its_lease() {
    let server = RedisServer::start().unwrap();
    let (mut child, mut lines) = common::child("child_holder", &server.url(), &[]);
    let line = lines
        .find_map(|l| l.ok().filter(|l| l.starts_with("ACQUIRED")))
        .expect("child acquired");
    let child_fence: u64 = line["ACQUIRED ".len()..].trim().parse().unwrap();
    let locks = common::connect(&server.url()).await;
    let lock = locks.lock("crash").unwrap();
    assert!(lock.try_acquire().await.unwrap().is_none());
    child.kill().unwrap();
    child.wait().unwrap();
    let started = Instant::now();
    let guard = lock.acquire(Duration::from_secs(5)).await.unwrap();
    assert!(
        started.elapsed() <= Duration::from_millis(800),
        "{:?}",
        started.elapsed()
    );
    assert!(guard.fence() > child_fence);
}

#[tokio::test]
async fn release_and_extend_by_a_former_holder_are_refused() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    let short = locks.lock("res").unwrap().lease(Duration::from_millis(100));
    let stale = short.try_acquire().await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let current = take(&locks, "res").await.expect("lease over: free");
    // The usual recipe's `finally: delete` bug: the stale holder must not free it.
    assert!(matches!(
        stale.extend(Duration::from_secs(5)).await,
        Err(Error::NotHeld(_))
    ));
    assert!(matches!(stale.release().await, Err(Error::NotHeld(_))));
    assert!(take(&locks, "res").await.is_none());
    current.extend(Duration::from_secs(5)).await.unwrap();
    current.release().await.unwrap();
}

#[tokio::test]
async fn a_stale_guard_cannot_release_after_the_key_was_overwritten() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    let guard = take(&locks, "res").await.unwrap();
    let mut conn = raw(&server).await;
    let () = conn
        .set("seckill:lock:{res}", "someone-else:1")
        .await
        .unwrap();
    assert!(matches!(guard.release().await, Err(Error::NotHeld(_))));
    let still: String = conn.get("seckill:lock:{res}").await.unwrap();
    assert_eq!(still, "someone-else:1");
}

#[tokio::test]
async fn watchdog_keeps_the_lock_past_its_lease_and_reports_deletion() {
    let server = RedisServer::start().unwrap();
    let lease = Duration::from_millis(300);
    let locks = common::connect(&server.url()).await;
    let lock = locks.lock("wd").unwrap().lease(lease).watchdog(true);
    let guard = lock.try_acquire().await.unwrap().unwrap();
    tokio::time::sleep(lease * 3 + Duration::from_millis(100)).await;
    assert!(!guard.is_lost());
    let other = common::connect(&server.url()).await;
    assert!(take(&other, "wd").await.is_none());

    let mut lost = guard.lost();
    let () = raw(&server).await.del("seckill:lock:{wd}").await.unwrap();
    let deleted = Instant::now();
    let reason = tokio::time::timeout(Duration::from_secs(2), lost.wait())
        .await
        .expect("lost fires");
    assert_eq!(reason, Lost::Taken);
    assert!(
        deleted.elapsed() <= lease / 3 + Duration::from_millis(150),
        "{:?}",
        deleted.elapsed()
    );
    assert!(guard.is_lost());
    assert!(matches!(guard.release().await, Err(Error::NotHeld(_))));
}

#[tokio::test]
async fn without_watchdog_the_lost_signal_fires_at_lease_end() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    let lease = Duration::from_millis(200);
    let guard = locks
        .lock("nowd")
        .unwrap()
        .lease(lease)
        .try_acquire()
        .await
        .unwrap()
        .unwrap();
    let started = Instant::now();
    assert_eq!(guard.lost().wait().await, Lost::Expired);
    // Fires at the lease end less the drift margin; a loaded machine may
    // wake the timer a little late.
    let fired = started.elapsed();
    assert!(
        fired >= lease / 2 && fired <= lease + Duration::from_millis(100),
        "{fired:?}"
    );
}

#[tokio::test]
async fn waiters_are_woken_fast_and_in_arrival_order() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    let lock = locks.lock("fifo").unwrap();

    // Order: ten waiters queue one after another while the lock is held.
    let holder = lock.try_acquire().await.unwrap().unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..10 {
        let (lock, order) = (lock.clone(), order.clone());
        waiters.push(tokio::spawn(async move {
            let guard = lock.acquire(Duration::from_secs(10)).await.unwrap();
            order.lock().unwrap().push(i);
            guard.release().await.unwrap();
        }));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    holder.release().await.unwrap();
    for w in waiters {
        w.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..10).collect::<Vec<_>>());

    // Latency: 200 hand-offs from a releasing task to a waiting one.
    let mut handoffs = Vec::new();
    for _ in 0..200 {
        let guard = lock.try_acquire().await.unwrap().unwrap();
        let waiter = {
            let lock = lock.clone();
            tokio::spawn(async move {
                let g = lock.acquire(Duration::from_secs(5)).await.unwrap();
                let at = Instant::now();
                g.release().await.unwrap();
                at
            })
        };
        tokio::time::sleep(Duration::from_millis(2)).await;
        let released = Instant::now();
        guard.release().await.unwrap();
        handoffs.push(waiter.await.unwrap() - released);
    }
    handoffs.sort();
    let p99 = handoffs[handoffs.len() * 99 / 100];
    assert!(p99 < Duration::from_millis(50), "p99 hand-off {p99:?}");
}

#[tokio::test]
async fn a_timed_out_or_cancelled_waiter_does_not_block_the_queue() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    let lock = locks.lock("cancel").unwrap();
    let holder = lock.try_acquire().await.unwrap().unwrap();

    let timed_out = lock.acquire(Duration::from_millis(100)).await;
    assert!(
        matches!(timed_out, Err(Error::Timeout { .. })),
        "{timed_out:?}"
    );
    let cancelled = tokio::time::timeout(
        Duration::from_millis(50),
        lock.acquire(Duration::from_secs(30)),
    )
    .await;
    assert!(cancelled.is_err());
    tokio::time::sleep(Duration::from_millis(50)).await; // background withdrawal

    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            lock.acquire(Duration::from_secs(5))
                .await
                .map(|g| (g, Instant::now()))
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let released = Instant::now();
    holder.release().await.unwrap();
    let (guard, at) = waiter.await.unwrap().unwrap();
    assert!(
        at - released < Duration::from_millis(100),
        "{:?}",
        at - released
    );
    let queue: i64 = raw(&server)
        .await
        .llen("seckill:lock:{cancel}:queue")
        .await
        .unwrap();
    assert_eq!(queue, 0);
    guard.release().await.unwrap();
}

#[tokio::test]
async fn a_dropped_guard_releases_in_the_background() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    let lock = locks.lock("drop").unwrap();
    drop(lock.try_acquire().await.unwrap().unwrap());
    let guard = lock.acquire(Duration::from_millis(500)).await.unwrap();
    guard.release().await.unwrap();
}

#[tokio::test]
async fn scripts_reload_after_flush_and_the_client_survives_a_restart() {
    let mut server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    let lock = locks.lock("r").unwrap();
    lock.try_acquire()
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut raw(&server).await)
        .await
        .unwrap();
    lock.try_acquire()
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();

    server.restart().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match lock.try_acquire().await {
            Ok(Some(g)) => break g.release().await.unwrap(),
            Ok(None) => panic!("fresh server: the lock is free"),
            Err(Error::Redis(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[tokio::test]
async fn bad_names_and_leases_are_refused() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    for name in ["", "a{b}", "x y", "a|b", &"n".repeat(513)] {
        assert!(
            matches!(locks.lock(name), Err(Error::Invalid { .. })),
            "{name:?}"
        );
    }
    let short = locks.lock("ok").unwrap().lease(Duration::from_millis(1));
    assert!(matches!(
        short.try_acquire().await,
        Err(Error::Invalid { .. })
    ));
    let endless = locks.lock("ok").unwrap().lease(Duration::MAX);
    assert!(matches!(
        endless.try_acquire().await,
        Err(Error::Invalid { .. })
    ));
    // An absurd wait is capped, not an overflow.
    let held = take(&locks, "busy").await.unwrap();
    let busy = locks.lock("busy").unwrap();
    let forever = busy.acquire(Duration::MAX);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), forever)
            .await
            .is_err()
    );
    held.release().await.unwrap();
    assert!(
        Locks::builder()
            .prefix("a}b")
            .connect(&seckill_redis::Target::server(&server.url()))
            .await
            .is_err()
    );
}
