use std::sync::LazyLock;

use seckill_redis::{Conn, Library};

use crate::keys::Keys;

/// The lock's Lua (`src/lua/*.lua`) as one Redis Functions library, loaded
/// by the first call that finds it missing. A library is replicated and
/// saved with the data, so after a failover the promoted replica already
/// has it, and no call depends on every node being reachable.
pub(crate) static LIBRARY: LazyLock<Library> = LazyLock::new(|| {
    const COMMON: &str = include_str!("lua/common.lua");
    Library::builder("seckill_lock")
        .function("acquire", &[COMMON, include_str!("lua/acquire.lua")])
        .function("release", &[COMMON, include_str!("lua/release.lua")])
        .function("extend", &[COMMON, include_str!("lua/extend.lua")])
        .function("poll", &[COMMON, include_str!("lua/poll.lua")])
        .function("withdraw", &[COMMON, include_str!("lua/withdraw.lua")])
        .function(
            "raise_fence",
            &[COMMON, include_str!("lua/raise_fence.lua")],
        )
        .build()
});

/// Runs the lock's function `name` on `keys` with `args` over `conn`.
pub(crate) async fn run<T: redis::FromRedisValue>(
    conn: &mut Conn,
    name: &str,
    keys: &Keys,
    args: &[&str],
) -> redis::RedisResult<T> {
    let mut call = LIBRARY.call(name, &keys.all);
    for arg in args {
        call.arg(*arg);
    }
    call.invoke(conn).await
}
