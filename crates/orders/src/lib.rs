//! Durable orders: every order event of every sale flows from the sale's
//! Redis Stream into SQL, and an audit proves the two agree.
//!
//! Modules:
//! - `store`: [`Store`], the SQL side (SQLite, PostgreSQL or MySQL/MariaDB,
//!   sqlx migrations in `migrations/<database>/`), idempotent batched upserts.
//! - `persister`: [`Persister`], the consumer-group reader: a batch stays
//!   recorded until committed, abandoned batches are persisted again by
//!   another, streams are trimmed only below what is committed.
//! - `backlog`: [`unpersisted`], [`backlog()`] and [`wait_drained`]: what is
//!   not yet in SQL, and how long it has waited.
//! - `sweeper`: [`sweep_forever`], expiry of unpaid orders in every sale.
//! - `audit`: [`audit()`] and [`repair_from_sql`].
//! - `archive`: [`archive()`] and [`archive_forever`]: finished sales leave
//!   Redis and answer from SQL.
//! - `error`: [`Error`].
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
mod audit;
mod backlog;
mod error;
mod persister;
mod store;
mod sweeper;

pub use archive::{Archived, archive, archive_due, archive_forever};
pub use audit::{Finding, Report, audit, repair_from_sql};
pub use backlog::{Backlog, backlog, unpersisted, wait_drained};
pub use error::{Error, Result};
pub use persister::{GROUP, PLAIN_COMMANDS, Persister, PersisterConfig};
pub use store::{Store, StoredOrder, StoredSale};
pub use sweeper::{sweep, sweep_forever};
