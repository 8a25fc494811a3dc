//! The count-down latch on real servers: waiters woken when the count
//! reaches zero (by notification, and by the re-check when the
//! subscription is killed, the latch set again or not), a count that
//! cannot be set twice, a timeout, no key left by latches, finished or
//! abandoned, and a count-down sent twice counted once; the wake-ups on a
//! cluster too (`on_both!`).

use std::time::{Duration, Instant};

use seckill_lock::{Error, RECHECK};
use seckill_redis::Target;
use seckill_testkit::RedisServer;

mod common;

use common::Rig;

async fn waiters_wake_when_the_count_reaches_zero(rig: Rig) {
    let locks = rig.locks().await;
    let latch = locks.latch("warm").unwrap();
    assert!(latch.try_set_count(3).await.unwrap());
    assert!(
        !latch.try_set_count(5).await.unwrap(),
        "a running count is kept"
    );
    let waiters: Vec<_> = (0..8)
        .map(|_| {
            let latch = latch.clone();
            tokio::spawn(async move {
                latch.wait(Duration::from_secs(5)).await.unwrap();
                Instant::now()
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Another client counts down.
    let other = rig.locks().await.latch("warm").unwrap();
    assert_eq!(other.count_down().await.unwrap(), 2);
    assert_eq!(other.count_down().await.unwrap(), 1);
    assert_eq!(latch.count().await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(waiters.iter().all(|w| !w.is_finished()), "woke before zero");
    let opened = Instant::now();
    assert_eq!(other.count_down().await.unwrap(), 0);
    for waiter in waiters {
        let woke = waiter.await.unwrap();
        // Told by the last count-down, not found by a re-check.
        assert!(
            woke - opened < Duration::from_millis(100),
            "{:?}",
            woke - opened
        );
    }
    // Open: waiting passes at once, counting down stays at zero, and
    // nothing is left in Redis a second later (the told waiters' marks).
    latch.wait(Duration::from_millis(1)).await.unwrap();
    assert_eq!(latch.count_down().await.unwrap(), 0);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(rig.live_keys().await.len(), 0);
}

on_both!(waiters_wake_when_the_count_reaches_zero);

/// A waiter whose message that the latch opened is lost wakes by its
/// re-check, within it; with `set_again`, the latch is set again before
/// the waiter looks (the re-check finds that the opening forgot it).
async fn a_lost_opening_costs_the_recheck_at_most(rig: Rig, name: &str, set_again: bool) {
    let locks = rig.locks().await;
    let latch = locks.latch(name).unwrap();
    latch.try_set_count(1).await.unwrap();
    let waiter = {
        let latch = latch.clone();
        tokio::spawn(async move {
            latch.wait(Duration::from_secs(5)).await.unwrap();
            Instant::now()
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(rig.kill_pubsub().await, 1, "one subscription per client");
    let opened = Instant::now();
    latch.count_down().await.unwrap();
    if set_again {
        assert!(latch.try_set_count(3).await.unwrap(), "open, so set again");
    }
    let woke = waiter.await.unwrap();
    assert!(
        woke - opened <= RECHECK + Duration::from_millis(100),
        "{:?}",
        woke - opened
    );
}

async fn a_lost_notification_costs_the_recheck_at_most(rig: Rig) {
    a_lost_opening_costs_the_recheck_at_most(rig, "lost", false).await;
}

on_both!(a_lost_notification_costs_the_recheck_at_most);

#[tokio::test]
async fn a_wait_times_out_and_a_count_lasts_its_lease_at_most() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    let latch = locks
        .latch("slow")
        .unwrap()
        .lease(Duration::from_millis(300));
    latch.try_set_count(2).await.unwrap();
    let e = latch.wait(Duration::from_millis(50)).await.unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    assert!(latch.try_set_count(0).await.is_err());
    // Nobody finishes it: it opens when its lease ends, and keeps nothing.
    tokio::time::sleep(Duration::from_millis(400)).await;
    latch.wait(Duration::from_millis(1)).await.unwrap();
    assert_eq!(common::live_keys(&server.url()).await.len(), 0);
}

/// 100,000 operations over 1,000 latches, half of them never finished: no
/// key is left once their leases end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_is_left_once_leases_end() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    common::on_1000_names(
        &locks,
        "l",
        100_000 / 2 / 64 + 1,
        |locks, name, _| async move {
            let latch = locks
                .latch(&name)
                .unwrap()
                .lease(Duration::from_millis(300));
            latch.try_set_count(2).await.unwrap();
            latch.count_down().await.unwrap();
            0
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let left = common::live_keys(&server.url()).await;
    let mut conn = Target::server(&server.url()).connect().await.unwrap();
    let mut shown = Vec::new();
    for key in left.iter().take(3) {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let value: Option<String> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        shown.push(format!("{key} ttl {ttl} = {value:?}"));
    }
    assert!(
        left.is_empty(),
        "{} keys left by latches: {shown:?}",
        left.len()
    );
}

async fn a_waiter_told_nothing_wakes_though_the_latch_was_set_again(rig: Rig) {
    a_lost_opening_costs_the_recheck_at_most(rig, "again", true).await;
}

on_both!(a_waiter_told_nothing_wakes_though_the_latch_was_set_again);

/// A count-down sent twice with one token (as a cluster's client resends
/// after a dropped connection) counts once; another token counts again.
#[tokio::test]
async fn a_count_down_sent_twice_counts_once() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    // Loads the functions.
    locks.latch("load").unwrap().count_down().await.unwrap();
    let count_down = seckill_testkit::function_named(server.port(), "latch_count_down_")
        .unwrap()
        .expect("latch_count_down is loaded");
    let mut conn = Target::server(&server.url()).connect().await.unwrap();
    let keys = ["t:{twice}:count", "t:{twice}:waiters", "t:{twice}:counted"];
    let () = redis::cmd("SET")
        .arg(keys[0])
        .arg(3)
        .arg("PX")
        .arg(10_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut left = Vec::new();
    for token in ["a", "a", "b", "b", "c", "c"] {
        let n: i64 = redis::cmd("FCALL")
            .arg(&count_down)
            .arg(3)
            .arg(&keys[..])
            .arg(token)
            .query_async(&mut conn)
            .await
            .unwrap();
        left.push(n);
    }
    assert_eq!(left, [2, 2, 1, 1, 0, 0]);
    // Open, it keeps nothing, the tokens counted included.
    assert_eq!(common::live_keys(&server.url()).await.len(), 0);
}

/// A waiter's record gone for another reason than an opening (it expired,
/// or a failover lost it) is no opening: the waiter waits on, to its
/// timeout, while the count stands.
async fn a_waiter_whose_record_is_gone_waits_on(rig: Rig) {
    let locks = rig.locks().await;
    let latch = locks.latch("gone").unwrap();
    latch.try_set_count(1).await.unwrap();
    let waiter = {
        let latch = latch.clone();
        tokio::spawn(async move { latch.wait(Duration::from_millis(800)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let waiters = rig
        .live_keys()
        .await
        .into_iter()
        .find(|k| k.contains("{gone}") && k.ends_with(":waiters"))
        .expect("the waiter is registered");
    let mut conn = common::target(&rig.spec()).connect().await.unwrap();
    let () = redis::cmd("DEL")
        .arg(&waiters)
        .query_async(&mut conn)
        .await
        .unwrap();
    let e = waiter.await.unwrap().unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    assert_eq!(latch.count().await.unwrap(), 1);
}

on_both!(a_waiter_whose_record_is_gone_waits_on);
