use std::sync::LazyLock;

use redis::Script;
use seckill_redis::Library;

/// The engine's Lua (`src/lua/*.lua`) as one Redis Functions library,
/// loaded by the first call that finds it missing.
pub(crate) static LIBRARY: LazyLock<Library> = LazyLock::new(|| {
    const COMMON: &str = include_str!("lua/lifecycle_common.lua");
    const EXPIRE: &str = include_str!("lua/expire.lua");
    Library::builder("seckill_engine")
        .prelude(include_str!("lua/prelude.lua"))
        .function("create_sale", &[include_str!("lua/create_sale.lua")])
        .cross_slot("purchase", &[include_str!("lua/purchase.lua")])
        .cross_slot("purchase_batch", &[include_str!("lua/purchase_batch.lua")])
        .cross_slot("order", &[COMMON, include_str!("lua/order.lua")])
        .cross_slot(
            "expire",
            &[COMMON, EXPIRE, include_str!("lua/expire_due.lua")],
        )
        .function("end_sale", &[include_str!("lua/end_sale.lua")])
        .function("stock", &[include_str!("lua/stock.lua")])
        .function("shard_begin", &[include_str!("lua/shard_begin.lua")])
        .function("shard_take", &[include_str!("lua/shard_take.lua")])
        .function("shard_give", &[include_str!("lua/shard_give.lua")])
        .function("shard_end", &[include_str!("lua/shard_end.lua")])
        .function("shard_mark", &[include_str!("lua/shard_mark.lua")])
        .function("shard_want", &[include_str!("lua/shard_want.lua")])
        .function("shard_restock", &[include_str!("lua/shard_restock.lua")])
        .read_only("shard_read", &[include_str!("lua/shard_read.lua")])
        .read_only(
            "shard_sale_read",
            &[include_str!("lua/shard_sale_read.lua")],
        )
        .build()
});

/// The classic `lua` strategy's check-and-decrement, sent by SHA as the
/// articles send it (redis-rs loads it again on `NOSCRIPT`).
pub(crate) static CLASSIC_DECR: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/classic_decr.lua")));
