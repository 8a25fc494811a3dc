//! Committing what was read: its events into SQL in one transaction,
//! then the records of its batches deleted and its ledger entries
//! acknowledged, only once committed (a crash in between means a harmless
//! second write); under `--durability replica`, only once every replica
//! holds the read (`on_every_replica`).

use std::collections::HashMap;
use std::time::Duration;

use redis::AsyncCommands;
use seckill_engine::{Engine, Event};
use seckill_redis::{Conn, Replicas};

use crate::backlog::SaleStream;
use crate::config::{GROUP, LIBRARY};
use crate::error::{Error, Result};
use crate::ledger::Told;
use crate::news::MasterKeys;
use crate::store::Store;

/// [`Conn::on_every_replica`] for what `conn` sent to `key`'s master since
/// `epoch`, the read just answered included, as an error when not: every
/// replica the master lists online ([`Replicas::Online`]), as SQL must
/// not keep what a promoted replica lacks. For `--durability replica`,
/// before a read is committed.
pub(crate) async fn on_every_replica(
    conn: &mut Conn,
    key: &str,
    epoch: u64,
    timeout: Duration,
) -> redis::RedisResult<()> {
    if conn
        .on_every_replica(key.as_bytes(), epoch, timeout, Replicas::Online)
        .await?
    {
        return Ok(());
    }
    Err(redis::RedisError::from((
        redis::ErrorKind::Client,
        "no replica confirmed the orders read in time; they stay pending until taken over",
    )))
}

/// Ledger entries committed, to acknowledge: the keys of the master whose
/// ledgers they were read from, and what they told (with the ids per
/// ledger).
pub(crate) struct Acks<'a> {
    pub keys: &'a MasterKeys,
    pub told: &'a Told,
    /// Whether to file the sales told in the master's due index and news
    /// set; not for a ledger no master reads any more (`takeover.rs`),
    /// whose due index and news set no one would read either.
    pub file: bool,
}

/// Commits `events` to SQL in one transaction, then deletes the records
/// of the batches they were read as (each a sale and the id of its first
/// entry, the sales on one master) and acknowledges the ledger entries
/// they were read from (`acks`): only once committed, so a crash in
/// between means a harmless second write. One `HDEL` per sale, sent
/// together: a cluster pipeline must stay in one slot, and the sales of
/// one master are in many.
pub(crate) async fn commit(
    store: &Store,
    conn: &Conn,
    events: &[Event],
    batches: &[(String, String)],
    acks: Option<Acks<'_>>,
) -> Result<()> {
    store.apply(events).await?;
    let mut by_sale: HashMap<&str, Vec<&str>> = HashMap::new();
    for (sale, first) in batches {
        by_sale.entry(sale).or_default().push(first);
    }
    let deletes = by_sale.into_iter().map(|(sale, firsts)| {
        let mut conn = conn.clone();
        async move {
            let key = SaleStream::new(sale)?.persisting;
            let _: i64 = conn.hdel(key, firsts).await?;
            Ok::<_, Error>(())
        }
    });
    futures_util::future::try_join_all(deletes).await?;
    let Some(Acks { keys, told, file }) = acks else {
        return Ok(());
    };
    // One call per ledger read; the first files what they told.
    let (mut dues, mut busy): (Vec<_>, Vec<_>) = match file {
        true => (told.dues().collect(), told.busy().collect()),
        false => Default::default(),
    };
    for (ledger, ids) in &told.ids {
        let mut call = LIBRARY.call("ledger_done", &[ledger, &keys.due, &keys.news]);
        call.arg(GROUP).arg(dues.len()).arg(busy.len());
        for (member, at) in dues.drain(..) {
            call.arg(at).arg(member);
        }
        for sale in busy.drain(..) {
            call.arg(Engine::sale_key(sale)?);
        }
        for id in ids {
            call.arg(id);
        }
        let _: i64 = call.invoke(&mut conn.clone()).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The batches of one round come from many sales of one master, each
    /// in its own slot; a cluster pipeline must keep to one slot.
    #[tokio::test]
    async fn commit_clears_the_records_of_sales_in_different_slots_on_a_cluster() {
        let cluster = seckill_testkit::RedisCluster::start(3, 0).unwrap();
        let target = seckill_redis::Target::cluster(&cluster.addresses().join(",")).unwrap();
        let conn = target.connect().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("o.db").to_str().unwrap())
            .await
            .unwrap();
        let sales = ["a", "b", "c", "d"];
        let mut batches = Vec::new();
        for sale in sales {
            let key = SaleStream::new(sale).unwrap().persisting;
            let _: i64 = conn.clone().hset(&key, "1-0", "1-0 1 0").await.unwrap();
            batches.push((sale.to_owned(), "1-0".to_owned()));
        }
        commit(&store, &conn, &[], &batches, None).await.unwrap();
        for sale in sales {
            let key = SaleStream::new(sale).unwrap().persisting;
            let left: u64 = conn.clone().hlen(&key).await.unwrap();
            assert_eq!(left, 0, "the record of {sale}'s batch is still there");
        }
    }
}
