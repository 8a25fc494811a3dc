//! Taking over batches a persister read and never committed: it died, or
//! its commit failed. Each batch's range is read again from the stream and
//! committed by whoever takes it, and the entries a persister read from a
//! master's ledger are claimed from it (`XAUTOCLAIM`) once idle long
//! enough; inserting an order twice is a no-op, so two persisters taking
//! the same batch at once write the same rows.

use std::collections::HashMap;
use std::time::Duration;

use rand::seq::SliceRandom;
use redis::AsyncCommands;
use redis::aio::ConnectionLike;
use seckill_engine::{Event, StreamEntry};
use seckill_redis::Conn;

use crate::backlog::{InFlight, SaleStream, in_flight};
use crate::commit::{Acks, commit, on_every_replica};
use crate::config::{GROUP, LIBRARY};
use crate::error::{Error, Result};
use crate::ledger::{Told, read_ledgers};
use crate::news::{MasterKeys, Topology};
use crate::store::Store;

/// The persisters whose last read, as marked in `readers` (a master's
/// readers hash, `news.rs`), is at least `idle` old; `me` never is.
async fn quiet(
    conn: &mut (impl ConnectionLike + Send + Sync),
    readers: &str,
    me: &str,
    idle: Duration,
) -> Result<Vec<String>> {
    let now = redis_ms(conn).await?;
    let marks: HashMap<String, u64> = conn.hgetall(readers).await?;
    let idle = idle.as_millis() as u64;
    Ok(marks
        .into_iter()
        .filter(|(name, at)| name != me && now.saturating_sub(*at) >= idle)
        .map(|(name, _)| name)
        .collect())
}

/// Per master of `topology`, its readers hash and the persisters quiet
/// there (see [`quiet`]); a master that cannot be asked is logged and
/// left out.
pub(crate) async fn quiet_everywhere<'t>(
    conn: &mut (impl ConnectionLike + Send + Sync),
    topology: &'t Topology,
    me: &str,
    idle: Duration,
) -> Vec<(&'t str, Vec<String>)> {
    let mut found = Vec::new();
    for i in 0..topology.len() {
        let readers = topology.keys(i).readers.as_str();
        match quiet(conn, readers, me, idle).await {
            Ok(gone) if !gone.is_empty() => found.push((readers, gone)),
            Ok(_) => {}
            Err(e) => {
                // Housekeeping logs its failures, as `Failures` says.
                tracing::debug!(master = topology.addr(i), error = %e, "reading its persisters failed");
            }
        }
    }
    found
}

/// What [`abandoned`] did.
pub(crate) struct Taken {
    /// Events committed.
    pub persisted: usize,
    /// Some batch was too young to take, or a sale's master unreachable:
    /// look again later.
    pub look_again: bool,
}

/// Persists the batches of `sales` read at least `idle` ago and never
/// committed, reading each range again; `me` signs the batches it takes.
/// With `replica_wait` (`--durability replica`), a batch is committed
/// only once every replica has it, as a read is: a batch left because no
/// replica confirmed it may hold purchases that only a master cut off
/// from its replicas has, which a failover takes with it. The first one
/// unconfirmed ends the call (a `WAIT` holds the connection up to its
/// timeout, and the next would likely wait as long), to be looked at
/// again; the sales are taken in a new order each call, so a master whose
/// replica is frozen does not keep the others' batches waiting for good.
pub(crate) async fn abandoned(
    conn: &mut Conn,
    store: &Store,
    sales: &[String],
    me: &str,
    idle: Duration,
    replica_wait: Option<Duration>,
) -> Result<Taken> {
    let mut taken = Taken {
        persisted: 0,
        look_again: false,
    };
    let now = redis_ms(conn).await?;
    let idle = idle.as_millis() as u64;
    let mut sales: Vec<&String> = sales.iter().collect();
    sales.shuffle(&mut rand::rng());
    for sale in sales {
        let keys = SaleStream::new(sale)?;
        let batches = match in_flight(conn, &keys.persisting).await {
            Ok(batches) => batches,
            Err(e) => {
                tracing::debug!(sale, error = %e, "reading its batches failed");
                taken.look_again |= e.is_unreachable();
                continue;
            }
        };
        for batch in batches {
            if now.saturating_sub(batch.read_ms) < idle {
                taken.look_again = true;
                continue;
            }
            if let Some(timeout) = replica_wait {
                match claim_kept(conn, &keys.persisting, &batch, me, timeout).await {
                    Ok(true) => {}
                    // Committed by its reader meanwhile.
                    Ok(false) => continue,
                    Err(e) => {
                        tracing::warn!(sale, first = batch.first, error = %e, "an abandoned batch waits for the replicas");
                        taken.look_again = true;
                        return Ok(taken);
                    }
                }
            }
            let entries = StreamEntry::range(conn, &keys.stream, &batch.first, &batch.last).await?;
            tracing::info!(sale, first = batch.first, "taking over an abandoned batch");
            let events: Vec<Event> = entries
                .iter()
                .flat_map(|e| Event::decode(sale, e))
                .collect();
            commit(
                store,
                &*conn,
                &events,
                &[(sale.clone(), batch.first.clone())],
                None,
            )
            .await?;
            taken.persisted += events.len();
        }
    }
    Ok(taken)
}

/// Signs `batch` (a record of the persisting hash `persisting`) as taken
/// by `me` (`lua/claim_batch.lua`) and waits, at most `timeout`, until
/// every replica has the write, and so every purchase before it: the
/// batch's range is read with `XRANGE`, which later Redis versions do not
/// count for a `WAIT`. False when the batch is gone, committed by its
/// reader meanwhile.
async fn claim_kept(
    conn: &mut Conn,
    persisting: &str,
    batch: &InFlight,
    me: &str,
    timeout: Duration,
) -> Result<bool> {
    let epoch = conn.epoch();
    let record = format!("{} {} {} {me}", batch.last, batch.entries, batch.read_ms);
    let mut call = LIBRARY.call("claim_batch", &[persisting]);
    call.arg(&batch.first).arg(record);
    if call.invoke::<i64>(conn).await? == 0 {
        return Ok(false);
    }
    on_every_replica(conn, persisting, epoch, timeout).await?;
    Ok(true)
}

/// Most ledger entries claimed at once.
const CLAIM_BATCH: usize = 500;

/// Persists the entries of `ledger`, one of the ledgers of `keys` (a
/// master's, `news.rs`), that some persister read at least `idle` ago and
/// never acknowledged, claiming them for `me`; answers the events
/// committed. `file`: as [`Acks`]'s. With `replica_wait`, committed only
/// once every replica has the claim, as [`abandoned`]'s batches are.
pub(crate) async fn abandoned_in_ledger(
    conn: &mut Conn,
    store: &Store,
    (keys, ledger): (&MasterKeys, &str),
    file: bool,
    me: &str,
    idle: Duration,
    replica_wait: Option<Duration>,
) -> Result<usize> {
    let mut persisted = 0;
    if !may_be_idle(conn, ledger, idle).await? {
        return Ok(persisted);
    }
    let mut cursor = "0-0".to_owned();
    loop {
        let epoch = conn.epoch();
        let claimed: redis::RedisResult<(String, redis::Value, redis::Value)> =
            redis::cmd("XAUTOCLAIM")
                .arg(ledger)
                .arg(GROUP)
                .arg(me)
                .arg(idle.as_millis() as u64)
                .arg(&cursor)
                .arg("COUNT")
                .arg(CLAIM_BATCH)
                .query_async(conn)
                .await;
        let (next, entries) = match claimed {
            Ok((next, entries, _)) => (next, StreamEntry::list(entries)?),
            // No ledger, or no group on it yet: nothing was read from it.
            Err(e) if e.code() == Some("NOGROUP") => return Ok(persisted),
            Err(e) => return Err(e.into()),
        };
        // The claim is a write, so the replicas that have it have the
        // purchases told before it. Unconfirmed, the entries stay pending,
        // idle again from now.
        if !entries.is_empty()
            && let Some(timeout) = replica_wait
            && let Err(e) = on_every_replica(conn, ledger, epoch, timeout).await
        {
            tracing::warn!(ledger, error = %e, "abandoned ledger entries wait for the replicas");
            return Ok(persisted);
        }
        if !entries.is_empty() {
            tracing::info!(
                ledger,
                entries = entries.len(),
                "taking over abandoned ledger entries"
            );
            persisted += commit_told(conn, store, (keys, ledger), file, entries).await?;
        }
        if next == "0-0" {
            return Ok(persisted);
        }
        cursor = next;
    }
}

/// Whether some entry of `ledger` may have been pending in its group for
/// `idle`: one was written at least that long ago, by the server's clock.
/// `XAUTOCLAIM` walks the whole list of pending entries, and at a thousand
/// purchases a second in quiet sales, looking every housekeeping cost
/// Redis more than a microsecond a purchase for nothing; the summary is
/// one look. An entry is delivered after it is written, so it has been
/// pending no longer than its id's age. An id ahead of the clock (the
/// clock went back) says nothing: then the ledger is looked at.
async fn may_be_idle(conn: &mut Conn, ledger: &str, idle: Duration) -> Result<bool> {
    let summary: redis::RedisResult<(u64, Option<String>, redis::Value, redis::Value)> =
        redis::cmd("XPENDING")
            .arg(ledger)
            .arg(GROUP)
            .query_async(conn)
            .await;
    let oldest = match summary {
        Ok((0, ..)) | Ok((_, None, ..)) => return Ok(false),
        Ok((_, Some(oldest), ..)) => oldest,
        // No ledger, or no group on it yet: nothing was read from it.
        Err(e) if e.code() == Some("NOGROUP") => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    let written: u64 = match oldest.split_once('-').map(|(ms, _)| ms.parse()) {
        Some(Ok(ms)) => ms,
        _ => return Ok(true),
    };
    let now = redis_ms(conn).await?;
    Ok(written > now || now - written >= idle.as_millis() as u64)
}

/// Persists everything `ledger` holds, for a ledger no master's keys name
/// since the masters changed (its slot moved to a master whose tag is
/// another): what it was told is delivered nowhere else, as each sale's
/// stream counts it delivered (see `news.rs`). Entries another persister read are taken once
/// idle for `idle`. With `replica_wait` (`--durability replica`), what is
/// read is committed only once every replica has it, as the persister's
/// reads are: a purchase told there a moment ago may be on the master
/// alone. Answers the events committed and whether the ledger is empty
/// now.
pub(crate) async fn drain_orphan(
    conn: &mut Conn,
    store: &Store,
    ledger: &str,
    me: &str,
    idle: Duration,
    replica_wait: Option<Duration>,
) -> Result<(usize, bool)> {
    let exists: bool = conn.exists(ledger).await?;
    if !exists {
        return Ok((0, true));
    }
    let _: redis::RedisResult<()> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(ledger)
        .arg(GROUP)
        .arg("0")
        .query_async(conn)
        .await;
    let keys = MasterKeys::of_ledger(ledger).ok_or_else(|| Error::Invalid {
        what: "ledger",
        reason: format!("{ledger} is not named as a ledger is"),
    })?;
    let mut persisted =
        abandoned_in_ledger(conn, store, (&keys, ledger), false, me, idle, replica_wait).await?;
    loop {
        let epoch = conn.epoch();
        let read = read_ledgers(conn, &[ledger], me, CLAIM_BATCH).await?;
        let Some((_, entries)) = read.into_iter().next() else {
            break;
        };
        // Unconfirmed, they stay pending, to be taken over once idle; what
        // was committed before still counts.
        if let Some(timeout) = replica_wait
            && let Err(e) = on_every_replica(conn, ledger, epoch, timeout).await
        {
            tracing::warn!(ledger, error = %e, "what was read from a ledger left by a change of masters waits for the replicas");
            return Ok((persisted, false));
        }
        persisted += commit_told(conn, store, (&keys, ledger), false, entries).await?;
    }
    let left: u64 = conn.xlen(ledger).await?;
    Ok((persisted, left == 0))
}

/// Commits `entries` of `ledger`, one of the ledgers of `keys`, to SQL,
/// then acknowledges them (`file`: as [`Acks`]'s); answers the events
/// committed.
async fn commit_told(
    conn: &mut Conn,
    store: &Store,
    (keys, ledger): (&MasterKeys, &str),
    file: bool,
    entries: Vec<StreamEntry>,
) -> Result<usize> {
    let told = Told::new(vec![(ledger.to_owned(), entries)]);
    let acks = Acks {
        keys,
        told: &told,
        file,
    };
    commit(store, conn, &told.events, &[], Some(acks)).await?;
    Ok(told.events.len())
}

/// The server's clock in ms: the one the records' times come from.
async fn redis_ms(conn: &mut (impl ConnectionLike + Send + Sync)) -> Result<u64> {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await?;
    Ok(secs * 1000 + micros / 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Makes `ledger` hold one entry written `age_ms` before the server's
    /// clock (after it, when negative), read by a persister that never
    /// acknowledged it; answers its id.
    async fn pending_entry(conn: &mut Conn, ledger: &str, age_ms: i64) -> String {
        let now = redis_ms(conn).await.unwrap() as i64;
        crate::ledger::make_ledger_group(conn, ledger)
            .await
            .unwrap();
        let id: String = conn
            .xadd(ledger, format!("{}-1", now - age_ms), &[("s", "*")])
            .await
            .unwrap();
        let _: redis::Value = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg("gone")
            .arg("STREAMS")
            .arg(ledger)
            .arg(">")
            .query_async(conn)
            .await
            .unwrap();
        id
    }

    #[tokio::test]
    async fn a_ledger_is_walked_only_when_an_entry_can_have_been_pending_long_enough() {
        let server = seckill_testkit::RedisServer::start().unwrap();
        let mut conn = seckill_redis::Target::server(&server.url())
            .connect()
            .await
            .unwrap();
        let idle = Duration::from_secs(5);
        assert!(
            !may_be_idle(&mut conn, "none", idle).await.unwrap(),
            "no ledger"
        );
        pending_entry(&mut conn, "fresh", 1_000).await;
        assert!(!may_be_idle(&mut conn, "fresh", idle).await.unwrap());
        let old = pending_entry(&mut conn, "old", 10_000).await;
        assert!(may_be_idle(&mut conn, "old", idle).await.unwrap());
        let _: u64 = conn.xack("old", GROUP, &[old]).await.unwrap();
        assert!(
            !may_be_idle(&mut conn, "old", idle).await.unwrap(),
            "acknowledged"
        );
        // Written ahead of the clock, which then went back: looked at.
        pending_entry(&mut conn, "ahead", -3_600_000).await;
        assert!(may_be_idle(&mut conn, "ahead", idle).await.unwrap());
    }
}
