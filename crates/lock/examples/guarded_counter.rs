//! Guard a read-modify-write with the lock, using a client you made.
//!
//! ```sh
//! cargo run -p seckill-lock --example guarded_counter -- redis://127.0.0.1:6379/
//! ```
//!
//! Eight tasks each add 1 to a counter 25 times with a plain `GET` then
//! `SET`, which loses updates without a lock; under the lock the counter
//! ends at exactly 200. The write goes only with the latest fencing token
//! it has seen, so a holder that stalled past its lease cannot overwrite a
//! newer one.

use std::time::Duration;

use redis::{AsyncCommands, IntoConnectionInfo};
use seckill_lock::Locks;

/// Runs the example against `url`; answers the counter's final value.
pub async fn run(url: &str) -> Result<u64, Box<dyn std::error::Error>> {
    // TCP_NODELAY: redis-rs leaves Nagle's algorithm on, which can hold a
    // hand-off's small write back by up to 40 ms.
    let info = url
        .into_connection_info()?
        .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
    let client = redis::Client::open(info)?;
    let locks = Locks::builder()
        .prefix("example:lock")
        .connect(&seckill_redis::Target::server(url))
        .await?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let _: () = conn.del(&["example:counter", "example:fence"]).await?;

    // The resource keeps the highest fence it has seen and refuses older
    // ones (here a check in the same script as the write).
    let write = redis::Script::new(
        "if tonumber(redis.call('GET', KEYS[2]) or '0') > tonumber(ARGV[2]) then \
           return 0 end \
         redis.call('SET', KEYS[2], ARGV[2]) \
         redis.call('SET', KEYS[1], ARGV[1]) return 1",
    );
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let lock = locks
            .lock("counter")?
            .lease(Duration::from_secs(2))
            .watchdog(true);
        let mut conn = conn.clone();
        let write = write.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                let guard = lock.acquire(Duration::from_secs(10)).await?;
                let n: u64 = conn.get("example:counter").await.unwrap_or(0);
                let written: i64 = write
                    .key("example:counter")
                    .key("example:fence")
                    .arg(n + 1)
                    .arg(guard.fence())
                    .invoke_async(&mut conn)
                    .await?;
                assert_eq!(written, 1, "a current holder's write is never refused");
                guard.release().await?;
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        }));
    }
    for task in tasks {
        task.await?.map_err(|e| e.to_string())?;
    }
    Ok(conn.get("example:counter").await?)
}

#[cfg_attr(test, allow(dead_code))]
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379/".to_owned());
    println!("counter = {}", run(&url).await?);
    Ok(())
}
