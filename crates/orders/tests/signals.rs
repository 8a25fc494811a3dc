//! Background work that follows events, not the number of sales: with
//! hundreds of idle sales the persister, sweeper and archiver send Redis a
//! handful of calls per master per second, yet a purchase in any of them
//! still reaches SQL within a second and an unpaid order still expires by
//! its pay-by time (the slow full read and sweep are out of reach here:
//! they run at start, then every few minutes). One server, and a cluster.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use seckill_engine::{Engine, OrderState, Outcome, PurchaseRequest, SaleSpec, Strategy};
use seckill_orders::{Persister, PersisterConfig, Store, archive_forever, sweep_forever};
use seckill_redis::Target;
use seckill_testkit::{RedisCluster, RedisServer};

const SALES: usize = 300;

/// A connection to one master.
async fn master(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Calls Redis counted over every master (`INFO commandstats`, scripts'
/// commands included), of one command or (`None`) all.
async fn calls(masters: &[String], command: Option<&str>) -> u64 {
    let mut total = 0;
    for url in masters {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut master(url).await)
            .await
            .unwrap();
        total += seckill_testkit::commandstats_calls(&info, command);
    }
    total
}

async fn reset_stats(masters: &[String]) {
    for url in masters {
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut master(url).await)
            .await
            .unwrap();
    }
}

async fn events_not_sales(target: Target, masters: Vec<String>) {
    let engine = Engine::connect_target(&target).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("o.db").to_str().unwrap())
        .await
        .unwrap();
    for i in 0..SALES {
        let spec = SaleSpec::new(&format!("s{i}"), 10).payment_timeout_secs(1);
        engine.create_sale(&spec).await.unwrap();
    }
    reset_stats(&masters).await;
    let config = PersisterConfig {
        consumer: "p".to_owned(),
        full_read: Duration::from_secs(3600),
        ..PersisterConfig::default()
    };
    let persister = Persister::with_target(&target, store.clone(), config)
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until = || {
        let mut stopped = stopped.clone();
        async move { drop(stopped.wait_for(|s| *s).await) }
    };
    let tasks = [
        tokio::spawn(persister.run(until())),
        tokio::spawn(sweep_forever(
            engine.clone(),
            Duration::from_millis(200),
            until(),
        )),
        tokio::spawn(archive_forever(
            engine.clone(),
            store.clone(),
            Duration::from_secs(3600),
            until(),
        )),
    ];

    // The start reads every sale once, arming each.
    let deadline = Instant::now() + Duration::from_secs(30);
    for i in 0..SALES {
        loop {
            // Armed: its master's ledger named (`n`).
            let news: Option<String> = redis::cmd("HGET")
                .arg(format!("seckill:{{sale:s{i}}}:sale"))
                .arg("n")
                .query_async(&mut engine.connection())
                .await
                .unwrap();
            if news.is_some() {
                break;
            }
            assert!(Instant::now() < deadline, "sale s{i} was never armed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    // Idle: a few calls per master per second, whatever the sales. Asking
    // each sale 50 times a second, as the reads once did, is 30,000 calls.
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A new sale's stream holds only the entry that opened it: the start
    // arms each sale (an HDEL of 'q', at times two) and files no batch for
    // it, whose commit would cost each sale one HDEL more (about 2.5 each).
    let hdel = calls(&masters, Some("hdel")).await;
    assert!(
        hdel < 2 * SALES as u64,
        "{hdel} HDEL calls to start {SALES} sales"
    );
    reset_stats(&masters).await;
    let idle = Duration::from_secs(2);
    tokio::time::sleep(idle).await;
    let idle_calls = calls(&masters, None).await;
    let bound = 400 * masters.len() as u64 * idle.as_secs();
    assert!(
        idle_calls <= bound,
        "{idle_calls} calls in {idle:?} with {SALES} idle sales (at most {bound})"
    );

    // One purchase in each of 40 sales: each reaches SQL, then expires by
    // its pay-by time, in Redis and in SQL. Both purchase scripts tell the
    // persisters (purchase.lua, and purchase_batch.lua for `coalesced`).
    let mut bought = HashMap::new();
    for (n, i) in (0..SALES).step_by(SALES / 40).enumerate() {
        let sale = format!("s{i}");
        let strategy = if n % 2 == 0 {
            Strategy::Atomic
        } else {
            Strategy::Coalesced
        };
        let purchaser = engine.purchaser(strategy, &sale).await.unwrap();
        let Outcome::Ok(order) = purchaser
            .purchase(&PurchaseRequest::new("alice"))
            .await
            .unwrap()
        else {
            panic!("the purchase in {sale} was refused");
        };
        bought.insert(order.order_id, Instant::now());
    }
    // Time from purchase to SQL, and to expired in SQL.
    let (mut to_sql, mut to_expired) = (Duration::ZERO, Duration::ZERO);
    let mut in_sql = std::collections::HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left: Vec<String> = bought.keys().cloned().collect();
    while !left.is_empty() {
        let mut still = Vec::new();
        for id in left {
            let stored = store.order(&id).await.unwrap();
            let taken = bought[&id].elapsed();
            if stored.is_some() && in_sql.insert(id.clone()) {
                to_sql = to_sql.max(taken);
            }
            let expired = stored.is_some_and(|o| o.state == OrderState::Expired);
            if expired && engine.order(&id).await.unwrap().state == OrderState::Expired {
                to_expired = to_expired.max(taken);
            } else {
                still.push(id);
            }
        }
        left = still;
        assert!(
            Instant::now() < deadline,
            "orders never reached SQL or never expired: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        to_sql < Duration::from_secs(1),
        "an order took {to_sql:?} to reach SQL"
    );
    // Pay-by is one second after the purchase; the sweeper looks every
    // 200 ms, and the expiry must reach SQL too.
    assert!(
        to_expired < Duration::from_millis(2_500),
        "an order took {to_expired:?} to expire and reach SQL"
    );
    let _ = stop.send(true);
    for task in tasks {
        task.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sales_cost_calls_per_master_not_per_sale_on_one_server() {
    let server = RedisServer::start().unwrap();
    events_not_sales(Target::server(&server.url()), vec![server.url()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sales_cost_calls_per_master_not_per_sale_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0).unwrap();
    let masters = cluster
        .masters()
        .unwrap()
        .into_iter()
        .map(|port| format!("redis://127.0.0.1:{port}/"))
        .collect();
    let target = Target::cluster(&cluster.addresses().join(",")).unwrap();
    events_not_sales(target, masters).await;
}
