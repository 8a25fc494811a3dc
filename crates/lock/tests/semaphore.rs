//! The semaphore on real servers, tested against the failures leased
//! semaphores are known for: permits leaked by a crashed holder (a child
//! process SIGKILLed while holding them), waiters that miss a release when
//! the notification connection drops (32 waiters, the subscription killed
//! over and over), waiters served out of order, a number of permits that
//! cannot change while in use (or, lowered, leaves a waiter that can never
//! fit blocking the queue), keys left behind. Each failure test runs on
//! one server and on a cluster (`on_both!`).

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use seckill_lock::{Error, Locks, RECHECK};
use seckill_redis::Target;
use seckill_testkit::RedisServer;

mod common;

use common::Rig;

#[tokio::test]
async fn permits_are_counted_and_returned() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    let sem = locks.semaphore("s", 3).unwrap();
    let two = sem.try_acquire(2).await.unwrap().expect("2 of 3 free");
    assert_eq!(two.len(), 2);
    assert!(sem.try_acquire(2).await.unwrap().is_none(), "only 1 left");
    let one = sem.try_acquire(1).await.unwrap().expect("1 left");
    assert!(sem.try_acquire(1).await.unwrap().is_none());
    for permit in two {
        permit.release().await.unwrap();
    }
    let again = sem.try_acquire(2).await.unwrap().expect("2 returned");
    drop(again); // released in the background
    drop(one);
    let deadline = Instant::now() + Duration::from_secs(2);
    while sem.try_acquire(3).await.unwrap().is_none() {
        assert!(Instant::now() < deadline, "dropped permits never returned");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // More than the semaphore has is refused at once, as is none.
    for n in [0, 4] {
        let e = sem.try_acquire(n).await.unwrap_err();
        assert!(matches!(e, Error::Invalid { .. }), "{e}");
    }
    assert!(locks.semaphore("s", 0).is_err());
}

type Order = Arc<std::sync::Mutex<Vec<&'static str>>>;

/// Waiters that queue on `sem` one after the other (50 ms apart), each
/// named and wanting its number of permits for up to 5 s; each writes its
/// name into the order once served.
async fn queue_in_turn(
    sem: &seckill_lock::Semaphore,
    waiters: [(&'static str, u64); 2],
) -> (
    Vec<tokio::task::JoinHandle<Vec<seckill_lock::Permit>>>,
    Order,
) {
    let order = Order::default();
    let mut handles = Vec::new();
    for (who, n) in waiters {
        let (sem, order) = (sem.clone(), order.clone());
        handles.push(tokio::spawn(async move {
            let permits = sem.acquire(n, Duration::from_secs(5)).await.unwrap();
            order.lock().unwrap().push(who);
            permits
        }));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (handles, order)
}

/// Waiters are served in arrival order, a large request included: a later
/// waiter wanting one permit does not pass an earlier one wanting two.
async fn waiters_are_served_in_arrival_order(rig: Rig) {
    let locks = rig.locks().await;
    let sem = locks.semaphore("fifo", 2).unwrap();
    let mut held = sem.try_acquire(2).await.unwrap().unwrap();
    let (mut waiters, order) = queue_in_turn(&sem, [("big", 2), ("small", 1)]).await;
    held.pop().unwrap().release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(order.lock().unwrap().is_empty(), "small passed big");
    held.pop().unwrap().release().await.unwrap();
    let big = waiters.remove(0).await.unwrap();
    assert_eq!(*order.lock().unwrap(), ["big"]);
    for permit in big {
        permit.release().await.unwrap();
    }
    waiters.remove(0).await.unwrap();
    assert_eq!(*order.lock().unwrap(), ["big", "small"]);
}

on_both!(waiters_are_served_in_arrival_order);

/// Run by `a_killed_holders_permits_return_within_their_lease` as a child
/// process: takes two permits, says so, and waits to be killed.
#[tokio::test]
#[ignore = "helper process for another test"]
async fn child_permit_holder() {
    let Ok(url) = std::env::var("SECKILL_TEST_CHILD_URL") else {
        return;
    };
    let locks = common::connect(&url).await;
    let sem = locks
        .semaphore("crash", 2)
        .unwrap()
        .lease(Duration::from_millis(500))
        .watchdog(true);
    let permits = sem.try_acquire(2).await.unwrap().unwrap();
    println!("ACQUIRED");
    let mut lost = permits[0].lost();
    tokio::select! {
        reason = lost.wait() => println!("LOST {reason:?}"),
        () = tokio::time::sleep(Duration::from_secs(60)) => {}
    }
}

/// A holder frozen (SIGSTOP) past its lease: its permits go to another,
/// and once it runs again its lost signal fires before it can believe
/// it still holds them.
async fn a_frozen_holder_loses_its_permits_and_is_told(rig: Rig) {
    let (mut child, mut lines) = common::child("child_permit_holder", &rig.spec(), &[]);
    assert!(
        lines.any(|l| l.is_ok_and(|l| l == "ACQUIRED")),
        "child acquired"
    );
    let pid = child.id().to_string();
    let signal = |s: &str| {
        assert!(
            Command::new("kill")
                .args([s, &pid])
                .status()
                .unwrap()
                .success()
        );
    };
    signal("-STOP");
    let locks = rig.locks().await;
    let sem = locks.semaphore("crash", 2).unwrap();
    let taken = sem.acquire(2, Duration::from_secs(5)).await.unwrap();
    signal("-CONT");
    let said = tokio::task::spawn_blocking(move || lines.find_map(Result::ok))
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(said == "LOST Expired" || said == "LOST Taken", "{said}");
    assert!(!taken[0].is_lost());
    child.kill().unwrap();
    child.wait().unwrap();
}

on_both!(a_frozen_holder_loses_its_permits_and_is_told);

async fn a_killed_holders_permits_return_within_their_lease(rig: Rig) {
    let (mut child, mut lines) = common::child("child_permit_holder", &rig.spec(), &[]);
    assert!(
        lines.any(|l| l.is_ok_and(|l| l == "ACQUIRED")),
        "child acquired"
    );
    let locks = rig.locks().await;
    let sem = locks.semaphore("crash", 2).unwrap();
    // Held and renewed by the child's watchdog past its lease.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(sem.try_acquire(1).await.unwrap().is_none());
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = Instant::now();
    let permits = sem.acquire(2, Duration::from_secs(5)).await.unwrap();
    let waited = killed.elapsed();
    assert_eq!(permits.len(), 2);
    // The lease (500 ms) and at most one re-check.
    assert!(
        waited <= Duration::from_millis(500) + RECHECK + Duration::from_millis(150),
        "{waited:?}"
    );
}

on_both!(a_killed_holders_permits_return_within_their_lease);

/// 32 waiters in a chain of hand-offs while the client's notification
/// subscription is killed every 20 ms: notifications are lost, and no
/// waiter sleeps past its grant longer than the bounded re-check.
async fn lost_notifications_delay_a_waiter_by_the_recheck_at_most(rig: Rig) {
    let locks = rig.locks().await;
    let sem = locks.semaphore("chain", 1).unwrap();
    let mut first = sem.try_acquire(1).await.unwrap().unwrap();
    let waiters: Vec<_> = (0..32)
        .map(|_| {
            let sem = sem.clone();
            tokio::spawn(async move {
                let mut permits = sem.acquire(1, Duration::from_secs(30)).await.unwrap();
                let got = Instant::now();
                permits.pop().unwrap().release().await.unwrap();
                (got, Instant::now())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rig = Arc::new(rig);
    let killer = {
        let rig = rig.clone();
        tokio::spawn(async move {
            loop {
                rig.kill_pubsub().await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let released = Instant::now();
    first.pop().unwrap().release().await.unwrap();
    let mut chain = Vec::new();
    for waiter in waiters {
        chain.push(waiter.await.unwrap());
    }
    killer.abort();
    chain.sort();
    // Each grant follows the release before it by at most the re-check.
    let mut previous = released;
    let mut slowest = Duration::ZERO;
    for (got, released) in chain {
        slowest = slowest.max(got.saturating_duration_since(previous));
        previous = released;
    }
    eprintln!("slowest hand-off with notifications lost: {slowest:?}");
    assert!(
        slowest <= RECHECK + Duration::from_millis(150),
        "{slowest:?}"
    );
}

on_both!(lost_notifications_delay_a_waiter_by_the_recheck_at_most);

/// The number of permits changed live: raising it serves the waiters at
/// once; every client sees it; it goes with the semaphore's keys.
async fn the_number_of_permits_changes_live(rig: Rig) {
    let locks = rig.locks().await;
    let sem = locks
        .semaphore("live", 1)
        .unwrap()
        .lease(Duration::from_millis(300));
    let held = sem.try_acquire(1).await.unwrap().unwrap();
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let sem = sem.clone();
            tokio::spawn(async move { sem.acquire(1, Duration::from_secs(5)).await.unwrap() })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Another client (another process's view: its own number is 1).
    let other = rig.locks().await;
    let held_now = other
        .semaphore("live", 1)
        .unwrap()
        .lease(Duration::from_millis(300))
        .set_permits(4)
        .await
        .unwrap();
    assert_eq!(held_now, 4, "the three waiters were served at once");
    let started = Instant::now();
    for waiter in waiters {
        waiter.await.unwrap();
    }
    assert!(started.elapsed() < Duration::from_millis(100));
    drop(held);
    // Once every lease ended (and the setting's own lease, 300 ms),
    // nothing is left, the setting included.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(rig.live_keys().await, Vec::<String>::new());
}

on_both!(the_number_of_permits_changes_live);

/// 100,000 acquire/release pairs over 1,000 names, some permits left to
/// expire: no key is left once the leases end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_is_left_once_leases_end() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    common::on_1000_names(
        &locks,
        "s",
        100_000 / 2 / 64 + 1,
        |locks, name, i| async move {
            let sem = locks
                .semaphore(&name, 2)
                .unwrap()
                .lease(Duration::from_millis(300));
            if let Ok(mut permits) = sem.acquire(1, Duration::from_millis(100)).await {
                // One in ten is left to its lease, as a crash would.
                if i % 10 != 0 {
                    permits.pop().unwrap().release().await.unwrap();
                } else {
                    std::mem::forget(permits);
                }
            }
            0
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        common::live_keys(&server.url()).await,
        Vec::<String>::new(),
        "keys left by idle semaphores"
    );
}

#[test]
fn redlock_has_no_semaphore() {
    let locks = Locks::builder()
        .redlock(vec![common::client("redis://127.0.0.1:1/")])
        .unwrap();
    let e = locks.semaphore("s", 1).unwrap_err().to_string();
    assert!(e.contains("not Redlock"), "{e}");
}

/// On a cluster the semaphore lives on its name's master; when that master
/// is SIGKILLed, the permits its replica had survive the failover, and
/// waiters on other nodes' subscriptions are still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_permits_survive_a_failover_once_replicated() {
    let mut cluster = seckill_testkit::RedisCluster::start(3, 1).unwrap();
    let target = Target::cluster(&cluster.addresses().join(",")).unwrap();
    let locks = Locks::new(&target).await.unwrap();
    let sem = locks
        .semaphore("c", 3)
        .unwrap()
        .lease(Duration::from_secs(20));
    let held = sem.try_acquire(2).await.unwrap().unwrap();
    // Give the replica the grant (replication is asynchronous: a grant
    // made the instant before the kill can be lost with the master).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let slot = cluster.slot_of("seckill:lock:sem:{c}:holders").unwrap();
    let master = cluster.master_of(slot).unwrap();
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.kill_master(master).unwrap();
        cluster
    })
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let one = loop {
        match sem.try_acquire(1).await {
            Ok(Some(one)) => break one,
            Ok(None) => panic!("the permits held before the failover were not kept"),
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert!(sem.try_acquire(1).await.unwrap().is_none(), "3 held of 3");
    // A waiter is served by a release on the new master.
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire(1, Duration::from_secs(5)).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(one);
    waiter.await.unwrap();
    drop((held, cluster));
}

/// A waiter alone in the queue, re-checking (which takes its entry out
/// and puts it back when it still does not fit), keeps the queue alive as
/// long as it waits: no key without an expiry (one that would stay for
/// good if every client died), and a later waiter that gives up sooner
/// does not take the queue with it.
async fn a_lone_waiter_keeps_the_queue_as_long_as_it_waits(rig: Rig) {
    let locks = rig.locks().await;
    let sem = locks
        .semaphore("lone", 1)
        .unwrap()
        .lease(Duration::from_secs(10));
    let held = sem.try_acquire(1).await.unwrap().unwrap();
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire(1, Duration::from_secs(6)).await.unwrap() })
    };
    // It has re-checked at least once.
    tokio::time::sleep(RECHECK * 2).await;
    let ttls = |least: i64| {
        let rig = &rig;
        async move {
            let mut conn = common::target(&rig.spec()).connect().await.unwrap();
            for key in rig.live_keys().await {
                let ttl: i64 = redis::cmd("PTTL")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                assert!(ttl > least, "{key}: expires in {ttl} ms");
            }
        }
    };
    ttls(0).await;
    let e = sem
        .acquire(1, Duration::from_millis(100))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    // Past the later waiter's wait and its margin: the lone waiter's
    // queue still has most of its 6 s to live.
    tokio::time::sleep(Duration::from_millis(400)).await;
    ttls(2_000).await;
    held.into_iter().next().unwrap().release().await.unwrap();
    let started = Instant::now();
    waiter.await.unwrap();
    assert!(started.elapsed() < Duration::from_millis(200));
}

on_both!(a_lone_waiter_keeps_the_queue_as_long_as_it_waits);

/// A number of permits set live lasts as long as the permits a release
/// hands on: lowered to 1, then a waiter served by a release holds past
/// the setting's own lease, and another client (whose own number is 5)
/// still gets none while it holds.
async fn a_live_number_lasts_as_long_as_the_permits_handed_on(rig: Rig) {
    let lease = Duration::from_millis(3_000);
    let locks = rig.locks().await;
    let sem = locks
        .semaphore("kept", 5)
        .unwrap()
        .lease(lease)
        .watchdog(false);
    let other = rig
        .locks()
        .await
        .semaphore("kept", 5)
        .unwrap()
        .lease(lease)
        .watchdog(false);
    sem.set_permits(1).await.unwrap();
    let held = sem.try_acquire(1).await.unwrap().unwrap();
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire(1, Duration::from_millis(1_500)).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    held.into_iter().next().unwrap().release().await.unwrap();
    let served = Instant::now();
    let permits = waiter.await.unwrap();
    // The waiter holds until `served` + 3 s; the setting was kept, when it
    // was set and when the waiter queued, for 3 s from the start: about
    // `served` + 2 s. Asked between, another client's own number (5)
    // would let it in.
    tokio::time::sleep(Duration::from_millis(2_500).saturating_sub(served.elapsed())).await;
    let got = other.try_acquire(1).await.unwrap();
    assert!(
        served.elapsed() < lease,
        "too slow to tell: {:?}",
        served.elapsed()
    );
    assert!(got.is_none(), "a second permit beside the one handed on");
    drop(permits);
}

on_both!(a_live_number_lasts_as_long_as_the_permits_handed_on);

/// The number of permits lowered below what the oldest waiter wants: that
/// waiter is refused (it would never fit), and the one behind it, which
/// fits, is served by the next release instead of waiting out the first
/// one's deadline. A new request for too many is refused at once.
async fn a_waiter_wanting_more_than_a_lowered_number_is_refused(rig: Rig) {
    let locks = rig.locks().await;
    let sem = locks.semaphore("shrink", 4).unwrap();
    let mut held = sem.try_acquire(2).await.unwrap().unwrap();
    let big = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire(3, Duration::from_secs(5)).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let small = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire(1, Duration::from_secs(5)).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Another client lowers it to 2 (this one's own number stays 4).
    let other = rig.locks().await.semaphore("shrink", 4).unwrap();
    let lowered = Instant::now();
    other.set_permits(2).await.unwrap();
    let e = big.await.unwrap().unwrap_err();
    assert!(matches!(e, Error::Invalid { .. }), "{e}");
    assert!(lowered.elapsed() < RECHECK + Duration::from_millis(200));
    let e = sem.try_acquire(3).await.unwrap_err();
    assert!(matches!(e, Error::Invalid { .. }), "{e}");
    held.pop().unwrap().release().await.unwrap();
    let released = Instant::now();
    small.await.unwrap().unwrap();
    assert!(released.elapsed() < Duration::from_millis(500));
}

on_both!(a_waiter_wanting_more_than_a_lowered_number_is_refused);

/// Clients whose own numbers differ (5 and 2): a release by the one of 2
/// does not take the place of the other's waiter wanting 4, which it
/// counts as never fitting: the waiter behind it is not served first.
async fn a_waiter_keeps_its_place_whatever_number_the_releaser_has(rig: Rig) {
    let (five, two) = (rig.locks().await, rig.locks().await);
    let sem = five.semaphore("own", 5).unwrap();
    let mut held = two
        .semaphore("own", 2)
        .unwrap()
        .try_acquire(2)
        .await
        .unwrap()
        .unwrap();
    let (waiters, order) = queue_in_turn(&sem, [("four", 4), ("one", 1)]).await;
    held.pop().unwrap().release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(order.lock().unwrap().is_empty(), "one passed four");
    held.pop().unwrap().release().await.unwrap();
    // Both served: four by its own re-check, one right after it (their
    // order of arrival here races between two connections).
    for waiter in waiters {
        waiter.await.unwrap();
    }
    assert_eq!(order.lock().unwrap().len(), 2);
}

on_both!(a_waiter_keeps_its_place_whatever_number_the_releaser_has);
