//! The ledger, each master's stream of the events of its quiet sales
//! (layout: `news.rs`): what its entries tell, what acknowledging a read
//! of them files for expiry, and reading it.

use std::collections::HashMap;

use seckill_engine::{Event, StreamEntry, entry_number};
use seckill_redis::Conn;

use crate::config::GROUP;
use crate::error::Result;

/// The sales' entries a ledger entry tells, each with its sale's hash key:
/// one sale's entry under its id in the sale's stream, or under the ledger
/// entry's own id when told alone (`"*"`); or a sweep's expiries, one
/// entry per order under the ledger entry's id. Nothing for an entry not
/// of these layouts.
pub(crate) fn told_entries(ledger_entry: StreamEntry) -> Vec<(String, StreamEntry)> {
    told_with_timeout(ledger_entry)
        .into_iter()
        .map(|(sale, _, entry)| (sale, entry))
        .collect()
}

/// [`told_entries`], each with its sale's payment timeout in seconds,
/// which a purchase's entry carries (`"<entry id> <timeout>"`).
fn told_with_timeout(ledger_entry: StreamEntry) -> Vec<(String, Option<u64>, StreamEntry)> {
    let StreamEntry { id, fields } = ledger_entry;
    let mut fields = fields.into_iter();
    let Some((sale, at)) = fields.next() else {
        return Vec::new();
    };
    if sale == "*" && at == "expired" {
        // A sweep's: after the marker, per order its sale hash key and
        // generation, then its ref and "<buyer>|<qty>".
        let mut told = Vec::new();
        while let (Some((sale, generation)), Some(order)) = (fields.next(), fields.next()) {
            let fields = vec![("expired".to_owned(), generation), order];
            let id = id.clone();
            told.push((sale, None, StreamEntry { id, fields }));
        }
        return told;
    }
    let (id, timeout) = match at.split_once(' ') {
        _ if at == "*" => (id, None),
        Some((id, timeout)) => (id.to_owned(), timeout.parse().ok()),
        None => (at, None),
    };
    let fields = fields.collect();
    vec![(sale, timeout, StreamEntry { id, fields })]
}

/// A sale told more entries than this in one read of its ledger is busy:
/// it is read from its own stream from then on, where one read serves many
/// of its events and its purchases pay nothing to tell.
const BUSY: usize = 16;

/// Ledger entries read and not yet committed: their events, their ids per
/// ledger, and what acknowledging them files (each sale's next pay-by
/// time) or changes (busy sales, read from their own streams from then
/// on).
#[derive(Debug, Default)]
pub(crate) struct Told {
    /// Per ledger read, the ids of its entries.
    pub ids: Vec<(String, Vec<String>)>,
    pub events: Vec<Event>,
    /// Per sale id, what its entries told.
    sales: HashMap<String, Sale>,
}

/// What one read of the ledger told of one sale.
#[derive(Debug, Default)]
struct Sale {
    /// Its hash key, as told.
    key: String,
    /// Entries told.
    entries: usize,
    /// Purchases told, and the earliest pay-by time among them (ms, by
    /// the server's clock).
    purchases: usize,
    earliest: Option<u64>,
    /// The last purchase's order as the engine's sweep of a due index
    /// takes one alone (`expire_order` in its `lua/expire.lua`):
    /// `"<ref> <generation> <quantity> <buyer>"`, when it holds one order.
    order: Option<String>,
}

impl Told {
    /// Decodes `reads`: per ledger of a master, its entries read.
    pub fn new(reads: Vec<(String, Vec<StreamEntry>)>) -> Self {
        let mut told = Self::default();
        for (ledger, entries) in reads {
            if entries.is_empty() {
                continue;
            }
            told.ids
                .push((ledger, entries.iter().map(|e| e.id.clone()).collect()));
            for (key, timeout, entry) in entries.into_iter().flat_map(told_with_timeout) {
                told.add(key, timeout, entry);
            }
        }
        told
    }

    /// Whether nothing was read.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Adds what one sale's `entry` told, `key` its hash key.
    fn add(&mut self, key: String, timeout: Option<u64>, entry: StreamEntry) {
        let Some(sale) = sale_of(&key) else { return };
        let events = Event::decode(sale, &entry);
        let told_sale = self.sales.entry(sale.to_owned()).or_default();
        told_sale.entries += 1;
        // A purchase's order comes due its timeout after its entry.
        let due = timeout
            .filter(|_| entry.fields.first().is_some_and(|(name, _)| name == "b"))
            .map(|timeout| entry_number(&entry.id).0 + timeout * 1_000);
        if let Some(due) = due {
            told_sale.purchases += 1;
            told_sale.earliest = Some(told_sale.earliest.map_or(due, |e| e.min(due)));
            told_sale.order = match events.as_slice() {
                [e] if entry.fields.len() == 2 => Some(format!(
                    "{}-0 {} {} {}",
                    entry.id, e.generation, e.quantity, e.user_id
                )),
                _ => None,
            };
        }
        if told_sale.key.is_empty() {
            told_sale.key = key;
        }
        self.events.extend(events);
    }

    /// Each sale told and how many entries.
    pub fn sales(&self) -> impl Iterator<Item = (&str, usize)> {
        self.sales
            .iter()
            .map(|(sale, told)| (sale.as_str(), told.entries))
    }

    /// What to file in the due index for the purchases told, and when each
    /// comes due: a sale told one purchase of one order files that order
    /// (its sweep then reads nothing of the sale's stream), any other the
    /// sale's hash key under its earliest pay-by time (its sweep walks the
    /// stream, where one walk serves many orders). Shards always file
    /// their key: their sweep is their refiller's to hear of.
    pub fn dues(&self) -> impl Iterator<Item = (String, u64)> {
        self.sales.iter().filter_map(|(sale, told)| {
            let due = told.earliest?;
            Some(match &told.order {
                Some(order) if told.purchases == 1 && !sale.contains('~') => {
                    (format!("{} {order}", told.key), due)
                }
                _ => (told.key.clone(), due),
            })
        })
    }

    /// The sales told more than [`BUSY`] entries.
    pub fn busy(&self) -> impl Iterator<Item = &str> {
        self.sales
            .iter()
            .filter(|(_, told)| told.entries > BUSY)
            .map(|(sale, _)| sale.as_str())
    }
}

/// Makes `ledger`'s consumer group, and the ledger if missing, from its
/// start, so nothing told before is skipped; one already made is kept.
pub(crate) async fn make_ledger_group(conn: &mut Conn, ledger: &str) -> Result<()> {
    let made: redis::RedisResult<()> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(ledger)
        .arg(GROUP)
        .arg("0")
        .arg("MKSTREAM")
        .query_async(conn)
        .await;
    match made {
        Err(e) if e.code() != Some("BUSYGROUP") => Err(e.into()),
        _ => Ok(()),
    }
}

/// Up to `count` entries of each of `ledgers` (one master's) never
/// delivered before, read for `consumer` into their group's pending list,
/// in one call; answered per ledger that had any.
pub(crate) async fn read_ledgers(
    conn: &mut Conn,
    ledgers: &[&str],
    consumer: &str,
    count: usize,
) -> Result<Vec<(String, Vec<StreamEntry>)>> {
    let mut read = redis::cmd("XREADGROUP");
    read.arg("GROUP")
        .arg(GROUP)
        .arg(consumer)
        .arg("COUNT")
        .arg(count)
        .arg("STREAMS")
        .arg(ledgers);
    for _ in ledgers {
        read.arg(">");
    }
    let read: Option<Vec<(String, redis::Value)>> = read.query_async(conn).await?;
    read.unwrap_or_default()
        .into_iter()
        .map(|(ledger, entries)| Ok((ledger, StreamEntry::list(entries)?)))
        .filter(|read| !matches!(read, Ok((_, entries)) if entries.is_empty()))
        .collect()
}

/// The id of the sale whose hash key is `key` (`seckill:{sale:<id>}:sale`).
fn sale_of(key: &str) -> Option<&str> {
    key.strip_prefix("seckill:{sale:")?.strip_suffix("}:sale")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ledger entry: sale `sale`'s event `fields`, told as `at`.
    fn entry(id: &str, sale: &str, at: &str, fields: &[(&str, &str)]) -> StreamEntry {
        let mut all = vec![(format!("seckill:{{sale:{sale}}}:sale"), at.to_owned())];
        all.extend(fields.iter().map(|(n, v)| (n.to_string(), v.to_string())));
        StreamEntry {
            id: id.to_owned(),
            fields: all,
        }
    }

    #[test]
    fn a_read_of_the_ledger_files_each_sale_under_its_earliest_purchase_and_finds_the_busy() {
        let buy = [("b", "7"), ("alice", "1")];
        let mut entries = vec![
            entry("900-0", "a", "1000-0 60", &buy),
            // A settlement between purchases leaves the earliest standing.
            entry("900-1", "a", "*", &[("p", "7"), ("1000-0-0", "ref")]),
            entry("901-0", "a", "1000-1 60", &buy),
            // A settlement, told alone: no pay-by time.
            entry("902-0", "b", "*", &[("p", "7"), ("1000-0-0", "ref")]),
        ];
        for i in 0..=BUSY {
            entries.push(entry(
                &format!("903-{i}"),
                "c",
                &format!("2000-{i} 5"),
                &buy,
            ));
        }
        // One purchase of one order: the order is filed, not its sale,
        // but a shard's sweep is its refiller's to hear of.
        entries.push(entry(
            "904-0",
            "d",
            "3000-0 2",
            &[("b", "7"), ("bob", "2|r-1")],
        ));
        entries.push(entry("904-1", "e~1", "3000-1 2", &buy));
        let told = Told::new(vec![("l".into(), entries)]);
        let ids = &told.ids[0].1;
        assert_eq!(ids.len(), 6 + BUSY + 1, "every entry is acknowledged");
        assert_eq!(ids[0], "900-0");
        let mut dues: Vec<_> = told.dues().collect();
        dues.sort();
        let key = |sale: &str| format!("seckill:{{sale:{sale}}}:sale");
        assert_eq!(
            dues,
            [
                (key("a"), 61_000),
                (key("c"), 7_000),
                (format!("{} 3000-0-0 7 2 bob", key("d")), 5_000),
                (key("e~1"), 5_000),
            ]
        );
        assert_eq!(told.busy().collect::<Vec<_>>(), ["c"]);
        let mut sales: Vec<_> = told.sales().collect();
        sales.sort();
        assert_eq!(
            sales,
            [("a", 3), ("b", 1), ("c", BUSY + 1), ("d", 1), ("e~1", 1)]
        );
        // The purchases' events carry their ids in the sale's stream.
        assert!(told.events.iter().any(|e| e.order_id.contains("1000-1")));
    }

    #[test]
    fn a_sweeps_entry_tells_each_sales_expiry_and_the_ids_stay_with_their_ledger() {
        let key = |sale: &str| format!("seckill:{{sale:{sale}}}:sale");
        // A buyer named like a sale's key splits nothing: the layout is
        // four values per order.
        let sweep = StreamEntry {
            id: "950-0".into(),
            fields: [
                ("*", "expired"),
                (key("a").as_str(), "7"),
                ("900-0-0", "seckill:{sale:x}:sale|1"),
                (key("b").as_str(), "8"),
                ("901-0-0", "bob|2"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .to_vec(),
        };
        let earlier = entry("940-0", "c", "*", &[("expired", "9"), ("930-0-0", "al|1")]);
        let told = Told::new(vec![
            ("new".into(), vec![sweep.clone()]),
            ("old".into(), vec![earlier]),
            ("empty".into(), Vec::new()),
        ]);
        assert_eq!(
            told.ids,
            [
                ("new".to_owned(), vec!["950-0".to_owned()]),
                ("old".to_owned(), vec!["940-0".to_owned()])
            ]
        );
        let mut orders: Vec<_> = told
            .events
            .iter()
            .map(|e| (e.order_id.as_str(), e.user_id.as_str(), e.quantity, e.at_ms))
            .collect();
        orders.sort();
        assert_eq!(
            orders,
            [
                ("a-7-900-0-0", "seckill:{sale:x}:sale", 1, 950),
                ("b-8-901-0-0", "bob", 2, 950),
                ("c-9-930-0-0", "al", 1, 940)
            ]
        );
        assert!(told.dues().next().is_none(), "an expiry files nothing");
        let split: Vec<_> = told_entries(sweep).into_iter().map(|(s, _)| s).collect();
        assert_eq!(split, [key("a"), key("b")]);
    }
}
