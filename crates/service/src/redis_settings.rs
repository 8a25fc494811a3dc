//! What Redis must keep for the promise that no acknowledged order is
//! lost: an append-only file or a replica (with `--durability replica`),
//! and no eviction. A Redis without them loses, on a restart, every
//! acknowledged order not yet in SQL and the live sales themselves (which
//! then answer 503 `sale_lost` until restored); one that evicts can drop a
//! sale's keys at any time. The service runs anyway, and says so at start,
//! as it says when Redis does not answer at all.

use seckill_redis::{Conn, Master, RESPONSE_TIMEOUT, Target};

/// Says at start, once, when Redis does not answer on `conn` (the service
/// starts anyway), else warns, once per master, about settings that can
/// lose acknowledged orders. Says nothing of settings it cannot read
/// (`CONFIG` renamed, as managed services do).
pub async fn check_at_start(target: Target, mut conn: Conn) {
    let answered = tokio::time::timeout(RESPONSE_TIMEOUT, conn.ping()).await;
    if let Some(error) = match answered {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(_) => Some(format!("no answer within {RESPONSE_TIMEOUT:?}")),
    } {
        tracing::warn!(
            redis = %target,
            error,
            "Redis does not answer; starting anyway: purchases and /readyz answer 503 until it does"
        );
        return;
    }
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
