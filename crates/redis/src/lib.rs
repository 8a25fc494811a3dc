//! What every seckill crate shares of Redis.
//!
//! Modules:
//! - `conn`: [`Target`] (one server or a cluster) and [`Conn`], the
//!   connection every crate above takes; the client settings live here.
//! - `library`: [`Library`], a crate's Lua as one Redis Functions library,
//!   called with `FCALL` and loaded by the first call that finds it missing.

mod conn;
mod library;

pub use conn::{Conn, RESPONSE_TIMEOUT, Target, client};
pub use library::{Builder, Call, Library};
