//! Where each master keeps the signals the background tasks wait on, so
//! that their cost follows what happens (orders, expiries), not how many
//! sales exist:
//! - `seckill:{news:<tag>}:ledger`: the ledger, a stream of the events of
//!   every armed sale of the master. A persister that read a sale's stream
//!   to its end arms it: it writes `"<ledger> <group> <payment timeout>"`
//!   into the sale hash's field `n` (and the ledger alone into `l`, which
//!   stays when a busy sale is disarmed, for `backlog.rs` to count what
//!   it told and nobody read yet). From then on the engine's scripts
//!   write each entry they append to the sale's stream to the ledger too,
//!   as `{ sale hash key, "<entry id> <timeout>", event … }`, and move the
//!   sale's consumer group past it, and write a settlement to the ledger
//!   alone, as `{ sale hash key, "*", event … }` (`tell` in the engine's
//!   `lua/prelude.lua`): the persisters read the events of all of the
//!   master's quiet sales from this one warm key, and never the sales'
//!   own streams. It has the consumer group `persister` with its pending
//!   list: an entry is acknowledged once committed to SQL, and taken over
//!   with `XAUTOCLAIM` from a persister that died before.
//! - `seckill:{news:<tag>}`: the news set, sale hash keys whose stream
//!   has more to read than one batch held.
//! - `…:readers`: hash, persister -> when it last read (ms): a persister
//!   gone quiet for longer than its batches may stay uncommitted has died,
//!   and its batches are taken over.
//! - `…:due`: sorted set, sale hash key -> when its next order comes due
//!   (ms): filed once its purchases read are committed (from the ledger,
//!   `lua/ledger_done.lua`) or as they are read (from the sale's own
//!   stream, `lua/read_news.lua`), refiled by each expiry. A quiet sale
//!   told one purchase of one order files that order instead, as
//!   `"<sale hash key> <ref> <generation> <quantity> <buyer>"`: its expiry
//!   then reads nothing of the sale's stream (`Told::dues`).
//! - `…:mark`: a token set once; a master that lost its data lost it too,
//!   which tells the watch for lost sales (`lost.rs`) to look.
//!
//! `<tag>` is the smallest number whose slot the master serves, so every
//! key is on the master of the sales it speaks of and one script can
//! touch both. Scripts find a sale's id in its hash key
//! `seckill:{sale:<id>}:sale` (the engine's layout, `keys.rs`).

use std::collections::HashMap;

use seckill_engine::{Event, StreamEntry, entry_number};
use seckill_redis::{Conn, Master, Target, key_slot};

use crate::config::GROUP;
use crate::error::{Error, Result};

/// A ledger entry as the sale's stream holds it: the sale's hash key and
/// the entry under its id in that stream, or under the ledger entry's own
/// id when told alone (`"*"`). `None` for an entry not of this layout.
pub(crate) fn told_entry(ledger_entry: StreamEntry) -> Option<(String, StreamEntry)> {
    told_with_timeout(ledger_entry).map(|(sale, _, entry)| (sale, entry))
}

/// [`told_entry`] and the sale's payment timeout in seconds, which a
/// purchase's entry carries (`"<entry id> <timeout>"`).
fn told_with_timeout(ledger_entry: StreamEntry) -> Option<(String, Option<u64>, StreamEntry)> {
    let StreamEntry { id, mut fields } = ledger_entry;
    if fields.is_empty() {
        return None;
    }
    let (sale, at) = fields.remove(0);
    let (id, timeout) = match at.split_once(' ') {
        _ if at == "*" => (id, None),
        Some((id, timeout)) => (id.to_owned(), timeout.parse().ok()),
        None => (at, None),
    };
    Some((sale, timeout, StreamEntry { id, fields }))
}

/// A sale told more entries than this in one read of its ledger is busy:
/// it is read from its own stream from then on, where one read serves many
/// of its events and its purchases pay nothing to tell.
const BUSY: usize = 16;

/// Ledger entries read and not yet committed: their events, their ids,
/// and what acknowledging them files (each sale's next pay-by time) or
/// changes (busy sales, read from their own streams from then on).
#[derive(Debug, Default)]
pub(crate) struct Told {
    pub ids: Vec<String>,
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
    /// Decodes `entries`, as read from a master's ledger.
    pub fn new(entries: Vec<StreamEntry>) -> Self {
        let mut told = Self::default();
        for entry in entries {
            told.ids.push(entry.id.clone());
            let Some((key, timeout, entry)) = told_with_timeout(entry) else {
                continue;
            };
            let Some(sale) = sale_of(&key) else { continue };
            let events = Event::decode(sale, &entry);
            let told_sale = told.sales.entry(sale.to_owned()).or_default();
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
            told.events.extend(events);
        }
        told
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

/// Up to `count` entries of `ledger` never delivered before, read for
/// `consumer` into the group's pending list.
pub(crate) async fn read_ledger(
    conn: &mut Conn,
    ledger: &str,
    consumer: &str,
    count: usize,
) -> Result<Vec<StreamEntry>> {
    let read: Option<Vec<(String, redis::Value)>> = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(GROUP)
        .arg(consumer)
        .arg("COUNT")
        .arg(count)
        .arg("STREAMS")
        .arg(ledger)
        .arg(">")
        .query_async(conn)
        .await?;
    Ok(match read.and_then(|mut r| r.pop()) {
        Some((_, entries)) => StreamEntry::list(entries)?,
        None => Vec::new(),
    })
}

/// The id of the sale whose hash key is `key` (`seckill:{sale:<id>}:sale`).
pub(crate) fn sale_of(key: &str) -> Option<&str> {
    key.strip_prefix("seckill:{sale:")?.strip_suffix("}:sale")
}

/// Tags are searched up to here; 16384 slots are all hit long before.
const MAX_TAG: u32 = 1_000_000;

/// One master's signal keys.
#[derive(Clone, Debug)]
pub(crate) struct MasterKeys {
    pub news: String,
    pub ledger: String,
    pub readers: String,
    pub due: String,
    pub mark: String,
}

impl MasterKeys {
    /// The keys beside `ledger` (`seckill:{news:<tag>}:ledger`).
    pub fn of_ledger(ledger: &str) -> Option<Self> {
        let tag = ledger
            .strip_prefix("seckill:{news:")?
            .strip_suffix("}:ledger")?;
        Some(Self::new(tag.parse().ok()?))
    }

    fn new(tag: u32) -> Self {
        let news = format!("seckill:{{news:{tag}}}");
        Self {
            ledger: format!("{news}:ledger"),
            readers: format!("{news}:readers"),
            due: format!("{news}:due"),
            mark: format!("{news}:mark"),
            news,
        }
    }
}

/// The masters now and their signal keys.
#[derive(Debug)]
pub(crate) struct Topology {
    masters: Vec<(Master, MasterKeys)>,
}

impl Topology {
    /// Asks `target` which masters serve which slots.
    pub async fn read(target: &Target) -> Result<Self> {
        let mut masters = Vec::new();
        for master in target.masters().await? {
            let tag = (0..MAX_TAG)
                .find(|&tag| master.serves(key_slot(&MasterKeys::new(tag).news)))
                .ok_or_else(|| Error::Invalid {
                    what: "cluster",
                    reason: format!("no tag maps to master {}", master.addr()),
                })?;
            masters.push((master, MasterKeys::new(tag)));
        }
        Ok(Self { masters })
    }

    /// Whether every slot has a master. Not so during a failover: a
    /// master left out here would have its signals unread, so the caller
    /// asks again soon.
    pub fn complete(&self) -> bool {
        let served: u32 = self
            .masters
            .iter()
            .map(|(m, _)| (0..=16383u16).filter(|slot| m.serves(*slot)).count() as u32)
            .sum();
        served >= 16384
    }

    /// Whether `other` has the same masters serving the same slots.
    pub fn same_as(&self, other: &Topology) -> bool {
        let shape = |t: &Topology| -> Vec<(String, Vec<(u16, u16)>)> {
            let mut v: Vec<_> = t
                .masters
                .iter()
                .map(|(m, _)| (m.addr(), m.slots().to_vec()))
                .collect();
            v.sort();
            v
        };
        shape(self) == shape(other)
    }

    /// How many masters.
    pub fn len(&self) -> usize {
        self.masters.len()
    }

    /// Master `i`'s signal keys.
    pub fn keys(&self, i: usize) -> &MasterKeys {
        &self.masters[i].1
    }

    /// Master `i`'s address, for logs.
    pub fn addr(&self, i: usize) -> String {
        self.masters[i].0.addr()
    }

    /// The ledgers the masters hold that no master's keys name: left by a
    /// change of masters that moved a ledger's slot to a master whose tag
    /// is another. Asks each master with `SCAN`, so only once per change.
    pub async fn orphan_ledgers(&self) -> Result<Vec<String>> {
        let mut found = Vec::new();
        for (master, _) in &self.masters {
            let mut conn = master.client()?.get_multiplexed_async_connection().await?;
            let mut cursor = 0u64;
            loop {
                let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg("seckill:{news:*}:ledger")
                    .arg("COUNT")
                    .arg(1_000)
                    .query_async(&mut conn)
                    .await?;
                found.extend(
                    keys.into_iter()
                        .filter(|k| self.masters.iter().all(|(_, keys)| keys.ledger != *k)),
                );
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(found)
    }

    /// The master serving sale `id`'s keys, if any serves its slot.
    pub fn of(&self, id: &str) -> Option<usize> {
        let slot = key_slot(&format!("{{sale:{id}}}"));
        self.masters.iter().position(|(m, _)| m.serves(slot))
    }
}

/// A background task's place in the registry's log of sale changes.
#[derive(Debug, Default)]
pub(crate) struct Follower {
    /// `None`: at start, or after a change could not be applied.
    at: Option<String>,
}

/// What [`Follower::next`] learned.
pub(crate) enum Learned {
    /// Every sale now: what the caller knew is to be forgotten.
    All(Vec<String>),
    /// The sales changed (made, ended, removed) since the last call.
    Changed(Vec<String>),
}

impl Follower {
    /// The sales changed since the last call; every sale the first time,
    /// after [`Follower::restart`], or once fallen behind the log.
    pub async fn next(&mut self, engine: &seckill_engine::Engine) -> Result<Learned> {
        const PAGE: usize = 1_000;
        if let Some(mut at) = self.at.clone() {
            let mut changed = std::collections::BTreeSet::new();
            while let Some(page) = engine.sale_changes(&at, PAGE).await? {
                let full = page.len() == PAGE;
                for (place, sale) in page {
                    at = place;
                    if !sale.is_empty() {
                        changed.insert(sale);
                    }
                }
                if !full {
                    self.at = Some(at);
                    return Ok(Learned::Changed(changed.into_iter().collect()));
                }
            }
        }
        // The mark first: no change made after the list is missed.
        let mark = engine.sale_log_mark().await?;
        let ids = engine.sale_ids().await?;
        self.at = Some(mark);
        Ok(Learned::All(ids))
    }

    /// Makes the next call list every sale: some changes were not applied.
    pub fn restart(&mut self) {
        self.at = None;
    }
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
        let told = Told::new(entries);
        assert_eq!(told.ids.len(), 6 + BUSY + 1, "every entry is acknowledged");
        assert_eq!(told.ids[0], "900-0");
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
}
