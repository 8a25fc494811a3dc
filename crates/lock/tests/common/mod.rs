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
