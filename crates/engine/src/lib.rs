//! The flash-sale engine: sells a sale's stock to concurrent buyers on Redis
//! without overselling, by six interchangeable strategies.
//!
//! Modules:
//! - `engine`: [`Engine`], the connection, and the purchasers made on it.
//! - `durability`: [`Durability`], when a purchase is acknowledged (by the
//!   master, or once a replica has it), and the shared `WAIT`s behind it.
//! - `sales`: creating, reading and deleting sales.
//! - `registry`: the set of sale ids and the log of their changes.
//! - `inspect`: reading a sale back (ledger, buyers, stream) and trimming it.
//! - `restore`: rebuilding a sale in Redis from its orders in SQL.
//! - `sale`: [`SaleSpec`], [`Sale`], [`Status`], [`Inventory`].
//! - `order`: [`PurchaseRequest`], [`Outcome`], [`Order`].
//! - `lifecycle`: [`OrderState`], [`OrderInfo`]: pay, cancel, expire.
//! - `event`: [`OrderId`], [`StreamEntry`], [`Event`]: the formats of order
//!   ids and of the order events in a sale's stream.
//! - `strategy`: [`Strategy`] and [`Purchaser`], one module per strategy:
//!   `locked`, `watch`, `list`, `lua` (the classic strategies, see the
//!   README) and
//!   `atomic`, `coalesced` (the production path).
//! - `shard`: sharded sales, one hot sale's stock over many masters: the
//!   layout, placement, [`home_shard`], the consistent read and its check
//!   ([`ShardingCheck`]); `transfer` (numbered, idempotent, fenced moves of
//!   units), `refiller` (who moves what, when), `purchaser` (buying on the
//!   home shard, waiting out an empty one).
//! - `records`: the baselines' order records, and [`LedgerEntry`].
//! - [`mod@bench`]: [`bench::race()`], many concurrent buyers through one
//!   purchaser; [`bench::verify()`], a finished sale checked against its
//!   invariants (no oversell, no undersell, limits, every acknowledged order
//!   recorded); the `redis-benchmark` command lines of the engine's scripts.
//! - `keys`: key layout under the `{sale:ID}` hash tag, id validation.
//! - `scripts`: the Lua (`src/lua/*.lua`): the production path as one Redis
//!   Functions library, the classic `lua` strategy's script by SHA.
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

pub mod bench;
mod durability;
mod engine;
mod error;
mod event;
mod inspect;
mod keys;
mod lifecycle;
mod order;
mod records;
mod registry;
mod restore;
mod sale;
mod sales;
mod scripts;
mod shard;
mod strategy;

pub use durability::Durability;
pub use engine::{Engine, client};
pub use error::{Error, Result};
pub use event::{
    Event, MAX_ORDER_ID_LEN, OrderId, StreamEntry, entry_number, is_order_id_shaped, next_entry_id,
};
pub use keys::{MAX_ID_LEN, RESTOCK_CHANNEL, check_id, is_shard, sale_of};
pub use lifecycle::{OrderInfo, OrderState};
pub use order::{MAX_QUANTITY, Order, Outcome, PurchaseRequest};
pub use records::LedgerEntry;
pub use restore::RestoredOrder;
pub use sale::{Inventory, MAX_SHARDS, MAX_STOCK, Sale, SaleSpec, ShardStock, Sharding, Status};
pub use sales::StockChange;
pub use shard::{REFILL_WAIT, ShardingCheck, Transfer, home_shard};
pub use strategy::{CoalescerConfig, Purchaser, Strategy};
