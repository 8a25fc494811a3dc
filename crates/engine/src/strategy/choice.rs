//! [`Strategy`]: which of the six ways a purchaser takes stock.

use serde::Serialize;

use crate::sale::Inventory;

/// How a purchase takes stock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// The distributed lock around read stock → write stock − 1.
    Lock,
    /// `WATCH`/`MULTI` optimistic transaction, retried on conflict.
    Watch,
    /// `LPOP` of one pre-filled token per unit.
    List,
    /// The classic Lua check-and-decrement.
    Lua,
    /// One server-side script: window, limit, idempotency, stock, order event.
    Atomic,
    /// `atomic`, with concurrent purchases of this process sent as batches.
    Coalesced,
}

impl Strategy {
    /// Every strategy, baselines first.
    pub const ALL: [Strategy; 6] = [
        Self::Lock,
        Self::Watch,
        Self::List,
        Self::Lua,
        Self::Atomic,
        Self::Coalesced,
    ];

    /// The lowercase name, as serialized and as [`Strategy::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Lock => "lock",
            Self::Watch => "watch",
            Self::List => "list",
            Self::Lua => "lua",
            Self::Atomic => "atomic",
            Self::Coalesced => "coalesced",
        }
    }

    /// The strategy called `name` (as [`Strategy::name`] spells it).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The commands this strategy sends outside scripts (lowercase, as
    /// `INFO commandstats` names them), so that its Redis cost can be read
    /// from the server: script calls plus these. `lock`'s own `SET` is also
    /// what the lock's acquire script runs, so its figure includes those.
    /// `EXEC` already counts the commands it runs.
    pub fn plain_commands(self) -> &'static [&'static str] {
        match self {
            Self::Lock => &["get", "hget", "set", "hincrby", "hset", "sadd"],
            Self::Watch => &["watch", "unwatch", "get", "hget", "multi", "exec"],
            Self::List => &["lpop", "hincrby", "hset", "sadd"],
            Self::Lua => &["hincrby", "hset", "sadd"],
            Self::Atomic | Self::Coalesced => &[],
        }
    }

    /// The inventory a sale needs for this strategy.
    pub fn inventory(self) -> Inventory {
        match self {
            Self::List => Inventory::List,
            Self::Lock | Self::Watch | Self::Lua => Inventory::Counter,
            Self::Atomic | Self::Coalesced => Inventory::Hash,
        }
    }

    /// Whether it runs on a Redis Cluster: all but `watch`, whose
    /// WATCH/MULTI needs a connection of its own to one server.
    pub fn runs_on_a_cluster(self) -> bool {
        self != Self::Watch
    }
}
