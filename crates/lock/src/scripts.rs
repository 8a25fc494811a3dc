use std::sync::LazyLock;

use seckill_redis::{Conn, Library};

use crate::keys::Keys;

/// The lock's Lua (`src/lua/*.lua`) as one Redis Functions library, loaded
/// by the first call that finds it missing. A library is replicated and
/// saved with the data, so after a failover the promoted replica already
/// has it, and no call depends on every node being reachable.
pub(crate) static LIBRARY: LazyLock<Library> = LazyLock::new(|| {
    // Each family's head (its keys, its helpers) is made once at load and
    // shared by the family's functions (see `Builder::group`).
    Library::builder("seckill_lock")
        .prelude(include_str!("lua/queue.lua"))
        .group(include_str!("lua/common.lua"), |lock| {
            lock.function("acquire", &[include_str!("lua/acquire.lua")])
                .function("release", &[include_str!("lua/release.lua")])
                .function("acquire_many", &[include_str!("lua/acquire_many.lua")])
                .function("release_many", &[include_str!("lua/release_many.lua")])
                .function("extend", &[include_str!("lua/extend.lua")])
                .function("poll", &[include_str!("lua/poll.lua")])
                .function("withdraw", &[include_str!("lua/withdraw.lua")])
                .function("raise_fence", &[include_str!("lua/raise_fence.lua")])
        })
        .function("rate", &[include_str!("lua/rate.lua")])
        .group(include_str!("lua/sem_common.lua"), |sem| {
            sem.function("sem_acquire", &[include_str!("lua/sem_acquire.lua")])
                .function("sem_poll", &[include_str!("lua/sem_poll.lua")])
                .function("sem_release", &[include_str!("lua/sem_release.lua")])
                .function(
                    "sem_acquire_many",
                    &[include_str!("lua/sem_acquire_many.lua")],
                )
                .function(
                    "sem_release_many",
                    &[include_str!("lua/sem_release_many.lua")],
                )
                .function("sem_extend", &[include_str!("lua/sem_extend.lua")])
                .function("sem_withdraw", &[include_str!("lua/sem_withdraw.lua")])
                .function("sem_set_limit", &[include_str!("lua/sem_set_limit.lua")])
        })
        .group(include_str!("lua/latch_common.lua"), |latch| {
            latch
                .function("latch_set", &[include_str!("lua/latch_set.lua")])
                .function(
                    "latch_count_down",
                    &[include_str!("lua/latch_count_down.lua")],
                )
                .function("latch_wait", &[include_str!("lua/latch_wait.lua")])
                .function("latch_withdraw", &[include_str!("lua/latch_withdraw.lua")])
        })
        .group(include_str!("lua/rw_common.lua"), |rw| {
            rw.function("rw_acquire", &[include_str!("lua/rw_acquire.lua")])
                .function("rw_poll", &[include_str!("lua/rw_poll.lua")])
                .function("rw_release", &[include_str!("lua/rw_release.lua")])
                .function(
                    "rw_acquire_many",
                    &[include_str!("lua/rw_acquire_many.lua")],
                )
                .function("rw_extend", &[include_str!("lua/rw_extend.lua")])
                .function("rw_withdraw", &[include_str!("lua/rw_withdraw.lua")])
        })
        .build()
});

/// Runs the lock's function `name` on `keys` with `args` over `conn`.
pub(crate) async fn run<T: redis::FromRedisValue, A: redis::ToRedisArgs>(
    conn: &mut Conn,
    name: &str,
    keys: &Keys,
    args: &[A],
) -> redis::RedisResult<T> {
    call(conn, name, &keys.all[..], args).await
}

/// Runs function `name` of the library on any `keys` with `args`.
pub(crate) async fn call<T, K, A>(
    conn: &mut Conn,
    name: &str,
    keys: &[K],
    args: &[A],
) -> redis::RedisResult<T>
where
    T: redis::FromRedisValue,
    K: redis::ToRedisArgs,
    A: redis::ToRedisArgs,
{
    let mut call = LIBRARY.call(name, keys);
    for arg in args {
        call.arg(arg);
    }
    call.invoke(conn).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A semaphore's keys, in the order its scripts take them.
    const SEMAPHORE: [&str; 4] = ["holders", "queue", "waiters", "limit"];

    /// The read-write lock's keys, in the order its scripts take them
    /// (rwlock.rs).
    const RW: [&str; 6] = ["readers", "writer", "fence", "queue", "waiters", "granted"];

    /// The keys `parts` of a `family` ("sem", "rw") primitive `name`, under
    /// the prefix "t", as semaphore.rs and rwlock.rs name them.
    fn family_keys(family: &str, name: &str, parts: &[&str]) -> Vec<String> {
        parts
            .iter()
            .map(|k| format!("t:{family}:{{{name}}}:{k}"))
            .collect()
    }

    /// A private redis-server, and a connection to it.
    async fn scratch() -> (seckill_testkit::RedisServer, Conn) {
        let server = seckill_testkit::RedisServer::start().unwrap();
        let conn = seckill_redis::Target::server(&server.url())
            .connect()
            .await
            .unwrap();
        (server, conn)
    }

    /// The cluster client sends a command again after a dropped connection,
    /// so `acquire` may run twice: the second run answers the grant the
    /// first made, and does not queue its holder behind itself.
    #[tokio::test]
    async fn an_acquire_sent_twice_answers_its_own_grant() {
        let (_server, mut conn) = scratch().await;
        let keys = Keys::new("t", "twice").unwrap();
        for wait in ["0", "1000"] {
            let args = ["token", "5000", wait, "channel"];
            let first: (i64, i64) = run(&mut conn, "acquire", &keys, &args).await.unwrap();
            let again: (i64, i64) = run(&mut conn, "acquire", &keys, &args).await.unwrap();
            assert_eq!(first.0, 1);
            assert_eq!(again, (1, first.1), "wait {wait}");
            let queued: i64 = redis::cmd("LLEN")
                .arg(&keys.all[2])
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(queued, 0, "the holder queued behind itself");
            let released: i64 = run(&mut conn, "release", &keys, &["token"]).await.unwrap();
            assert_eq!(released, 1);
        }
    }

    /// The same for the semaphore: sent twice with permits to spare, the
    /// second run renews the same permits instead of taking more; sent
    /// twice when the first took the last permits, it answers that grant
    /// instead of queueing.
    #[tokio::test]
    async fn a_semaphore_acquire_sent_twice_takes_its_permits_once() {
        let (_server, mut conn) = scratch().await;
        let keys = family_keys("sem", "twice", &SEMAPHORE);
        let count = |mut conn: Conn, key: String, cmd: &'static str| async move {
            redis::cmd(cmd)
                .arg(key)
                .query_async::<i64>(&mut conn)
                .await
                .unwrap()
        };
        for permits in ["4", "2"] {
            let args = ["token", "2", "5000", "1000", "channel", permits];
            let first: Vec<i64> = call(&mut conn, "sem_acquire", &keys, &args).await.unwrap();
            let again: Vec<i64> = call(&mut conn, "sem_acquire", &keys, &args).await.unwrap();
            assert_eq!((first[0], again[0]), (1, 1), "permits {permits}");
            assert_eq!(count(conn.clone(), keys[0].clone(), "ZCARD").await, 2);
            assert_eq!(count(conn.clone(), keys[1].clone(), "LLEN").await, 0);
            for i in 1..=2 {
                let permit = format!("token:{i}");
                let returned: i64 = call(&mut conn, "sem_release", &keys, &[&permit, permits])
                    .await
                    .unwrap();
                assert_eq!(returned, 1);
            }
        }
    }

    /// The server's clock in ms.
    async fn server_ms(conn: &mut Conn) -> u64 {
        let (s, us): (u64, u64) = redis::cmd("TIME").query_async(conn).await.unwrap();
        s * 1000 + us / 1000
    }

    /// Queues `token` as the earlier library did: a bare token in `queue`,
    /// its record "<channel>|<lease>|<deadline><rest>" in `records`.
    async fn queue_the_earlier_way(conn: &mut Conn, queue: &str, records: &str, rest: &str) {
        let deadline = server_ms(conn).await + 60_000;
        let _: () = redis::pipe()
            .rpush(queue, "b")
            .hset(records, "b", format!("ch|5000|{deadline}{rest}"))
            .query_async(conn)
            .await
            .unwrap();
    }

    /// A waiter queued by an earlier release of the library, whose queue
    /// held bare tokens and whose records were "<channel>|<lease>|<deadline>",
    /// is still handed the lock; an entry whose waiter left is skipped.
    #[tokio::test]
    async fn a_release_hands_on_to_a_waiter_queued_the_earlier_way() {
        let (_server, mut conn) = scratch().await;
        let keys = Keys::new("t", "compat").unwrap();
        let (queue, waiters) = (keys.all[2].clone(), keys.all[3].clone());
        let taken: (i64, i64) = run(&mut conn, "acquire", &keys, &["a", "5000", "0", "ch"])
            .await
            .unwrap();
        assert_eq!(taken.0, 1);
        // "c" queues the current way, then leaves as a lost withdraw
        // would leave it: only its record is gone.
        let queued: (i64, i64) = run(&mut conn, "acquire", &keys, &["c", "5000", "1000", "ch"])
            .await
            .unwrap();
        assert_eq!(queued.0, 0);
        let _: () = redis::cmd("HDEL")
            .arg(&waiters)
            .arg("c")
            .query_async(&mut conn)
            .await
            .unwrap();
        queue_the_earlier_way(&mut conn, &queue, &waiters, "").await;
        let released: i64 = run(&mut conn, "release", &keys, &["a"]).await.unwrap();
        assert_eq!(released, 1);
        let holder: String = redis::cmd("GET")
            .arg(&keys.all[0])
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(holder.starts_with("b:"), "{holder}");
        let left: i64 = redis::cmd("EXISTS")
            .arg(&queue)
            .arg(&waiters)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(left, 0);
    }

    /// The queue and its records outlive the last deadline by at most the
    /// last wait or a second, and a waiter queueing within that margin
    /// does not extend them.
    #[tokio::test]
    async fn the_queue_is_kept_for_the_last_wait_and_a_bounded_margin() {
        let (_server, mut conn) = scratch().await;
        let keys = Keys::new("t", "keep").unwrap();
        let _: (i64, i64) = run(&mut conn, "acquire", &keys, &["a", "5000", "0", "ch"])
            .await
            .unwrap();
        // "b" waits 300 ms: kept 300 ms more. "c", queueing within that
        // margin, changes nothing. "d" waits 5 s: kept a second more.
        let mut kept = Vec::new();
        for (waiter, wait) in [("b", "300"), ("c", "300"), ("d", "5000")] {
            let _: (i64, i64) = run(&mut conn, "acquire", &keys, &[waiter, "5000", wait, "ch"])
                .await
                .unwrap();
            // Both read at one moment (MULTI): a loaded machine can put
            // milliseconds between two round trips.
            let (queue, records): (i64, i64) = redis::pipe()
                .atomic()
                .pttl(&keys.all[2])
                .pttl(&keys.all[3])
                .query_async(&mut conn)
                .await
                .unwrap();
            assert!((queue - records).abs() <= 1, "{waiter}: {queue} {records}");
            kept.push(queue);
        }
        assert!(300 < kept[0] && kept[0] <= 600, "{kept:?}");
        assert!(300 < kept[1] && kept[1] <= kept[0], "{kept:?}");
        assert!(5000 < kept[2] && kept[2] <= 6000, "{kept:?}");
    }

    /// The semaphore's hand-off likewise serves a waiter queued the earlier
    /// way ("<channel>|<lease>|<deadline>|<permits>" records, bare tokens).
    #[tokio::test]
    async fn a_semaphore_hands_on_to_a_waiter_queued_the_earlier_way() {
        let (_server, mut conn) = scratch().await;
        let keys = family_keys("sem", "compat", &SEMAPHORE);
        let taken: Vec<i64> = call(
            &mut conn,
            "sem_acquire",
            &keys,
            &["a", "1", "5000", "0", "ch", "1"],
        )
        .await
        .unwrap();
        assert_eq!(taken[0], 1);
        queue_the_earlier_way(&mut conn, &keys[1], &keys[2], "|1").await;
        let returned: i64 = call(&mut conn, "sem_release", &keys, &["a:1", "1"])
            .await
            .unwrap();
        assert_eq!(returned, 1);
        let held: Option<f64> = redis::cmd("ZSCORE")
            .arg(&keys[0])
            .arg("b:1")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(held.is_some(), "the waiter was not granted its permit");
    }

    /// And the read-write lock's: a writer queued the earlier way
    /// ("<channel>|<lease>|<deadline>|<r or w>" records, bare tokens) is
    /// granted the lock once its reader leaves.
    #[tokio::test]
    async fn a_read_write_lock_hands_on_to_a_waiter_queued_the_earlier_way() {
        let (_server, mut conn) = scratch().await;
        let keys = family_keys("rw", "compat", &RW);
        let read: Vec<i64> = call(
            &mut conn,
            "rw_acquire",
            &keys,
            &["a", "r", "5000", "0", "ch"],
        )
        .await
        .unwrap();
        assert_eq!(read[0], 1);
        queue_the_earlier_way(&mut conn, &keys[3], &keys[4], "|w").await;
        let id = format!("a:{}", read[1]);
        let released: i64 = call(&mut conn, "rw_release", &keys, &[&id, "r"])
            .await
            .unwrap();
        assert_eq!(released, 1);
        let writer: Option<String> = redis::cmd("GET")
            .arg(&keys[1])
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(
            writer.is_some_and(|w| w.starts_with("b:")),
            "the writer was not granted"
        );
    }

    /// A reader granted by a hand-off finds its grant by its record, not
    /// by a scan of every reader; the record goes with the grant (its
    /// release, or its lease's end for a reader gone) and the records at
    /// the latest with the longest lease they hold. A resent acquire of a
    /// reader granted at once, past 128 readers, still finds its grant by
    /// the scan.
    #[tokio::test]
    async fn a_reader_finds_its_grant_by_its_record_or_by_the_scan() {
        let (_server, mut conn) = scratch().await;
        let keys = family_keys("rw", "records", &RW);
        let ask = |token: &'static str, kind: &'static str, lease: &'static str| {
            [
                token,
                kind,
                lease,
                if kind == "w" { "0" } else { "9000" },
                "ch",
            ]
        };
        let write: Vec<i64> = call(&mut conn, "rw_acquire", &keys, &ask("w", "w", "5000"))
            .await
            .unwrap();
        for (reader, lease) in [("q", "5000"), ("gone", "200")] {
            let queued: Vec<i64> = call(&mut conn, "rw_acquire", &keys, &ask(reader, "r", lease))
                .await
                .unwrap();
            assert_eq!(queued[0], 0);
        }
        let id = format!("w:{}", write[1]);
        let _: i64 = call(&mut conn, "rw_release", &keys, &[&id, "w"])
            .await
            .unwrap();
        let record: String = redis::cmd("HGET")
            .arg(&keys[5])
            .arg("q")
            .query_async(&mut conn)
            .await
            .unwrap();
        let polled: Vec<i64> = call(&mut conn, "rw_poll", &keys, &["q", "r"])
            .await
            .unwrap();
        assert_eq!((polled[0], polled[1].to_string()), (1, record));
        // Both read at one moment (MULTI), though each PTTL reads the
        // clock on its own: they may differ by a millisecond.
        let (readers, kept): (i64, i64) = redis::pipe()
            .atomic()
            .pttl(&keys[0])
            .pttl(&keys[5])
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(
            0 < kept && (kept - readers).abs() <= 1,
            "records kept {kept} ms, readers {readers}"
        );
        // "gone" never releases: its record goes when its lease ends.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let _: Vec<i64> = call(&mut conn, "rw_poll", &keys, &["q", "r"])
            .await
            .unwrap();
        let recorded: Vec<String> = redis::cmd("HKEYS")
            .arg(&keys[5])
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(recorded, ["q"]);
        let id = format!("q:{}", polled[1]);
        let _: i64 = call(&mut conn, "rw_release", &keys, &[&id, "r"])
            .await
            .unwrap();
        let left: i64 = redis::cmd("EXISTS")
            .arg(&keys[5])
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(left, 0, "a released reader's record stayed");
        const READERS: usize = 200;
        let mut fences = Vec::new();
        for i in 0..READERS {
            let token = format!("r{i}");
            let read: Vec<i64> = call(
                &mut conn,
                "rw_acquire",
                &keys,
                &[&token, "r", "5000", "0", "ch"],
            )
            .await
            .unwrap();
            fences.push(read[1]);
        }
        let again: Vec<i64> = call(
            &mut conn,
            "rw_acquire",
            &keys,
            &["r150", "r", "5000", "0", "ch"],
        )
        .await
        .unwrap();
        assert_eq!((again[0], again[1]), (1, fences[150]));
        let count: usize = redis::cmd("ZCARD")
            .arg(&keys[0])
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(count, READERS);
    }

    /// A resent acquire whose first run queued its reader, which a
    /// hand-off in the resend itself serves, answers that grant and takes
    /// no second one.
    #[tokio::test]
    async fn a_resent_acquire_served_by_its_own_hand_off_takes_one_grant() {
        let (_server, mut conn) = scratch().await;
        let keys = family_keys("rw", "resent", &RW);
        let write: Vec<i64> = call(
            &mut conn,
            "rw_acquire",
            &keys,
            &["w", "w", "200", "0", "ch"],
        )
        .await
        .unwrap();
        let read = ["r", "r", "5000", "9000", "ch"];
        let queued: Vec<i64> = call(&mut conn, "rw_acquire", &keys, &read).await.unwrap();
        assert_eq!((write[0], queued[0]), (1, 0));
        // The writer's lease ends unreleased; the resend comes after.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let again: Vec<i64> = call(&mut conn, "rw_acquire", &keys, &read).await.unwrap();
        assert_eq!(again[0], 1);
        let held: Vec<String> = redis::cmd("ZRANGE")
            .arg(&keys[0])
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(held, [format!("r:{}", again[1])]);
    }
}
