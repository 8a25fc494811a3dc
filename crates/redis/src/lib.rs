//! What every seckill crate shares of Redis.
//!
//! Modules:
//! - `settings`: the client settings every kind of target shares
//!   (timeouts, reconnection, what a client shows besides a URL).
//! - `target`: [`Target`], where Redis is: one server, a cluster, or the
//!   master a set of sentinels names; and how to reach it.
//! - `conn`: [`Conn`], the connection every crate above takes, and
//!   [`Replicas`], the replicas its confirmations wait for.
//! - `sentinel`: the sentinels of a [`Target`] and a connection that
//!   follows the master they name through a failover.
//! - `tls`: [`Tls`], what a `rediss://` connection trusts and shows
//!   (a CA, a client certificate) beyond its URL.
//! - `masters`: [`Master`], the masters behind a [`Target`] and their
//!   slots, for tools that measure or drive each master; [`key_slot`].
//! - `library`: [`Library`], a crate's Lua as one Redis Functions library,
//!   called with `FCALL` and loaded by the first call that finds it missing.
//! - `coalesce`: [`Coalescer`], concurrent requests of one process sent
//!   in batches, one call each.

mod coalesce;
mod conn;
mod library;
mod masters;
mod sentinel;
mod settings;
mod target;
mod tls;

pub use coalesce::{Coalescer, CoalescerConfig};
pub use conn::{Conn, Replicas};
pub use library::{Builder, Call, Library};
pub use masters::{Master, key_slot};
pub use settings::RESPONSE_TIMEOUT;
pub use target::{Target, client};
pub use tls::Tls;
