//! Helpers shared by the lock's test binaries.
#![allow(dead_code)]

use seckill_lock::{Guard, Locks};

/// A client for `url` made as the lock's documentation asks: with
/// `TCP_NODELAY`, so hand-off timings are not Nagle's delayed writes.
pub fn client(url: &str) -> redis::Client {
    use redis::IntoConnectionInfo;
    let info = url
        .into_connection_info()
        .unwrap()
        .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
    redis::Client::open(info).unwrap()
}

/// Locks on the server at `url`.
pub async fn connect(url: &str) -> Locks {
    Locks::new(&seckill_redis::Target::server(url))
        .await
        .unwrap()
}

/// `try_acquire` of lock `name` with default settings, panicking on errors.
pub async fn take(locks: &Locks, name: &str) -> Option<Guard> {
    locks.lock(name).unwrap().try_acquire().await.unwrap()
}

/// The protected resource: a Redis value that only accepts writes carrying
/// a fence at least as new as the newest it has seen.
pub const FENCED_SET: &str = r"
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < last then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return 1";

pub async fn fenced_write(url: &str, fence: u64, value: &str) -> bool {
    let mut conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let written: i64 = redis::Script::new(FENCED_SET)
        .key("resource:fence")
        .key("resource:value")
        .arg(fence)
        .arg(value)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    written == 1
}

/// This test binary started again as a child process that runs only the
/// ignored helper test `helper`, told the server's `url`
/// (`SECKILL_TEST_CHILD_URL`) and `env`; its stdin piped, its stdout
/// answered as lines.
pub fn child(
    helper: &str,
    url: &str,
    env: &[(&str, String)],
) -> (
    std::process::Child,
    std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
) {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([helper, "--exact", "--ignored", "--nocapture"])
        .env("SECKILL_TEST_CHILD_URL", url)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

/// The keys alive on the server at `url`: `KEYS` skips one whose time is
/// up, which `DBSIZE` counts until Redis reclaims it.
pub async fn live_keys(url: &str) -> Vec<String> {
    let mut conn = seckill_redis::Target::server(url).connect().await.unwrap();
    redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap()
}
