//! Reading a sale back on [`Engine`]: its ledger, buyers and stream, and
//! trimming what is done with.

use std::collections::HashMap;

use redis::AsyncCommands;
use seckill_redis::Conn;

use crate::engine::Engine;
use crate::error::Result;
use crate::event::{Event, StreamEntry};
use crate::keys::SaleKeys;
use crate::order_id::{entry_number, next_entry_id};
use crate::records::{self, LedgerEntry};

impl Engine {
    /// Every order recorded for a sale (stream and per-day records; a
    /// sharded sale's, in its shards).
    pub async fn ledger(&self, id: &str) -> Result<Vec<LedgerEntry>> {
        let mut entries = Vec::new();
        for part in self.parts(id).await? {
            entries.extend(self.ledger_of(&part).await?);
        }
        Ok(entries)
    }

    async fn ledger_of(&self, id: &str) -> Result<Vec<LedgerEntry>> {
        let keys = SaleKeys::new(id)?;
        let mut entries: Vec<LedgerEntry> = self
            .orders_of(id)
            .await?
            .into_iter()
            .filter(|o| o.state.is_live())
            .map(|o| LedgerEntry {
                order_id: o.order_id,
                user_id: o.user_id,
                quantity: o.quantity,
            })
            .collect();
        entries.extend(records::day_records(&mut self.conn.clone(), &keys).await?);
        Ok(entries)
    }

    /// Units each user holds, as the engine counts them for its per-user
    /// limit: kept by the production path for sales with a limit, and by
    /// the baselines (a sharded sale's, over its shards).
    pub async fn buyers(&self, id: &str) -> Result<HashMap<String, u64>> {
        let mut buyers = HashMap::new();
        for part in self.parts(id).await? {
            let keys = SaleKeys::new(&part)?;
            let mut conn = self.conn.clone();
            let counted: HashMap<String, u64> = conn.hgetall(&keys.users).await?;
            for (user, units) in counted {
                *buyers.entry(user).or_default() += units;
            }
            let mut held: redis::AsyncIter<(String, u64)> =
                conn.hscan_match(&keys.sale, "u:*").await?;
            while let Some(item) = held.next_item().await {
                let (field, units) = item?;
                if let Some(user) = field.strip_prefix("u:") {
                    *buyers.entry(user.to_owned()).or_default() += units;
                }
            }
        }
        Ok(buyers)
    }

    /// Order events in the sale's stream now (purchases, payments,
    /// cancellations, expiries), however many each entry carries; a
    /// sharded sale's, in its shards.
    pub async fn stream_events(&self, id: &str) -> Result<u64> {
        let mut events = 0;
        for part in self.parts(id).await? {
            let keys = SaleKeys::new(&part)?;
            events += stream_events(&mut self.conn.clone(), &keys, "-")
                .await?
                .len() as u64;
        }
        Ok(events)
    }

    /// Trims sale `id`'s stream below entry `floor` (entries every reader
    /// is done with), but never past the expiry cursor: entries after it
    /// are where pending orders live.
    pub async fn trim_stream(&self, id: &str, floor: &str) -> Result<()> {
        let keys = SaleKeys::new(id)?;
        let mut conn = self.conn.clone();
        let swept: Option<String> = conn.hget(&keys.sale, "swept").await?;
        let Some(swept) = swept else {
            return Ok(());
        };
        let keep_from = next_entry_id(&swept);
        let floor = if entry_number(floor) < entry_number(&keep_from) {
            floor.to_owned()
        } else {
            keep_from
        };
        let _: i64 = redis::cmd("XTRIM")
            .arg(&keys.orders)
            .arg("MINID")
            .arg(floor)
            .query_async(&mut conn)
            .await?;
        Ok(())
    }
}

/// The order events of the sale's stream from entry `from` on.
pub(crate) async fn stream_events(
    conn: &mut Conn,
    keys: &SaleKeys,
    from: &str,
) -> Result<Vec<Event>> {
    let entries = StreamEntry::read(conn, &keys.orders, from).await?;
    Ok(entries
        .iter()
        .flat_map(|e| Event::decode(&keys.id, e))
        .collect())
}
