//! The flash-sale engine: sells a sale's stock to concurrent buyers on Redis
//! without overselling, by six interchangeable strategies.
//!
//! Modules by floor, each importing only modules of the floors below it
//! (`scripts/shape.py` checks this in CI):
//!
//! 1. Model and codecs, which do no I/O of their own but reading a stream:
//!    - `state`: [`OrderState`]. `error`: [`Error`].
//!    - `keys`: key layout under the `{sale:ID}` hash tag, id validation.
//!    - `rules`: [`Rule`], [`Rules`], each purchase rule's one home (see
//!      there for what adding one takes).
//!    - `sale`: [`SaleSpec`], [`Sale`], [`Status`], [`Inventory`];
//!      `order`: [`PurchaseRequest`], [`Outcome`], [`Order`].
//!    - `order_id`: [`OrderId`] and stream entry ids; `event`:
//!      [`StreamEntry`], [`Event`], the order events of a sale's stream.
//!    - `codec`: each script's contract, its arguments built and its
//!      answer read as types: `purchase`, `order`, `ledger`.
//!    - `records`: the baselines' order records, [`LedgerEntry`].
//!    - `scripts`: the Lua (`src/lua/*.lua`) as one Redis Functions library,
//!      and the classic `lua` strategy's script.
//!    - `durability`: [`Durability`], and the shared `WAIT`s behind it.
//! 2. `strategy`: [`Strategy`] and the six ways to buy, one module each
//!    (`locked`, `watch`, `list`, `lua`: the classic strategies; `atomic`,
//!    `coalesced`: the production path), behind `one`, buying in one sale.
//! 3. `engine`: [`Engine`], the connection and its settings.
//! 4. Operations, each an `impl Engine` of its own concern:
//!    - `sales`: creating, reading and deleting sales; `registry`: the set
//!      of sale ids and the log of their changes.
//!    - `inspect`: reading a sale back (ledger, buyers, stream), trimming.
//!    - `lifecycle`: [`OrderInfo`]; pay, cancel, expire.
//!    - `restore`: rebuilding a sale in Redis from its orders in SQL.
//!    - `shard`: sharded sales, one hot sale's stock over many masters:
//!      `layout` (keys, placement, [`home_shard`]), `books` (a consistent
//!      read and its check, [`ShardingCheck`]), `transfer` (numbered,
//!      idempotent, fenced moves of units), `refiller` (who moves what,
//!      when), `purchaser` (buying on the home shard, waiting out an empty
//!      one), `restore` (rebuilding lost parts).
//! 5. `purchaser`: [`Purchaser`], and [`Engine::purchaser`] making one.
//! 6. `bench` (feature `bench`, for the CLI and tests): `race()`, many
//!    buyers through one purchaser; `verify()`, a finished sale checked
//!    against its invariants; the `redis-benchmark` command lines of the
//!    engine's scripts.
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

#[cfg(feature = "bench")]
pub mod bench;
mod codec;
mod durability;
mod engine;
mod error;
mod event;
mod inspect;
mod keys;
mod lifecycle;
mod order;
mod order_id;
mod purchaser;
mod records;
mod registry;
mod restore;
mod rules;
mod sale;
mod sales;
mod scripts;
mod shard;
mod state;
mod strategy;

pub use durability::Durability;
pub use engine::{Engine, client};
pub use error::{Error, Result};
pub use event::{Event, StreamEntry};
pub use keys::{MAX_ID_LEN, RESTOCK_CHANNEL, check_id, is_shard, sale_of};
pub use lifecycle::OrderInfo;
pub use order::{MAX_QUANTITY, Order, Outcome, PurchaseRequest};
pub use order_id::{MAX_ORDER_ID_LEN, OrderId, entry_number, is_order_id_shaped, next_entry_id};
pub use purchaser::Purchaser;
pub use records::LedgerEntry;
pub use restore::RestoredOrder;
pub use rules::{MAX_STOCK, Rule, RuleKind, Rules};
pub use sale::{Inventory, MAX_SHARDS, Sale, SaleSpec, ShardStock, Sharding, Status};
pub use sales::StockChange;
pub use shard::{REFILL_WAIT, ShardingCheck, Transfer, home_shard};
pub use state::OrderState;
pub use strategy::{CoalescerConfig, Strategy};
