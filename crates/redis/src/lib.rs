//! What every seckill crate shares of Redis.
//!
//! Modules:
//! - `conn`: [`Target`] (one server or a cluster) and [`Conn`], the
//!   connection every crate above takes; the client settings live here.
//! - `tls`: [`Tls`], what a `rediss://` connection trusts and shows
//!   (a CA, a client certificate) beyond its URL.
//! - `masters`: [`Master`], the masters behind a [`Target`] and their
//!   slots, for tools that measure or drive each master; [`key_slot`].
//! - `library`: [`Library`], a crate's Lua as one Redis Functions library,
//!   called with `FCALL` and loaded by the first call that finds it missing.

mod conn;
mod library;
mod masters;
mod tls;

pub use conn::{Conn, RESPONSE_TIMEOUT, Target, client};
pub use library::{Builder, Call, Library};
pub use masters::{Master, key_slot};
pub use tls::Tls;
