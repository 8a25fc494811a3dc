//! The single-instance lock on a real Redis Cluster (3 masters, 1 replica
//! each): FIFO hand-off on every master, the watchdog, and drill 15 of
//! docs/reliability.md, a fence refusing a stale holder after its master
//! failed over (its figures printed for `scripts/drills.sh`).

use std::time::{Duration, Instant};

use seckill_lock::{Error, Locks};
use seckill_redis::Target;
use seckill_testkit::RedisCluster;

fn target(cluster: &RedisCluster) -> Target {
    Target::cluster(&cluster.addresses().join(",")).unwrap()
}

/// One lock name per master: names whose hash tag lands on each.
fn one_name_per_master(cluster: &RedisCluster) -> Vec<String> {
    cluster
        .one_id_per_master((0..1000).map(|i| format!("l{i}")), |n| {
            format!("seckill:lock:{{{n}}}")
        })
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_on_every_master_hand_off_in_arrival_order() {
    let cluster = RedisCluster::start(3, 1).unwrap();
    let target = target(&cluster);
    // Two clients, as two processes would be: hand-offs cross between them.
    let clients = [
        Locks::new(&target).await.unwrap(),
        Locks::new(&target).await.unwrap(),
    ];
    const WAITERS: u64 = 6;
    for name in one_name_per_master(&cluster) {
        // A 10 s lease: a waiter that missed its notification would sleep
        // at least 1 s before asking, so the chain below would take > 6 s.
        let lease = Duration::from_secs(10);
        let holder = clients[0].lock(&name).unwrap().lease(lease);
        let first = holder
            .try_acquire()
            .await
            .unwrap()
            .expect("the lock is free");
        let mut waiters = Vec::new();
        for i in 0..WAITERS {
            let lock = clients[(i % 2) as usize].lock(&name).unwrap().lease(lease);
            waiters.push(tokio::spawn(async move {
                let guard = lock.acquire(Duration::from_secs(20)).await.unwrap();
                let fence = guard.fence();
                tokio::time::sleep(Duration::from_millis(5)).await;
                guard.release().await.unwrap();
                fence
            }));
            // Arrival order is queue order.
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        let first_fence = first.fence();
        let released = Instant::now();
        first.release().await.unwrap();
        let mut fences = Vec::new();
        for waiter in waiters {
            fences.push(waiter.await.unwrap());
        }
        let chain = released.elapsed();
        // Fences rise with each grant: in arrival order, they rise in the
        // order the waiters came.
        assert!(
            fences[0] > first_fence && fences.windows(2).all(|w| w[0] < w[1]),
            "{name}: served out of arrival order: {first_fence} then {fences:?}"
        );
        assert!(
            chain < Duration::from_secs(3),
            "{name}: {WAITERS} hand-offs took {chain:?}; notifications are not arriving"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_a_short_lease_alive_on_a_cluster() {
    let cluster = RedisCluster::start(3, 1).unwrap();
    let locks = Locks::new(&target(&cluster)).await.unwrap();
    let name = &one_name_per_master(&cluster)[1];
    let lock = locks
        .lock(name)
        .unwrap()
        .lease(Duration::from_millis(300))
        .watchdog(true);
    let guard = lock.try_acquire().await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(!guard.is_lost(), "the watchdog let a held lease run out");
    assert!(lock.try_acquire().await.unwrap().is_none());
    guard.release().await.unwrap();
    assert!(lock.try_acquire().await.unwrap().is_some());
}

/// A fenced write: stores `value` only if `fence` is at least the highest
/// fence the resource has seen. Answers 1 when written, 0 when refused.
async fn fenced_write(target: &Target, fence: u64, value: &str) -> i64 {
    let mut conn = target.connect().await.unwrap();
    redis::cmd("EVAL")
        .arg(
            "local seen = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0') \
             if tonumber(ARGV[1]) < seen then return 0 end \
             redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2]) return 1",
        )
        .arg(1)
        .arg("resource")
        .arg(fence)
        .arg(value)
        .query_async(&mut conn)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drill_15_the_fence_refuses_a_stale_holder_after_its_master_fails_over() {
    let mut cluster = RedisCluster::start(3, 1).unwrap();
    let target = target(&cluster);
    let locks = Locks::new(&target).await.unwrap();
    let name = one_name_per_master(&cluster)[0].clone();
    let master = cluster
        .master_of(cluster.slot_of(&format!("{{{name}}}")).unwrap())
        .unwrap();
    let lock = locks.lock(&name).unwrap().lease(Duration::from_secs(1));

    let stale = lock.try_acquire().await.unwrap().expect("the lock is free");
    assert_eq!(fenced_write(&target, stale.fence(), "first").await, 1);
    // Let replication carry the grant over before the crash (what a
    // failover cannot keep is measured by the purchase drills instead).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let killed = Instant::now();
    let promoted = cluster.kill_master(master).unwrap();
    let failover = killed.elapsed();
    assert_ne!(promoted, master);

    // The stale holder stalls past its lease; another takes the lock on
    // the promoted replica.
    let fresh = lock
        .clone()
        .lease(Duration::from_secs(30))
        .acquire(Duration::from_secs(10))
        .await
        .unwrap();
    assert!(
        fresh.fence() > stale.fence(),
        "fence {} after the failover is not above the stale {}",
        fresh.fence(),
        stale.fence()
    );
    assert_eq!(fenced_write(&target, fresh.fence(), "fresh").await, 1);
    let stale_write = fenced_write(&target, stale.fence(), "stale").await;
    println!(
        "drill-figures {{\"drill\":\"15\",\"figures\":{{\"stale_fence\":{},\"fresh_fence\":{},\"stale_write_refused\":{},\"failover_ms\":{}}}}}",
        stale.fence(),
        fresh.fence(),
        stale_write == 0,
        failover.as_millis()
    );
    assert_eq!(stale_write, 0, "the stale holder's write went through");
    assert!(matches!(stale.release().await, Err(Error::NotHeld(_))));
    let mut conn = target.connect().await.unwrap();
    let value: String = redis::cmd("HGET")
        .arg("resource")
        .arg("value")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value, "fresh");
    fresh.release().await.unwrap();
}
