use crate::error::{Error, Result};

/// Longest sale, user, order or request id, in bytes.
pub const MAX_ID_LEN: usize = 64;

/// The set of all sale ids, for the persister and sweeper to find streams.
pub(crate) const SALES: &str = "seckill:sales";

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

/// The keys of one sale. All share the hash tag `{sale:ID}`, so they live in
/// one Redis Cluster slot and one script can touch them all.
#[derive(Clone, Debug)]
pub(crate) struct SaleKeys {
    pub id: String,
    base: String,
    pub meta: String,
    pub stock: String,
    pub tokens: String,
    pub users: String,
    pub requests: String,
    pub orders: String,
    pub seq: String,
    pub days: String,
    pub states: String,
    pub pending: String,
}

impl SaleKeys {
    pub fn new(id: &str) -> Result<Self> {
        check_id("sale id", id)?;
        let base = format!("seckill:{{sale:{id}}}");
        Ok(Self {
            id: id.to_owned(),
            meta: format!("{base}:meta"),
            stock: format!("{base}:stock"),
            tokens: format!("{base}:tokens"),
            users: format!("{base}:users"),
            requests: format!("{base}:requests"),
            orders: format!("{base}:orders"),
            seq: format!("{base}:seq"),
            days: format!("{base}:days"),
            states: format!("{base}:states"),
            pending: format!("{base}:pending"),
            base,
        })
    }

    /// The seeds' per-day order record (`YYYYMMDD`), kept by the baseline
    /// strategies.
    pub fn day(&self, day: &str) -> String {
        format!("{}:orders:{day}", self.base)
    }

    /// The keys the purchase scripts take, in their order.
    pub fn purchase(&self) -> [&str; 8] {
        [
            &self.meta,
            &self.stock,
            &self.users,
            &self.requests,
            &self.orders,
            &self.seq,
            &self.states,
            &self.pending,
        ]
    }

    /// The keys the order lifecycle scripts take, in their order.
    pub fn lifecycle(&self) -> [&str; 5] {
        [
            &self.stock,
            &self.users,
            &self.orders,
            &self.states,
            &self.pending,
        ]
    }

    /// Every key of the sale but the per-day records.
    pub fn all(&self) -> [&str; 10] {
        [
            &self.meta,
            &self.stock,
            &self.tokens,
            &self.users,
            &self.requests,
            &self.orders,
            &self.seq,
            &self.days,
            &self.states,
            &self.pending,
        ]
    }

    /// The lock the `lock` strategy takes: same hash tag as the sale.
    pub fn lock_name(&self) -> String {
        format!("sale:{}", self.id)
    }
}
