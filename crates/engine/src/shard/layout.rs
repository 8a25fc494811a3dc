//! Where a sharded sale's parts are: its [`Layout`] of keys, the tags that
//! [`place`] its shards on different masters, and a buyer's home shard.

use std::time::Duration;

use seckill_redis::{Target, key_slot};

use crate::error::{Error, Result};
use crate::keys::{MAX_SHARD_TAG, SaleKeys, shard_id};
use crate::sale::Sale;

/// Longest a buyer of an empty shard waits for a refill before
/// [`crate::Error::StockMoving`].
pub const REFILL_WAIT: Duration = Duration::from_secs(1);

/// The home shard of `user_id` among `shards`: where all of that buyer's
/// purchases go. CRC16 (as Redis Cluster hashes keys), so every process
/// and every version agrees.
///
/// ```
/// let home = seckill_engine::home_shard("alice", 4);
/// assert!(home < 4);
/// assert_eq!(home, seckill_engine::home_shard("alice", 4));
/// ```
pub fn home_shard(user_id: &str, shards: usize) -> usize {
    usize::from(key_slot(user_id)) % shards.max(1)
}

/// A sharded sale's keys: the sale's own and each shard's.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    pub sale: SaleKeys,
    pub shards: Vec<SaleKeys>,
    pub generation: u64,
}

impl Layout {
    /// From a sale's `gen` and `shards` fields as read (`"1,7,12"`); `None`
    /// for a sale that is not sharded (or not there).
    pub fn from_fields(
        id: &str,
        generation: Option<u64>,
        tags: Option<&str>,
    ) -> Result<Option<Self>> {
        match (generation, tags) {
            (Some(generation), Some(tags)) => Ok(Some(Self::new(id, generation, tags)?)),
            _ => Ok(None),
        }
    }

    /// A sharded sale's layout, from the sale as [`Engine::sale`] read it.
    pub fn of(sale: &Sale) -> Result<Self> {
        let shards = sale
            .sharding
            .iter()
            .flat_map(|s| &s.shards)
            .map(|s| SaleKeys::new(&s.id))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            sale: SaleKeys::new(&sale.id)?,
            shards,
            generation: sale.generation,
        })
    }

    pub fn new(id: &str, generation: u64, tags: &str) -> Result<Self> {
        let shards = tags
            .split(',')
            .map(|tag| {
                let tag: u32 = tag.parse().map_err(|_| Error::Invalid {
                    field: "shards",
                    reason: format!("sale `{id}` has an unreadable shard list {tags:?}"),
                })?;
                SaleKeys::new(&shard_id(id, tag))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            sale: SaleKeys::new(id)?,
            shards,
            generation,
        })
    }
}

/// Tags for `n` shards of sale `id`, each one's slot on the next master
/// in turn, so the shards spread evenly over the masters serving now.
pub(crate) async fn place(target: &Target, id: &str, n: u32) -> Result<Vec<u32>> {
    let masters = target.masters().await?;
    if masters.is_empty() {
        return Err(Error::Invalid {
            field: "shards",
            reason: "no master serves slots now".to_owned(),
        });
    }
    let mut tags = Vec::with_capacity(n as usize);
    let mut tag = 0;
    for i in 0..n as usize {
        let master = &masters[i % masters.len()];
        loop {
            if tag > MAX_SHARD_TAG {
                return Err(Error::Invalid {
                    field: "shards",
                    reason: "no shard tag maps to every master".to_owned(),
                });
            }
            // The slot of the shard's hash tag, which all its keys share.
            let slot = key_slot(&format!("{{sale:{}}}", shard_id(id, tag)));
            tag += 1;
            if master.serves(slot) {
                tags.push(tag - 1);
                break;
            }
        }
    }
    Ok(tags)
}
