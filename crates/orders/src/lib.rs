//! Durable orders: every order event of every sale flows from the sale's
//! Redis Stream into SQL, and an audit proves the two agree.
//!
//! Modules:
//! - `store`: [`Store`], the SQL side (SQLite, PostgreSQL or MySQL/MariaDB,
//!   sqlx migrations in `migrations/<database>/`), idempotent batched upserts.
//! - `dialect`: the SQL each database speaks where they differ, and the
//!   multi-row upserts of orders.
//! - `persister`: [`Persister`], the consumer-group reader: a batch stays
//!   recorded until committed, abandoned batches are persisted again by
//!   another, streams are trimmed only below what is committed; its
//!   housekeeping (registry, takeover, trimming) in `persister/housekeeping.rs`.
//! - `config`: [`PersisterConfig`], [`GROUP`], [`PLAIN_COMMANDS`]; the
//!   crate's Lua library and the background tasks' fixed pauses.
//! - `work`: what a persister knows and has left to do (bookkeeping).
//! - `backlog`: [`unpersisted`], [`backlog()`] and [`wait_drained`]: what is
//!   not yet in SQL, and how long it has waited.
//! - `commit`: committing what was read (after the replica wait of
//!   `--durability replica`).
//! - `news`: each master's signal keys (ledger, news set, persisters' marks, due
//!   index), which let the background tasks below wake for what happened
//!   instead of asking every sale.
//! - `ledger`: what a master's ledgers tell (one sale's event per entry, or
//!   a sweep's expiries of many), what acknowledging a read of them files
//!   for expiry, and reading them.
//! - `takeover`: batches a persister read and never committed (it died,
//!   or its commit failed), committed by another.
//! - `sweeper`: [`sweep_forever`], expiry of unpaid orders, woken by each
//!   master's due index; [`sweep`], one pass over every sale.
//! - `audit`: [`audit()`], Redis against itself and against SQL.
//! - `repair`: [`repair_from_sql`], a sale Redis lost rebuilt from SQL.
//! - `archive`: [`archive()`] and [`archive_forever`]: finished sales leave
//!   Redis and answer from SQL.
//! - `archived`: what SQL answers for an archived sale's orders and
//!   purchases, for callers that found the sale gone from Redis.
//! - `lost`: [`watch_lost_forever`], sales Redis lost while SQL holds them
//!   as live: reported, and restored from SQL if asked.
//! - `clock`: this machine's clock in ms, as Redis and SQL keep times.
//! - `error`: [`Error`]. `failures`: [`Failures`], how a background task
//!   that keeps failing logs (first, every 30 s, on recovery).
//!
//! What wakes each background task, so that what they cost follows what
//! happens (orders, expiries), not how many sales exist:
//! - the persister reads, every 20 ms while orders come and backing off to
//!   160 ms when none do, each master's ledger, where the engine's scripts
//!   write the events of every sale a persister armed, and the sales in
//!   its news set (two calls per master); it follows the registry's log
//!   (new and removed sales, each read once, which arms it) twice a
//!   second, takes over ledger entries left unacknowledged at each
//!   housekeeping, looks for abandoned batches of a sale's own stream
//!   when another persister goes quiet, and reads every sale not armed
//!   (and arms again every armed one) once per `full_read` (5 min) as a
//!   safety net;
//! - the sweeper expires, every 500 ms, what each master's due index lists
//!   as due (one call per master), and sweeps every sale once per
//!   [`FULL_SWEEP`];
//! - the archiver reads each sale's end once, then only the sales the
//!   registry's log says changed, and archives those past their end;
//! - the watch for lost sales asks each master for its mark every 2 s
//!   and compares SQL's live sales with Redis when one is missing, at
//!   start and every 5 min.
//!
//! ```no_run
//! # async fn run() -> seckill_orders::Result<()> {
//! use seckill_orders::{Persister, PersisterConfig, Store};
//! let store = Store::open("seckill.db").await?;
//! let persister = Persister::new("redis://127.0.0.1:6379/", store, PersisterConfig::default()).await?;
//! persister.run(async { tokio::signal::ctrl_c().await.ok(); }).await;
//! # Ok(()) }
//! ```

#![warn(missing_docs, missing_debug_implementations)]

mod archive;
pub mod archived;
mod audit;
mod backlog;
mod clock;
mod commit;
mod config;
mod dialect;
mod error;
mod failures;
mod ledger;
mod lost;
mod news;
mod persister;
mod repair;
mod store;
mod sweeper;
mod takeover;
mod work;

pub use archive::{Archived, archive, archive_due, archive_forever};
pub use audit::{Finding, Report, audit};
pub use backlog::{Backlog, backlog, unpersisted, wait_drained};
pub use config::{GROUP, PLAIN_COMMANDS, PersisterConfig};
pub use dialect::redacted;
pub use error::{Error, Result};
pub use failures::{Failures, REPEAT_EVERY};
pub use lost::{LOOK_EVERY, LostSales, watch_lost_forever};
pub use persister::Persister;
pub use repair::{Restored, repair_from_sql};
pub use store::{Store, StoredOrder, StoredSale};
pub use sweeper::{FULL_SWEEP, SWEEP_EVERY, sweep, sweep_forever};
