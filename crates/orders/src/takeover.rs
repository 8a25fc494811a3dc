//! Taking over batches a persister read and never committed: it died, or
//! its commit failed. Each batch's range is read again from the stream and
//! committed by whoever takes it; inserting an order twice is a no-op, so
//! two persisters taking the same batch at once write the same rows.

use std::collections::HashMap;
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::ConnectionLike;
use seckill_engine::{Event, StreamEntry};

use crate::backlog::{SaleStream, commit, in_flight};
use crate::error::Result;
use crate::news::Topology;
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
/// committed, reading each range again.
pub(crate) async fn abandoned(
    conn: &mut (impl ConnectionLike + Send + Sync + Clone),
    store: &Store,
    sales: &[String],
    idle: Duration,
) -> Result<Taken> {
    let mut taken = Taken {
        persisted: 0,
        look_again: false,
    };
    let now = redis_ms(conn).await?;
    let idle = idle.as_millis() as u64;
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
            )
            .await?;
            taken.persisted += events.len();
        }
    }
    Ok(taken)
}

/// The server's clock in ms: the one the records' times come from.
async fn redis_ms(conn: &mut (impl ConnectionLike + Send + Sync)) -> Result<u64> {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await?;
    Ok(secs * 1000 + micros / 1000)
}
