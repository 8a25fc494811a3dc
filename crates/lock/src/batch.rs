//! [`Batch`]: the calls of one function that a client asks at the same
//! time, on one server, sent as one call of its batched form
//! (`acquire_many` for `acquire`, …), as the rate limiter's decisions are
//! (`rate`). The server then parses, runs and answers one call where it
//! did one per request, and reads its clock once for a whole batch; a
//! request asked alone still goes as the lone call it always was. On a
//! cluster every call goes alone: the keys spread over the slots, so a
//! batch would be about a call per request anyway, and one waiting on a
//! frozen master would hold up requests bound for the healthy ones.

use std::sync::Arc;

use seckill_redis::{Coalescer, CoalescerConfig, Conn};

use crate::error::{Error, Result};
use crate::scripts::call;

/// Most requests in one call.
const MAX_BATCH: usize = 256;

/// The batches of the lock's, the semaphore's and the read-write lock's
/// busiest calls, on one connection (one [`Locks`](crate::Locks)).
pub(crate) struct Batches {
    pub acquire: Batch,
    pub release: Batch,
    pub sem_acquire: Batch,
    pub sem_release: Batch,
    /// A read-write lock's acquires; its releases go alone: batched, a hot
    /// lock's hand-off waited behind the batch (32 tasks on one lock, one
    /// in eight writing: 12,000 grants/s against 13,600).
    pub rw_acquire: Batch,
}

impl Batches {
    /// The calls of `conn`. On one server, starts a task for each kind on
    /// the current tokio runtime.
    pub fn start(conn: &Conn) -> Self {
        Self {
            acquire: Batch::start(conn, "acquire", 2),
            release: Batch::start(conn, "release", 1),
            sem_acquire: Batch::start(conn, "sem_acquire", 3),
            sem_release: Batch::start(conn, "sem_release", 1),
            rw_acquire: Batch::start(conn, "rw_acquire", 3),
        }
    }
}

/// The calls of function `name`, each answered with up to `width`
/// integers. Its batched form, `<name>_many`, takes every request's keys
/// and then every request's arguments, as the lone function takes them,
/// and answers `width` integers for each request.
pub(crate) struct Batch {
    name: &'static str,
    conn: Conn,
    /// None on a cluster: each call goes alone.
    calls: Option<Coalescer<Ask, Result<Vec<i64>>>>,
}

/// One request: its keys and arguments.
struct Ask {
    keys: Arc<[String]>,
    args: Vec<String>,
}

impl Batch {
    fn start(conn: &Conn, name: &'static str, width: usize) -> Self {
        let calls = (!conn.is_cluster()).then(|| {
            let conn = conn.clone();
            Coalescer::start(CoalescerConfig::default(), MAX_BATCH, move |asks| {
                send(conn.clone(), name, width, asks)
            })
        });
        Self {
            name,
            conn: conn.clone(),
            calls,
        }
    }

    /// Calls the function on `keys` with `args` in the next batch: its
    /// answer, as integers.
    pub async fn ask(&self, keys: Arc<[String]>, args: Vec<String>) -> Result<Vec<i64>> {
        let ask = Ask { keys, args };
        match &self.calls {
            Some(calls) => {
                let answer = calls.ask(ask).await;
                answer.unwrap_or_else(|| Err(Error::unanswered(self.name)))
            }
            None => lone(self.conn.clone(), self.name, &ask).await,
        }
    }
}

/// `ask` as a call of its own.
async fn lone(mut conn: Conn, name: &str, ask: &Ask) -> Result<Vec<i64>> {
    let answer = call::<redis::Value, _, _>(&mut conn, name, &ask.keys[..], &ask.args).await;
    Ok(integers(answer?)?)
}

async fn send(mut conn: Conn, name: &str, width: usize, asks: Vec<Ask>) -> Vec<Result<Vec<i64>>> {
    if let [one] = asks.as_slice() {
        return vec![lone(conn, name, one).await];
    }
    let keys: Vec<&str> = asks
        .iter()
        .flat_map(|a| a.keys.iter().map(String::as_str))
        .collect();
    let args: Vec<&str> = asks
        .iter()
        .flat_map(|a| a.args.iter().map(String::as_str))
        .collect();
    let answer = call(&mut conn, &format!("{name}_many"), &keys, &args).await;
    answers(answer, asks.len(), width, 0, name, |a, _| a.to_vec())
}

/// A batched call's answer: `per` integers for each of `n` requests, then
/// `tail` more for all, each request's read by `read` (with the tail); or
/// the call's failure, for every request.
pub(crate) fn answers<T>(
    answer: redis::RedisResult<Vec<i64>>,
    n: usize,
    per: usize,
    tail: usize,
    what: &str,
    read: impl Fn(&[i64], &[i64]) -> T,
) -> Vec<Result<T>> {
    let failure = match answer {
        Ok(v) if v.len() == n * per + tail => {
            let (each, tail) = v.split_at(n * per);
            return each.chunks(per).map(|a| Ok(read(a, tail))).collect();
        }
        Ok(v) => redis::RedisError::from((
            redis::ErrorKind::Parse,
            "batched call",
            format!("{} values for {n} requests to {what}", v.len()),
        )),
        Err(e) => e,
    };
    (0..n).map(|_| Err(failure.clone().into())).collect()
}

/// A lone call's answer, an integer or an array of them, as integers.
fn integers(value: redis::Value) -> redis::RedisResult<Vec<i64>> {
    Ok(match value {
        redis::Value::Int(one) => vec![one],
        many => redis::from_redis_value(many)?,
    })
}
