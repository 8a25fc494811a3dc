//! Each script's contract, one module a script family: the arguments built
//! and the answer read as types, so that the rest of the engine never
//! parses a script's text. On the engine's floor: it imports only the model
//! types (`state`, `order_id`, `event`, `sale`, `order`) and `error`.
//! - `purchase`: `purchase` and `purchase_batch`.
//! - `order`: the lifecycle function's answers, and a settled order's value.
//! - `ledger`: a sharded sale's transfers, as its ledger and hash hold them.

pub(crate) mod ledger;
pub(crate) mod order;
pub(crate) mod purchase;
