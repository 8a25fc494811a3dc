//! What Redis must keep for the promise that no acknowledged order is
//! lost: an append-only file or a replica (with `--durability replica`),
//! and no eviction. A Redis without them loses, on a restart, every
//! acknowledged order not yet in SQL and the live sales themselves (which
//! then answer 503 `sale_lost` until restored); one that evicts can drop a
//! sale's keys at any time. The service runs anyway, and says so at start.

use seckill_redis::{Master, RESPONSE_TIMEOUT, Target};

/// Warns, once per master, about settings that can lose acknowledged
/// orders. Says nothing if Redis cannot be asked (away, or `CONFIG`
/// renamed, as managed services do): the other tasks report an absent
/// Redis.
pub async fn warn_if_lossy(target: Target) {
    let Ok(masters) = target.masters().await else {
        return;
    };
    for master in masters {
        if let Ok(Some(settings)) = tokio::time::timeout(RESPONSE_TIMEOUT, read(&master)).await {
            settings.warn(&master.addr());
        }
    }
}

/// The settings of one master that decide what it can lose.
struct Settings {
    aof: bool,
    replicas: u32,
    eviction: String,
}

async fn read(master: &Master) -> Option<Settings> {
    let mut conn = master
        .client()
        .ok()?
        .get_multiplexed_async_connection()
        .await
        .ok()?;
    let config = |name: &'static str| redis::cmd("CONFIG").arg("GET").arg(name).clone();
    let aof: Vec<String> = config("appendonly").query_async(&mut conn).await.ok()?;
    let eviction: Vec<String> = config("maxmemory-policy")
        .query_async(&mut conn)
        .await
        .ok()?;
    let replication: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut conn)
        .await
        .ok()?;
    let replicas = replication
        .lines()
        .find_map(|l| l.strip_prefix("connected_slaves:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    Some(Settings {
        aof: aof.get(1).is_some_and(|v| v == "yes"),
        replicas,
        eviction: eviction.get(1).cloned().unwrap_or_default(),
    })
}

impl Settings {
    fn warn(&self, master: &str) {
        if !self.aof && self.replicas == 0 {
            tracing::warn!(
                master,
                "Redis keeps no append-only file and has no replica: a restart loses every \
                 acknowledged order not yet in SQL, and its live sales answer 503 sale_lost until \
                 restored from SQL; set `appendonly yes` (`appendfsync always` or `everysec`), or \
                 run a replica and serve with `--durability replica`"
            );
        }
        if self.eviction != "noeviction" && !self.eviction.is_empty() {
            tracing::warn!(
                master,
                policy = self.eviction,
                "Redis may evict keys (maxmemory-policy): a sale's keys can vanish under memory \
                 pressure; set `maxmemory-policy noeviction`"
            );
        }
    }
}
