//! Sales: what is sold, to whom, when; created, read and deleted in Redis.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::keys::check_id;
use crate::rules::{MAX_STOCK, Rule, Rules};

/// Most shards one sale may be split over.
pub const MAX_SHARDS: u32 = 64;

/// How a sale's stock is kept in Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Inventory {
    /// Units left as a field of the sale's hash, beside everything else a
    /// purchase reads: `atomic` and `coalesced`. The default.
    Hash,
    /// A counter key of units left, as the classic strategies keep it:
    /// `lock`, `watch`, `lua`.
    Counter,
    /// One list element per unit, popped by the `list` strategy.
    List,
}

impl Inventory {
    /// As stored and as serialized: `hash`, `counter`, `list`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Hash => "hash",
            Self::Counter => "counter",
            Self::List => "list",
        }
    }
}

/// A sale to create.
///
/// ```
/// let spec = seckill_engine::SaleSpec::new("drop-1", 100).per_user_limit(2);
/// assert_eq!(spec.stock, 100);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaleSpec {
    /// The sale id: 1-64 bytes of `[A-Za-z0-9_-]`; names its Redis keys.
    pub id: String,
    /// Display name, 1-256 bytes; defaults to the id.
    pub name: String,
    /// Units for sale, at most [`MAX_STOCK`].
    pub stock: u64,
    /// What a purchase must meet: per-user limit, start, end.
    pub rules: Rules,
    /// How the stock is kept, which decides the strategies that can sell it.
    pub inventory: Inventory,
    /// How long a buyer has to pay before the order expires.
    pub payment_timeout_secs: u64,
    /// Sub-sales the stock is split over, each on its own master where the
    /// cluster has enough (1: not sharded). See [`SaleSpec::shards`].
    pub shards: u32,
}

impl SaleSpec {
    /// A sale for the production path (hash inventory), open now, without
    /// a per-user limit.
    pub fn new(id: &str, stock: u64) -> Self {
        Self {
            id: id.to_owned(),
            name: id.to_owned(),
            stock,
            rules: Rules::default(),
            inventory: Inventory::Hash,
            payment_timeout_secs: 900,
            shards: 1,
        }
    }

    /// Splits the stock over `n` shards, for one sale hotter than one
    /// Redis master can serve: each buyer buys on a home shard picked by
    /// user id (so limits and request ids stay exact), and a refiller
    /// moves units from a central pool, and between shards once the pool
    /// is empty, to where buyers are. 1 (the default) is not sharded.
    ///
    /// ```
    /// let spec = seckill_engine::SaleSpec::new("drop-1", 1_000_000).shards(6);
    /// assert_eq!(spec.shards, 6);
    /// ```
    pub fn shards(mut self, n: u32) -> Self {
        self.shards = n;
        self
    }

    /// Sets the display name.
    pub fn name(mut self, name: &str) -> Self {
        name.clone_into(&mut self.name);
        self
    }

    /// Sets the most units one user may buy (default: no limit).
    pub fn per_user_limit(self, limit: u64) -> Self {
        self.rule(Rule::PerUserLimit, Some(limit))
    }

    /// Sets start and end, ms since the Unix epoch (`None`: open now /
    /// until sold out).
    pub fn window(self, starts_at_ms: Option<u64>, ends_at_ms: Option<u64>) -> Self {
        self.rule(Rule::StartsAt, starts_at_ms)
            .rule(Rule::EndsAt, ends_at_ms)
    }

    /// Sets any rule (`None`: without it).
    pub fn rule(mut self, rule: Rule, value: Option<u64>) -> Self {
        self.rules = self.rules.with(rule, value);
        self
    }

    /// Sets how the stock is kept (`List` or `Counter` for the baselines).
    pub fn inventory(mut self, inventory: Inventory) -> Self {
        self.inventory = inventory;
        self
    }

    /// Sets the time to pay, in seconds (default 900).
    pub fn payment_timeout_secs(mut self, secs: u64) -> Self {
        self.payment_timeout_secs = secs;
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        check_id("sale id", &self.id)?;
        let invalid = |field, reason: &str| {
            Err(Error::Invalid {
                field,
                reason: reason.to_owned(),
            })
        };
        // Characters, not bytes: a name is display text in any script.
        if self.name.is_empty() || self.name.chars().count() > 256 {
            return invalid("name", "must be 1-256 characters");
        }
        if self.stock > MAX_STOCK {
            return invalid("stock", "must be at most 1,000,000,000");
        }
        self.rules.validate()?;
        if self.shards == 0 || self.shards > MAX_SHARDS {
            return invalid("shards", &format!("must be 1-{MAX_SHARDS}"));
        }
        // A shard's id, `<id>~<tag>`, must fit where a sale id is stored.
        let longest = crate::keys::MAX_ID_LEN - crate::keys::SHARD_SUFFIX_LEN;
        if self.shards > 1 && self.id.len() > longest {
            return Err(Error::Inconsistent {
                field: "id",
                reason: format!("a sharded sale's id is at most {longest} characters"),
            });
        }
        if self.shards > 1 && self.inventory != Inventory::Hash {
            return invalid(
                "shards",
                "only a sale of the production path (hash inventory) can be sharded",
            );
        }
        Ok(())
    }
}

/// Where a sale stands now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The start time is still ahead.
    Upcoming,
    /// Open and with units left.
    Active,
    /// Open, but no units left (cancelled or expired orders can return some).
    SoldOut,
    /// The end time has passed.
    Ended,
}

/// A sale as stored, with its live counts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Sale {
    /// The sale id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Units the sale was created with.
    pub stock: u64,
    /// Units left to sell now.
    pub remaining: u64,
    /// Units held by orders: `stock - remaining`.
    pub sold: u64,
    /// What a purchase must meet; serialized as its fields
    /// (`per_user_limit`, `starts_at_ms`, `ends_at_ms`).
    #[serde(flatten)]
    pub rules: Rules,
    /// How the stock is kept.
    pub inventory: Inventory,
    /// How long a buyer has to pay before the order expires.
    pub payment_timeout_secs: u64,
    /// Where the sale stands, as of when it was read.
    pub status: Status,
    /// Creation time in ms: tells apart two sales that reused an id.
    pub generation: u64,
    /// For a sharded sale: where its units are now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sharding: Option<Sharding>,
}

/// Where a sharded sale's units are: `pool + in_flight + Σ shard remaining`
/// is the sale's `remaining`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Sharding {
    /// Units not yet given to any shard.
    pub pool: u64,
    /// Units taken from the pool or a shard by a transfer not yet on its
    /// destination.
    pub in_flight: u64,
    /// Transfers made so far (each recorded in the sale's ledger).
    pub transfers: u64,
    /// Whether the refiller found pool and shards empty and no transfer
    /// open: only then is "sold out" answered.
    pub drained: bool,
    /// Each shard, in index order (a buyer's home shard is
    /// [`crate::home_shard`] of its user id).
    pub shards: Vec<ShardStock>,
}

/// One shard of a sharded sale.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ShardStock {
    /// Its id, `<sale>~<tag>`: its keys, its orders' ids and its rows in SQL.
    pub id: String,
    /// Units given to it so far, less those given back.
    pub stock: u64,
    /// Units it has left to sell.
    pub remaining: u64,
    /// Units its buyers hold: `stock - remaining`.
    pub sold: u64,
}

impl Sale {
    /// Builds a sale from the settings fields of its hash and its units
    /// left; `None` if the hash is empty (no such sale).
    pub(crate) fn from_meta(meta: &HashMap<&str, String>, remaining: i64) -> Option<Self> {
        let num = |k: &str| meta.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        let generation = num("gen");
        if generation == 0 {
            return None;
        }
        let stock = num("stock");
        let remaining = u64::try_from(remaining).unwrap_or(0);
        let mut sale = Self {
            id: meta.get("id").cloned().unwrap_or_default(),
            name: meta.get("name").cloned().unwrap_or_default(),
            stock,
            remaining,
            sold: stock.saturating_sub(remaining),
            rules: Rules::from_fields(|f| meta.get(f).and_then(|v| v.parse().ok())),
            inventory: match meta.get("inventory").map(String::as_str) {
                Some("list") => Inventory::List,
                Some("counter") => Inventory::Counter,
                _ => Inventory::Hash,
            },
            payment_timeout_secs: num("payment_timeout"),
            status: Status::Active,
            generation,
            sharding: None,
        };
        sale.status = sale.status_at(now_ms());
        Some(sale)
    }

    /// The status at `now_ms` (ms since the Unix epoch).
    pub fn status_at(&self, now_ms: u64) -> Status {
        if self.rules.starts_at_ms().is_some_and(|s| now_ms < s) {
            Status::Upcoming
        } else if self.rules.ends_at_ms().is_some_and(|e| now_ms >= e) {
            Status::Ended
        } else if self.remaining == 0 {
            Status::SoldOut
        } else {
            Status::Active
        }
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
