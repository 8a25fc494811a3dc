//! What `bench` reports per run, as its table and `--json` lines show it.

use seckill_engine::bench::Verdict;
use serde::Serialize;

#[derive(Serialize)]
pub(super) struct Row {
    pub(super) strategy: &'static str,
    pub(super) stock: u64,
    pub(super) buyers: u64,
    pub(super) concurrency: u32,
    pub(super) sold: u64,
    pub(super) oversold: u64,
    pub(super) undersold: u64,
    pub(super) limit_violations: u64,
    pub(super) errors: u64,
    /// Buyers of a sharded sale answered 503 `stock_moving` after waiting
    /// their bound for units (nothing bought).
    #[serde(skip_serializing_if = "is_zero")]
    pub(super) stock_moving: u64,
    pub(super) seconds: f64,
    pub(super) purchases_per_s: f64,
    pub(super) attempts_per_s: f64,
    pub(super) p50_ms: f64,
    pub(super) p99_ms: f64,
    /// Redis command time per purchase call answered, µs (script calls plus
    /// the strategy's plain commands, from `INFO commandstats`).
    pub(super) redis_us_per_purchase: Option<f64>,
    /// `redis-server` process CPU per purchase call answered, µs, where the
    /// server is local.
    pub(super) redis_cpu_us_per_purchase: Option<f64>,
    /// On a cluster: `redis_us_per_purchase` split by master.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) redis_us_per_purchase_by_master: Vec<MasterShare>,
    /// A sharded sale: each shard, and the transfers between them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) sharded: Option<ShardedRun>,
    /// With `--plot`: latency at evenly spaced quantiles.
    #[serde(skip)]
    pub(super) cdf: Vec<(f64, f64)>,
    /// With `--persist-to`: what persisting the orders cost.
    #[serde(flatten)]
    pub(super) persisted: Option<Persisted>,
    pub(super) verdict: Verdict,
    pub(super) ok: bool,
}

/// The persister's share of a `--persist-to` run, per order it wrote.
#[derive(Serialize)]
pub(super) struct Persisted {
    /// From the last answer to an empty backlog.
    #[serde(rename = "persist_drain_ms")]
    pub(super) drain_ms: f64,
    /// Orders of this sale in SQL.
    #[serde(rename = "persisted_orders")]
    pub(super) orders: u64,
    /// Redis command time of the persister's commands (`INFO commandstats`).
    #[serde(rename = "persist_redis_us_per_order")]
    pub(super) redis_us_per_order: Option<f64>,
    /// CPU of the persister's threads: its runtime's and SQLite's workers.
    #[serde(rename = "persist_cpu_us_per_order")]
    pub(super) cpu_us_per_order: Option<f64>,
}

/// What the shards of a sharded run did.
#[derive(Serialize)]
pub(super) struct ShardedRun {
    /// Transfers from the pool.
    pub(super) refills: u64,
    /// Transfers from one shard to another.
    pub(super) give_backs: u64,
    /// What did not add up across pool, transfers and shards (none).
    pub(super) problems: Vec<String>,
    pub(super) shards: Vec<ShardRow>,
}

#[derive(Serialize)]
pub(super) struct ShardRow {
    pub(super) id: String,
    /// The master serving it.
    pub(super) master: String,
    pub(super) sold: u64,
}

/// One master's share of a run's Redis time, per purchase.
#[derive(Serialize)]
pub(super) struct MasterShare {
    pub(super) master: String,
    pub(super) redis_us: f64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
