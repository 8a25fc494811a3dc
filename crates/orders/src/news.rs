//! Where each master keeps the signals the background tasks wait on, so
//! that their cost follows what happens (orders, expiries), not how many
//! sales exist:
//! - `seckill:{news:<tag>}:ledger:2`: the ledger, a stream of the events of
//!   every armed sale of the master. A persister that read a sale's stream
//!   to its end arms it: it writes `"<ledger> <group> <payment timeout>"`
//!   into the sale hash's field `n` (and the ledger alone into `l`, which
//!   stays when a busy sale is disarmed, for `backlog.rs` to count what
//!   it told and nobody read yet). From then on the engine's scripts
//!   write each entry they append to the sale's stream to the ledger too,
//!   as `{ sale hash key, "<entry id> <timeout>", event … }`, and write a
//!   settlement to the ledger alone, as `{ sale hash key, "*", event … }`
//!   (`tell` in the engine's `lua/prelude.lua`). The sale's consumer group
//!   stays where the arming read left it: while `n` is there, all the
//!   stream holds past it was told (`armed_end`), and whatever disarms the
//!   sale first moves the group past what it told. A sweep of the due
//!   index tells the expiries of many sales in one entry, `{ "*", "expired", then per order its sale
//!   hash key, generation, ref, "<buyer>|<qty>" }` (the engine's
//!   `lua/expire.lua`): the persisters read the events of all of the
//!   master's quiet sales from this warm key (and the one below, in the
//!   same call), and never the sales' own streams. It has the consumer
//!   group `persister` with its pending list: an entry is acknowledged
//!   once committed to SQL, and taken over with `XAUTOCLAIM` from a
//!   persister that died before.
//! - `seckill:{news:<tag>}:ledger`: the earlier releases' ledger, whose
//!   entries each tell one sale (their persisters read it so): sales they
//!   armed tell there. Read, taken over and drained as the ledger is, so
//!   two releases can share a server during an upgrade; the expiries a
//!   sweep of this release tells in one entry wait in the ledger above
//!   until a persister of this release reads them. An earlier release,
//!   whose scripts moved an armed sale's group at each purchase, reads
//!   the stream of a sale armed here (its slow full read) or disarms one
//!   without moving its group: what this release told is then read
//!   again, a second write of the same events, which SQL takes as a no-op.
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
//!   then reads nothing of the sale's stream (`ledger.rs`, `Told::dues`).
//! - `…:mark`: a token set once; a master that lost its data lost it too,
//!   which tells the watch for lost sales (`lost.rs`) to look.
//!
//! `<tag>` is the smallest number whose slot the master serves, so every
//! key is on the master of the sales it speaks of and one script can
//! touch both. Scripts find a sale's id in its hash key
//! `seckill:{sale:<id>}:sale` (the engine's layout, `keys.rs`).

use redis::AsyncCommands;
use redis::aio::ConnectionLike;
use seckill_engine::StreamEntry;
use seckill_redis::{Master, Target, key_slot};

use crate::error::{Error, Result};

/// Tags are searched up to here; 16384 slots are all hit long before.
const MAX_TAG: u32 = 1_000_000;

/// One master's signal keys.
#[derive(Clone, Debug)]
pub(crate) struct MasterKeys {
    pub news: String,
    /// The ledger sales are armed with.
    pub ledger: String,
    /// The earlier releases' ledger, read beside it.
    pub earlier_ledger: String,
    pub readers: String,
    pub due: String,
    pub mark: String,
}

impl MasterKeys {
    /// The keys beside `ledger` (either of a master's ledgers).
    pub fn of_ledger(ledger: &str) -> Option<Self> {
        let rest = ledger.strip_prefix("seckill:{news:")?;
        let tag = rest
            .strip_suffix("}:ledger:2")
            .or_else(|| rest.strip_suffix("}:ledger"))?;
        Some(Self::new(tag.parse().ok()?))
    }

    /// Both ledgers, the one sales are armed with first.
    pub fn ledgers(&self) -> [&str; 2] {
        [&self.ledger, &self.earlier_ledger]
    }

    fn new(tag: u32) -> Self {
        let news = format!("seckill:{{news:{tag}}}");
        Self {
            ledger: format!("{news}:ledger:2"),
            earlier_ledger: format!("{news}:ledger"),
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
                    .arg("seckill:{news:*}:ledger*")
                    .arg("COUNT")
                    .arg(1_000)
                    .query_async(&mut conn)
                    .await?;
                found.extend(
                    keys.into_iter()
                        .filter(|k| MasterKeys::of_ledger(k).is_some())
                        .filter(|k| {
                            self.masters
                                .iter()
                                .all(|(_, keys)| !keys.ledgers().contains(&k.as_str()))
                        }),
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

/// Whether sale hash `sale` is armed: while it is, the engine's scripts
/// leave its stream's group where the read that armed it left it and tell
/// all that comes after (`tell`, the engine's `lua/prelude.lua`), so all
/// of the stream counts as delivered; not armed, the group says how far.
pub(crate) async fn is_armed(
    conn: &mut (impl ConnectionLike + Send + Sync),
    sale: &str,
) -> Result<bool> {
    let n: Option<String> = conn.hget(sale, "n").await?;
    Ok(n.as_deref().is_some_and(armed))
}

/// The last entry of sale hash `sale`'s stream `stream` when the sale is
/// armed ("0-0" when a trim emptied it), else `None` (see `is_armed`).
pub(crate) async fn armed_end(
    conn: &mut (impl ConnectionLike + Send + Sync),
    sale: &str,
    stream: &str,
) -> Result<Option<String>> {
    if !is_armed(conn, sale).await? {
        return Ok(None);
    }
    let last: redis::Value = conn.xrevrange_count(stream, "+", "-", 1).await?;
    let last = StreamEntry::list(last)?.into_iter().next();
    Ok(Some(last.map_or_else(|| "0-0".to_owned(), |e| e.id)))
}

/// Whether field `n` of a sale hash arms it: `"<ledger> <group> <payment
/// timeout>"`, as the engine's `tell` reads it.
fn armed(n: &str) -> bool {
    let parts: Vec<&str> = n.split(' ').collect();
    matches!(parts[..], [ledger, group, timeout]
        if !ledger.is_empty() && !group.is_empty()
            && !timeout.is_empty() && timeout.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_ledger_names_its_masters_keys_and_nothing_else_does() {
        for ledger in ["seckill:{news:5}:ledger:2", "seckill:{news:5}:ledger"] {
            let keys = MasterKeys::of_ledger(ledger).unwrap();
            assert_eq!(keys.due, "seckill:{news:5}:due");
            assert!(keys.ledgers().contains(&ledger), "{ledger}");
        }
        for other in [
            "seckill:{news:5}:ledger-drill",
            "seckill:{news:x}:ledger",
            "seckill:{news:5}:due",
        ] {
            assert!(MasterKeys::of_ledger(other).is_none(), "{other}");
        }
    }

    #[test]
    fn a_sale_is_armed_by_a_ledger_a_group_and_a_timeout() {
        assert!(armed("seckill:{news:0}:ledger:2 persister 900"));
        for not in ["", "l g", "l g 9 x", "l g 9s", "l  9", "l g "] {
            assert!(!armed(not), "{not:?}");
        }
    }
}
