//! An async Redis distributed lock, safe to build a flash sale on.
//!
//! What it adds over the usual `SET NX PX` recipe: acquire, release and
//! renewal are single scripts (never a `SETNX` then `EXPIRE`), release and
//! extend check the owner's random token, waiters queue in arrival order and
//! are handed the lock by the release itself (no polling, no thundering
//! herd), every grant carries a fencing token, a watchdog renews the lease
//! and says when the lock is lost, and the same API runs Redlock over
//! several independent masters. On a Redis Cluster each lock lives on the
//! master of its hash slot. On one server, the acquires that a client's
//! tasks ask at the same time go as one function call, and so do their
//! releases (a semaphore's too; a read-write lock's acquires only).
//!
//! Beside the lock, on the same [`Locks`]: a [`Semaphore`] with leased
//! permits, a read-write lock ([`RwLock`]), a [`RateLimiter`] (GCRA) and a
//! count-down [`Latch`]. What each promises, and what it can cost:
//!
//! | primitive | what it promises | a holder (or waiter) that dies | a lost hand-off message | keys left | a failover of its master can cost |
//! | --- | --- | --- | --- | --- | --- |
//! | `Lock` | one holder; waiters in arrival order; a fence above every earlier grant's; watchdog and lost signal | its lease ends it | the waiter asks when the lease would end | none once the lease ends (a queue, a second at most past its last deadline) | a grant not yet on the replica: a second holder, refused by the fence (it keeps rising: it is the server's clock in µs) |
//! | `Semaphore` | at most N holders, each permit leased on its own; arrival order, a large request not passed by small ones; N changed live for every client | its permits return when their leases end | a re-check at least every 250 ms | none once leases end (a queue, as `Lock`) | a grant not yet on the replica: one holder more than N until that lease ends |
//! | `RwLock` | many readers or one writer; a waiting writer stops new readers; a fence on every grant; watchdog and lost signal | its lease ends it | a re-check at least every 250 ms | none once leases end (a queue, as `Lock`) | as `Lock` |
//! | `RateLimiter` | at most `burst + rate × t` in any window of length `t` (GCRA), one call per decision (on one server, one for the decisions asked at once), the wait named | – | – | none once full again | decisions not yet on the replica: up to that many more admitted |
//! | `Latch` | waiters pass once the count reaches zero; a count-down a cluster's client sends again after a dropped connection counts once | a count lasts at most its lease | a re-check at least every 250 ms | none a second after it opens, or once its lease ends | a count-down not yet on the replica: waiters wait for one more, at most the lease |
//!
//! Modules, each importing only those listed below it:
//! - `rwlock`: [`RwLock`], many readers or one writer, writers first;
//!   made by [`Locks::rwlock`].
//! - `latch`: [`Latch`], a count-down latch; made by [`Locks::latch`].
//! - `semaphore`: [`Semaphore`], N holders at once, each [`Permit`] leased
//!   on its own; made by [`Locks::semaphore`].
//! - `acquire`: taking a [`Lock`], which hands out [`Guard`]s.
//! - `guard`: [`Guard`], a held lock and its fence.
//! - `locks`: [`Locks`] (connection and settings) and [`Lock`] (one name).
//! - `holding`: what every leased grant shares: the watchdog, the
//!   [`LostSignal`], release on drop.
//! - `rate`: [`RateLimiter`], a rate and burst shared by every client (GCRA);
//!   [`RateLimits`], a connection's limiters, their decisions batched on
//!   one server.
//! - `backend`: one server or a Redlock quorum, every operation dispatched once.
//! - `redlock`: the quorum algorithm over N masters.
//! - `single`: the one-server algorithm: queue, hand-off, polling fallback.
//! - `batch`: the acquires and releases (of locks and semaphores; of
//!   read-write locks, the acquires) that a client asks at once, each kind
//!   in one function call, on one server.
//! - `queue`: waiting one's turn in a semaphore's or read-write lock's
//!   queue: the hand-off's message, or the bounded re-check.
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
mod batch;
mod error;
mod guard;
mod holding;
mod keys;
mod latch;
mod lease;
mod locks;
mod notify;
mod queue;
mod rate;
mod redlock;
mod rwlock;
mod scripts;
mod semaphore;
mod single;

pub use error::{Error, Result};
pub use guard::Guard;
pub use holding::{Lost, LostSignal};
pub use keys::{DEFAULT_PREFIX, MAX_NAME_LEN};
pub use latch::Latch;
pub use locks::{DEFAULT_LEASE, Lock, Locks, LocksBuilder, MAX_LEASE, MIN_LEASE};
pub use queue::RECHECK;
pub use rate::{Decision, Rate, RateLimiter, RateLimits};
pub use rwlock::{Access, RwGuard, RwLock};
pub use semaphore::{MAX_PERMITS, Permit, Semaphore};
