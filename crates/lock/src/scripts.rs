use std::sync::LazyLock;

use redis::Script;

use crate::keys::Keys;

/// The lock's Lua scripts. Each is sent by SHA (`EVALSHA`); redis-rs loads it
/// again by itself when the server answers `NOSCRIPT` (after a restart or
/// `SCRIPT FLUSH`), which is safe because `NOSCRIPT` means nothing ran.
pub(crate) struct Scripts {
    pub acquire: Script,
    pub release: Script,
    pub extend: Script,
    pub poll: Script,
    pub withdraw: Script,
    pub raise_fence: Script,
}

macro_rules! lock_script {
    ($file:literal) => {
        Script::new(concat!(
            include_str!("lua/common.lua"),
            include_str!(concat!("lua/", $file))
        ))
    };
}

pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: lock_script!("acquire.lua"),
    release: lock_script!("release.lua"),
    extend: lock_script!("extend.lua"),
    poll: lock_script!("poll.lua"),
    withdraw: lock_script!("withdraw.lua"),
    raise_fence: lock_script!("raise_fence.lua"),
});

/// Runs `script` on `keys` with `args` over `conn`.
pub(crate) async fn run<T, C>(
    conn: &mut C,
    script: &Script,
    keys: &Keys,
    args: &[&str],
) -> redis::RedisResult<T>
where
    T: redis::FromRedisValue,
    C: redis::aio::ConnectionLike,
{
    let mut invocation = script.prepare_invoke();
    invocation.key(&keys.all);
    for arg in args {
        invocation.arg(*arg);
    }
    invocation.invoke_async(conn).await
}
