//! The purchase strategies behind one interface, [`Purchaser`].
//!
//! The first four are the classic strategies (docs/strategies.md), each done right and kept
//! as a measured baseline; `atomic` and `coalesced` are the production path.
//! Baselines sell one unit per purchase, check the sale window against this
//! process's clock, and record orders in the classic per-day hashes; they
//! do not remember request ids.

pub(crate) mod atomic;
mod choice;
mod coalesced;
mod ctx;
mod list;
mod locked;
mod lua;
mod one;
mod watch;

pub use choice::Strategy;
pub use coalesced::CoalescerConfig;
pub(crate) use ctx::Ctx;
pub(crate) use one::One;
