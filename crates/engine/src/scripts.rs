use std::sync::LazyLock;

use redis::Script;

/// The engine's Lua scripts, sent by SHA; redis-rs reloads one by itself
/// when the server answers `NOSCRIPT` (nothing ran, so that is safe).
pub(crate) struct Scripts {
    pub create_sale: Script,
    pub purchase: Script,
    pub purchase_batch: Script,
    pub classic_decr: Script,
    pub order: Script,
    pub expire: Script,
    pub end_sale: Script,
    pub stock: Script,
}

pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    create_sale: Script::new(include_str!("lua/create_sale.lua")),
    purchase: Script::new(include_str!("lua/purchase.lua")),
    purchase_batch: Script::new(include_str!("lua/purchase_batch.lua")),
    classic_decr: Script::new(include_str!("lua/classic_decr.lua")),
    order: Script::new(concat!(
        include_str!("lua/lifecycle_common.lua"),
        include_str!("lua/order.lua")
    )),
    expire: Script::new(concat!(
        include_str!("lua/lifecycle_common.lua"),
        include_str!("lua/expire.lua")
    )),
    end_sale: Script::new(include_str!("lua/end_sale.lua")),
    stock: Script::new(include_str!("lua/stock.lua")),
});
