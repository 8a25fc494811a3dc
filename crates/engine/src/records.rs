//! The baselines' order records: the classic recipes' one hash per day,
//! order id -> buyer. (`atomic` and `coalesced` record orders in the sale's
//! stream instead; `Engine::ledger` reads both, so every strategy can be
//! checked the same way.)

use std::collections::HashMap;

use redis::AsyncCommands;
use seckill_redis::Conn;
use serde::Serialize;

use crate::error::Result;
use crate::keys::SaleKeys;
use crate::sale::now_ms;

/// One order as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LedgerEntry {
    /// The order id.
    pub order_id: String,
    /// The buyer.
    pub user_id: String,
    /// Units of the order (always 1 for the baselines).
    pub quantity: u32,
}

/// Adds the baseline record of one sold unit to `pipe`: the day's hash, and
/// the day in the sale's set of days (so `ledger` and delete find it).
pub(crate) fn record(pipe: &mut redis::Pipeline, keys: &SaleKeys, order_id: &str, user: &str) {
    let day = utc_day(now_ms());
    pipe.hset(keys.day(&day), order_id, format!("{user}|1"))
        .ignore()
        .sadd(&keys.days, &day)
        .ignore();
}

/// A fresh order id for a baseline strategy: sale, generation, random part.
pub(crate) fn order_id(sale: &str, generation: u64) -> String {
    format!("{sale}-{generation}-{:016x}", rand::random::<u64>())
}

/// The baselines' per-day records of sale `keys`.
pub(crate) async fn day_records(conn: &mut Conn, keys: &SaleKeys) -> Result<Vec<LedgerEntry>> {
    let mut entries = Vec::new();
    let days: Vec<String> = conn.smembers(&keys.days).await?;
    for day in days {
        let records: HashMap<String, String> = conn.hgetall(keys.day(&day)).await?;
        for (order_id, value) in records {
            let (user, qty) = value.split_once('|').unwrap_or((&value, "1"));
            entries.push(LedgerEntry {
                order_id,
                user_id: user.to_owned(),
                quantity: qty.parse().unwrap_or(0),
            });
        }
    }
    Ok(entries)
}

/// `YYYYMMDD` of a Unix time in ms, in UTC (civil-from-days, proleptic Gregorian).
fn utc_day(ms: u64) -> String {
    let days = (ms / 86_400_000) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}{month:02}{day:02}")
}

#[cfg(test)]
mod tests {
    use super::utc_day;

    #[test]
    fn utc_days() {
        assert_eq!(utc_day(0), "19700101");
        assert_eq!(utc_day(951_782_400_000), "20000229");
        assert_eq!(utc_day(1_795_392_000_000), "20261123");
    }
}
