use crate::error::{Error, Result};

/// Longest sale, user, order or request id, in bytes.
pub const MAX_ID_LEN: usize = 64;

/// The set of all sale ids, for the persister and sweeper to find streams.
pub(crate) const SALES: &str = "seckill:sales";

/// The stream logging every change to [`SALES`] and to a sale's end
/// (entries `sale <id>`), and readers' places (`mark 1`): see `registry.rs`.
pub(crate) const SALES_LOG: &str = "seckill:sales:log";

/// Channel on which stock returning to a sale is announced (payload: sale id).
pub const RESTOCK_CHANNEL: &str = "seckill:restock";

/// Checks an id that ends up in keys, hash fields and stream entries:
/// 1–64 bytes of `[A-Za-z0-9_-]`, so no id can reach into another key's name
/// or break the `|`-separated values the scripts store.
pub fn check_id(field: &'static str, id: &str) -> Result<()> {
    let reason = if id.is_empty() {
        "must not be empty".to_owned()
    } else if id.len() > MAX_ID_LEN {
        format!("longer than {MAX_ID_LEN} bytes")
    } else if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        format!("contains {c:?}; only A-Z a-z 0-9 _ - are allowed")
    } else {
        return Ok(());
    };
    Err(Error::Invalid { field, reason })
}

/// The largest shard tag: tags are searched from 0 until each lands on
/// its master, and one of 5 digits always does.
pub(crate) const MAX_SHARD_TAG: u32 = 99_999;

/// How much longer a shard's id is than its sale's: `~` and the tag.
pub(crate) const SHARD_SUFFIX_LEN: usize = 1 + MAX_SHARD_TAG.ilog10() as usize + 1;

/// Joins a sharded sale's id and one shard's tag: `<sale>~<tag>`. `~` is
/// not allowed in ids, so no sale created through the API can be named so.
pub(crate) fn shard_id(sale: &str, tag: u32) -> String {
    format!("{sale}~{tag}")
}

/// Whether `id` names a shard of a sharded sale (`<sale>~<tag>`).
///
/// ```
/// assert!(seckill_engine::is_shard("drop-1~3"));
/// assert!(!seckill_engine::is_shard("drop-1"));
/// ```
pub fn is_shard(id: &str) -> bool {
    id.contains('~')
}

/// The sale an id names: the sale of a shard (`<sale>~<tag>`), or the id.
///
/// ```
/// assert_eq!(seckill_engine::sale_of("drop-1~3"), "drop-1");
/// assert_eq!(seckill_engine::sale_of("drop-1"), "drop-1");
/// ```
pub fn sale_of(id: &str) -> &str {
    id.split_once('~').map_or(id, |(sale, _)| sale)
}

/// Checks an id that names a sale's keys: a sale id, or a shard's
/// `<sale>~<tag>` (tag: 1-5 digits).
pub(crate) fn check_sale_key(field: &'static str, id: &str) -> Result<()> {
    match id.split_once('~') {
        None => check_id(field, id),
        Some((sale, tag)) => {
            check_id(field, sale)?;
            if tag.is_empty()
                || tag.len() >= SHARD_SUFFIX_LEN
                || !tag.bytes().all(|b| b.is_ascii_digit())
            {
                return Err(Error::Invalid {
                    field,
                    reason: format!("a shard's tag must be 1-{} digits", SHARD_SUFFIX_LEN - 1),
                });
            }
            Ok(())
        }
    }
}

/// The keys of one sale. All share the hash tag `{sale:ID}`, so they live in
/// one Redis Cluster slot and one script can touch them all.
///
/// The production path (`atomic`, `coalesced`) keeps a sale in four keys,
/// the first two all a purchase touches:
/// - `sale`: one hash holding the sale's settings (`id`, `name`, `stock`,
///   `limit`, `start`, `end`, `inventory`, `payment_timeout`, `gen`), its
///   units `left`, the expiry cursor `swept`, `n` (once a persister armed
///   the sale, the ledger each appended entry is also told to: `tell` in
///   `lua/prelude.lua`) and `q` (written by an earlier release's atomic
///   purchases, deleted when a persister arms the sale), and per buyer
///   `u:<user>` (units held; only for sales with a limit) and per request
///   id `r:<user>/<req>` (`<ms>-<n>-<i>|<qty>` of the order it bought);
/// - `orders`: the stream of order events, which is also where a pending
///   order lives (see `event.rs`), opened at creation by an entry `o
///   <gen>` that carries no order (`lua/create_sale.lua`);
/// - `settled`: hash `<ms>-<n>-<i>` -> `<state>|<user>|<qty>` of every order
///   paid, cancelled or expired;
/// - `persisting`: hash of the stream ranges persisters have read but not yet
///   committed to SQL (written by the `orders` crate's persister).
///
/// A sharded sale (see `shard/mod.rs`) is a sale of this layout whose
/// `left` is the pool, plus one sale of this layout per shard, named
/// `<sale>~<tag>`, and `transfers`: the stream of every unit moved between
/// pool and shards.
///
/// The baselines keep the classic recipes' keys (docs/strategies.md): `stock` (a counter),
/// `tokens` (a list), `users` (hash user -> units) and per-day order records.
#[derive(Clone, Debug)]
pub(crate) struct SaleKeys {
    pub id: String,
    base: String,
    pub sale: String,
    pub orders: String,
    pub settled: String,
    pub persisting: String,
    pub transfers: String,
    pub stock: String,
    pub tokens: String,
    pub users: String,
    pub days: String,
}

impl SaleKeys {
    /// The keys of sale `id`, or of a shard of a sharded sale (`<sale>~<tag>`).
    pub fn new(id: &str) -> Result<Self> {
        check_sale_key("sale id", id)?;
        let base = format!("seckill:{{sale:{id}}}");
        Ok(Self {
            id: id.to_owned(),
            sale: format!("{base}:sale"),
            orders: format!("{base}:orders"),
            settled: format!("{base}:settled"),
            persisting: format!("{base}:persisting"),
            transfers: format!("{base}:transfers"),
            stock: format!("{base}:stock"),
            tokens: format!("{base}:tokens"),
            users: format!("{base}:users"),
            days: format!("{base}:days"),
            base,
        })
    }

    /// The classic strategies' per-day order record (`YYYYMMDD`), kept by the baseline
    /// strategies.
    pub fn day(&self, day: &str) -> String {
        format!("{}:orders:{day}", self.base)
    }

    /// The keys the purchase scripts take, in their order.
    pub fn purchase(&self) -> [&str; 2] {
        [&self.sale, &self.orders]
    }

    /// The keys the order lifecycle scripts take, in their order.
    pub fn lifecycle(&self) -> [&str; 3] {
        [&self.sale, &self.orders, &self.settled]
    }

    /// Every key of the sale but the per-day records.
    pub fn all(&self) -> [&str; 9] {
        [
            &self.sale,
            &self.orders,
            &self.settled,
            &self.persisting,
            &self.transfers,
            &self.stock,
            &self.tokens,
            &self.users,
            &self.days,
        ]
    }

    /// The lock the `lock` strategy takes: same hash tag as the sale.
    pub fn lock_name(&self) -> String {
        format!("sale:{}", self.id)
    }
}
