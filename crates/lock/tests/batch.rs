//! A client's lock, semaphore and read-write lock calls asked at the same
//! time ride one function call on one server (and go one by one on a
//! cluster; a read-write lock's releases always do): each
//! caller must still get its own answer, a grant it alone holds or a
//! refusal it earned, in the order the calls were asked.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use seckill_lock::{Error, Locks};

mod common;

use common::Rig;

/// Tasks of one client, each taking locks in rounds.
const TASKS: usize = 48;
const ROUNDS: usize = 5;

/// Half the tasks take a lock of their own, half share one: every grant
/// is its taker's alone (nobody else inside the shared one with it, its
/// fence above the one before), and each release answers for its own
/// guard.
async fn lock_calls_asked_at_once_are_each_answered_as_their_own(rig: Rig) {
    let locks = rig.locks().await;
    let inside = Arc::new(AtomicU64::new(0));
    let fences = Arc::new(Mutex::new(HashMap::<String, Vec<u64>>::new()));
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let (locks, inside, fences) = (locks.clone(), inside.clone(), fences.clone());
            let name = if i % 2 == 0 {
                format!("own-{i}")
            } else {
                "shared".to_owned()
            };
            tokio::spawn(async move {
                let lock = locks.lock(&name).unwrap();
                for _ in 0..ROUNDS {
                    let guard = lock.acquire(Duration::from_secs(20)).await.unwrap();
                    let shared = name == "shared";
                    if shared {
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    }
                    let fence = guard.fence();
                    fences
                        .lock()
                        .unwrap()
                        .entry(name.clone())
                        .or_default()
                        .push(fence);
                    if shared {
                        tokio::task::yield_now().await;
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                    guard.release().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    for (name, fences) in fences.lock().unwrap().iter() {
        assert_eq!(
            fences.len(),
            ROUNDS * if name == "shared" { TASKS / 2 } else { 1 }
        );
        assert!(
            fences.windows(2).all(|w| w[0] < w[1]),
            "{name}: fences {fences:?}"
        );
    }
}

on_both!(lock_calls_asked_at_once_are_each_answered_as_their_own);

/// Acquires, then releases, asked at once from one task, each kind in a
/// few calls on one server (`check_batched`); half the releases are
/// by guards whose lock was taken from under them: those, and only those,
/// are told they no longer held it.
async fn releases_asked_at_once_tell_each_guard_whether_it_held(rig: Rig) {
    let locks = rig.locks().await;
    drop(common::take(&locks, "warm-up").await);
    let names: Vec<String> = (0..TASKS).map(|i| format!("r-{i}")).collect();
    let before = rig.function_calls().await;
    let taken = join_all(names.iter().map(|name| common::take(&locks, name))).await;
    let guards: Vec<_> = taken.into_iter().map(|g| g.expect("a free lock")).collect();
    let acquire_calls = rig.function_calls().await - before;
    for name in names.iter().step_by(2) {
        common::delete_lock(&rig, name).await;
    }
    let before = rig.function_calls().await;
    let released = join_all(guards.into_iter().map(|guard| guard.release())).await;
    let release_calls = rig.function_calls().await - before;
    for (i, released) in released.into_iter().enumerate() {
        match released {
            Ok(()) => assert!(i % 2 == 1, "guard {i} released a lock taken from it"),
            Err(Error::NotHeld(_)) => assert!(i % 2 == 0, "guard {i} held its lock"),
            Err(e) => panic!("guard {i}: {e}"),
        }
    }
    check_batched(&rig, TASKS as u64, acquire_calls);
    check_batched(&rig, TASKS as u64, release_calls);
}

/// The calls that `requests` asked at once from one task made: on one
/// server a few (the first alone, the rest in batches while it is out; at
/// most 4 calls are out at once, and what queues meanwhile joins the
/// next), on a cluster one each.
fn check_batched(rig: &Rig, requests: u64, calls: u64) {
    eprintln!("{requests} requests in {calls} function calls");
    match rig {
        Rig::Server(_) => assert!(
            calls <= requests / 4,
            "{requests} requests took {calls} calls"
        ),
        Rig::Cluster(_) => assert!(calls >= requests, "{requests} requests took {calls} calls"),
    }
}

on_both!(releases_asked_at_once_tell_each_guard_whether_it_held);

/// Tasks of one client on a semaphore of 4 permits, asked at once: never
/// more than 4 holders, every acquire served, and each release answers for
/// its own permit.
async fn semaphore_calls_asked_at_once_are_each_answered_as_their_own(rig: Rig) {
    let locks: Locks = rig.locks().await;
    let sem = locks.semaphore("batched", 4).unwrap();
    let holders = Arc::new(AtomicU64::new(0));
    let most = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (sem, holders, most) = (sem.clone(), holders.clone(), most.clone());
            tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let mut permits = sem.acquire(1, Duration::from_secs(20)).await.unwrap();
                    let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    holders.fetch_sub(1, Ordering::SeqCst);
                    permits.pop().unwrap().release().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let most = most.load(Ordering::SeqCst);
    assert!((1..=4).contains(&most), "{most} holders at once");

    // Asked at once from one task: exactly the 4 free permits are granted,
    // in few calls on one server, and each returns as its own.
    let before = rig.function_calls().await;
    let asked = join_all((0..TASKS).map(|_| sem.try_acquire(1))).await;
    let granted: Vec<_> = asked
        .into_iter()
        .filter_map(|a| a.unwrap())
        .flatten()
        .collect();
    assert_eq!(granted.len(), 4);
    let returned = join_all(granted.into_iter().map(|permit| permit.release())).await;
    assert!(returned.iter().all(Result::is_ok), "{returned:?}");
    check_batched(&rig, TASKS as u64 + 4, rig.function_calls().await - before);
}

on_both!(semaphore_calls_asked_at_once_are_each_answered_as_their_own);

/// Tasks of one client on one read-write lock, one in eight writing:
/// never a writer beside anyone, every acquire served; and readers asked
/// at once from one task all enter, each with its own fence, in few calls
/// on one server, while a writer is kept out until they leave.
async fn rwlock_calls_asked_at_once_are_each_answered_as_their_own(rig: Rig) {
    let locks: Locks = rig.locks().await;
    let rw = locks.rwlock("batched").unwrap();
    // Readers inside, and writers inside shifted up so one shows apart.
    let inside = Arc::new(AtomicU64::new(0));
    let beside = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let (rw, inside, beside) = (rw.clone(), inside.clone(), beside.clone());
            tokio::spawn(async move {
                let writer = i % 8 == 0;
                let me = if writer { 1 << 32 } else { 1 };
                for _ in 0..ROUNDS {
                    let guard = if writer {
                        rw.write(Duration::from_secs(20)).await.unwrap()
                    } else {
                        rw.read(Duration::from_secs(20)).await.unwrap()
                    };
                    let now = inside.fetch_add(me, Ordering::SeqCst) + me;
                    if now >> 32 > 1 || (now >> 32 == 1 && now & 0xffff_ffff > 0) {
                        beside.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::task::yield_now().await;
                    inside.fetch_sub(me, Ordering::SeqCst);
                    guard.release().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(beside.load(Ordering::SeqCst), 0, "a writer beside someone");

    let before = rig.function_calls().await;
    let readers: Vec<_> = join_all((0..TASKS).map(|_| rw.try_read()))
        .await
        .into_iter()
        .map(|r| r.unwrap().expect("a reader enters beside readers"))
        .collect();
    check_batched(&rig, TASKS as u64, rig.function_calls().await - before);
    let mut fences: Vec<u64> = readers.iter().map(|g| g.fence()).collect();
    fences.sort_unstable();
    fences.dedup();
    assert_eq!(fences.len(), TASKS, "each grant its own fence");
    assert!(
        rw.try_write().await.unwrap().is_none(),
        "a writer beside readers"
    );
    let released = join_all(readers.into_iter().map(|g| g.release())).await;
    assert!(released.iter().all(Result::is_ok), "{released:?}");
    let writer = rw
        .try_write()
        .await
        .unwrap()
        .expect("free once the readers left");
    writer.release().await.unwrap();
}

on_both!(rwlock_calls_asked_at_once_are_each_answered_as_their_own);
