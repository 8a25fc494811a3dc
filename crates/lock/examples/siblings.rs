//! The lock's siblings in one drop: a semaphore caps the workers warming
//! caches, a latch opens the sale when every cache is warm, a read-write
//! lock lets buyers read the catalog while a writer updates it, and a rate
//! limiter holds each buyer to its rate across every instance.
//!
//! ```sh
//! cargo run -p seckill-lock --example siblings -- redis://127.0.0.1:6379/
//! ```

use std::time::Duration;

use seckill_lock::{Locks, Rate};

/// Runs the example against `url`; answers what it saw, in words.
pub async fn run(url: &str) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let locks = Locks::builder()
        .prefix("example:sync")
        .connect(&seckill_redis::Target::server(url))
        .await?;
    let mut said = Vec::new();

    // At most 2 of the 6 warmers at once; the latch opens after all 6.
    let warmers = locks.semaphore("warmers", 2)?.lease(Duration::from_secs(5));
    let warm = locks.latch("caches-warm")?.lease(Duration::from_secs(30));
    warm.try_set_count(6).await?;
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let (warmers, warm) = (warmers.clone(), warm.clone());
        tasks.push(tokio::spawn(async move {
            let permits = warmers.acquire(1, Duration::from_secs(5)).await?;
            tokio::time::sleep(Duration::from_millis(20)).await; // warm a cache
            for permit in permits {
                permit.release().await?;
            }
            warm.count_down().await.map(drop)
        }));
    }
    warm.wait(Duration::from_secs(5)).await?;
    for task in tasks {
        task.await??;
    }
    said.push("every cache warm: the sale opens".to_owned());

    // Buyers read the catalog together; the writer goes alone, first in line.
    let catalog = locks.rwlock("catalog")?.lease(Duration::from_secs(5));
    let reading = catalog.read(Duration::from_secs(1)).await?;
    let also_reading = catalog.read(Duration::from_secs(1)).await?;
    said.push(format!(
        "two readers at once, fences {} < {}",
        reading.fence(),
        also_reading.fence()
    ));
    reading.release().await?;
    also_reading.release().await?;
    let writing = catalog.write(Duration::from_secs(1)).await?;
    said.push("the writer alone".to_owned());
    writing.release().await?;

    // 5 purchases a second per buyer, 3 at once: the fourth in a row waits.
    let buyer = locks.rate_limiter("buyer-42", Rate::per_second(5.0).burst(3))?;
    let mut admitted = 0;
    for _ in 0..4 {
        let decision = buyer.take(1).await?;
        if decision.admitted {
            admitted += 1;
        } else {
            said.push(format!(
                "{admitted} admitted, then: retry after {} ms",
                decision.retry_after.as_millis().div_ceil(10) * 10
            ));
        }
    }
    Ok(said)
}

#[cfg_attr(test, allow(dead_code))]
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379/".to_owned());
    for line in run(&url).await? {
        println!("{line}");
    }
    Ok(())
}
