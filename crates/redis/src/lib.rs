//! What every seckill crate shares of Redis.
//!
//! Modules:
//! - `library`: [`Library`], a crate's Lua as one Redis Functions library,
//!   called with `FCALL` and loaded by the first call that finds it missing.

mod library;

pub use library::{Builder, Call, Library};
