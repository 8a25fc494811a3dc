//! The flash-sale engine: sells a sale's stock to concurrent buyers on Redis
//! without overselling, by six interchangeable strategies.
//!
//! Modules:
//! - `engine`: [`Engine`], the connection; creates, reads, deletes sales.
//! - `sale`: [`SaleSpec`], [`Sale`], [`Status`], [`Inventory`].
//! - `order`: [`PurchaseRequest`], [`Outcome`], [`Order`].
//! - `lifecycle`: [`OrderState`], [`OrderInfo`]: pay, cancel, expire.
//! - `event`: [`OrderId`], [`StreamEntry`], [`Event`]: the formats of order
//!   ids and of the order events in a sale's stream.
//! - `strategy`: [`Strategy`] and [`Purchaser`], one module per strategy:
//!   `locked`, `watch`, `list`, `lua` (the classic strategies, see the
//!   README) and
//!   `atomic`, `coalesced` (the production path).
//! - `records`: the baselines' order records, and [`LedgerEntry`].
//! - `race`: [`race()`], many concurrent buyers through one purchaser.
//! - `verify`: [`verify()`] checks a finished sale against its invariants
//!   (no oversell, no undersell, limits, every acknowledged order recorded).
//! - `keys`: key layout under the `{sale:ID}` hash tag, id validation.
//! - `scripts`: the Lua scripts (`src/lua/*.lua`), called by SHA.
//! - `error`: [`Error`].
//!
//! ```no_run
//! # async fn run() -> seckill_engine::Result<()> {
//! use seckill_engine::{Engine, Outcome, PurchaseRequest, SaleSpec, Strategy};
//! let engine = Engine::connect("redis://127.0.0.1:6379/").await?;
//! engine.create_sale(&SaleSpec::new("drop-1", 100).per_user_limit(2)).await?;
//! let buy = engine.purchaser(Strategy::Coalesced, "drop-1").await?;
//! let outcome = buy.purchase(&PurchaseRequest::new("alice").quantity(2)).await?;
//! assert!(matches!(outcome, Outcome::Ok(_)));
//! # Ok(()) }
//! ```

#![warn(missing_docs, missing_debug_implementations)]

mod engine;
mod error;
mod event;
mod keys;
mod lifecycle;
mod order;
mod race;
mod records;
mod sale;
mod scripts;
mod strategy;
mod verify;

pub use engine::{Engine, RestoredOrder, client};
pub use error::{Error, Result};
pub use event::{Event, OrderId, StreamEntry, entry_number, next_entry_id};
pub use keys::{MAX_ID_LEN, RESTOCK_CHANNEL, check_id};
pub use lifecycle::{OrderInfo, OrderState};
pub use order::{MAX_QUANTITY, Order, Outcome, PurchaseRequest};
pub use race::{Race, race};
pub use records::LedgerEntry;
pub use sale::{Inventory, MAX_STOCK, Sale, SaleSpec, Status};
pub use strategy::{CoalescerConfig, Purchaser, Strategy};
pub use verify::{Demand, Verdict, verify};
