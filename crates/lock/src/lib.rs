//! An async Redis distributed lock, safe to build a flash sale on.
//!
//! What it adds over the usual `SET NX PX` recipe: acquire, release and
//! renewal are single scripts (never a `SETNX` then `EXPIRE`), release and
//! extend check the owner's random token, waiters queue in arrival order and
//! are handed the lock by the release itself (no polling, no thundering
//! herd), every grant carries a fencing token, a watchdog renews the lease
//! and says when the lock is lost, and the same API runs Redlock over
//! several independent masters. On a Redis Cluster each lock lives on the
//! master of its hash slot.
//!
//! Modules, each importing only those listed below it:
//! - `acquire`: taking a [`Lock`], which hands out [`Guard`]s.
//! - `guard`: [`Guard`] (a held lock), [`LostSignal`], the watchdog.
//! - `locks`: [`Locks`] (connection and settings) and [`Lock`] (one name).
//! - `backend`: one server or a Redlock quorum, every operation dispatched once.
//! - `redlock`: the quorum algorithm over N masters.
//! - `single`: the one-server algorithm: queue, hand-off, polling fallback.
//! - `notify`: routes hand-off notifications to waiting tasks.
//! - `scripts`: the Lua (`src/lua/*.lua`), one Redis Functions library.
//! - `lease`: how long a grant is surely valid; clock-drift margins.
//! - `keys`: key layout, name checks, random tokens.
//! - `error`: [`Error`], the one error type.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! let locks = seckill_lock::Locks::new(&seckill_redis::Target::server("redis://127.0.0.1:6379/")).await?;
//! let stock = locks.lock("stock:sku-1")?.lease(Duration::from_secs(5));
//! if let Some(guard) = stock.try_acquire().await? {
//!     // ... read-modify-write, passing guard.fence() along ...
//!     guard.release().await?;
//! }
//! # Ok(()) }
//! ```

#![warn(missing_docs, missing_debug_implementations)]

mod acquire;
mod backend;
mod error;
mod guard;
mod keys;
mod lease;
mod locks;
mod notify;
mod redlock;
mod scripts;
mod single;

pub use error::{Error, Result};
pub use guard::{Guard, Lost, LostSignal};
pub use keys::MAX_NAME_LEN;
pub use locks::{DEFAULT_LEASE, DEFAULT_PREFIX, Lock, Locks, LocksBuilder, MAX_LEASE, MIN_LEASE};
