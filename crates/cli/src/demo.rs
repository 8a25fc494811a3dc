//! `seckill demo`: the whole system end to end on a private redis-server and
//! a SQLite file in a temporary directory. A 100-unit sale, 20,000 buyers
//! over HTTP (some repeating, some retrying with the same request id), some
//! winners paying and some abandoning; the abandoned units expire and are
//! sold again; then the audit. Exit 0 only if everything checks out.

use std::collections::{BTreeMap, HashSet};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args as ClapArgs;
use futures_util::StreamExt;
use seckill_engine::Engine;
use seckill_orders::{Store, audit, unpersisted};
use seckill_testkit::RedisServer;
use serde_json::{Value, json};

use seckill_service::client::{Http, code};

const SALE: &str = "demo";
const STOCK: u64 = 100;
const PAYMENT_TIMEOUT_SECS: u64 = 2;

#[derive(ClapArgs)]
pub struct Args {
    /// Use this Redis instead of starting a private redis-server.
    #[arg(long, env = "SECKILL_REDIS_URL")]
    redis_url: Option<String>,
    /// Buyers in the first wave.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    buyers: u64,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    concurrency: u32,
}

pub async fn run(args: Args) -> Result<ExitCode> {
    let started = Instant::now();
    let private = match &args.redis_url {
        Some(_) => None,
        None => Some(RedisServer::start().context("starting a private redis-server")?),
    };
    let redis_url = args
        .redis_url
        .clone()
        .or_else(|| private.as_ref().map(RedisServer::url))
        .unwrap_or_default();
    let dir = tempfile::Builder::new().prefix("seckill-demo-").tempdir()?;
    let database = dir.path().join("orders.db").to_string_lossy().into_owned();
    let token = format!("{:032x}", rand::random::<u128>());
    let running = seckill_service::start(seckill_service::Config {
        listen: "127.0.0.1:0".parse()?,
        redis_url: redis_url.clone(),
        database_url: database.clone(),
        admin_token: token.clone(),
        rate_per_user: 50.0,
        burst_per_user: 100.0,
        background: true,
    })
    .await
    .context("starting the service")?;
    let base = format!("http://{}", running.addr);
    println!("service on {base}, redis {redis_url}, orders in {database}");
    let admin = Http::new(&base, Some(token));
    let http = Http::new(&base, None);

    // The sale: if an earlier demo left one on a shared Redis, start over.
    let engine = Engine::connect(&redis_url).await?;
    engine.delete_sale(SALE).await?;
    let (status, body) = admin
        .post(
            "/v1/sales",
            &json!({ "id": SALE, "name": "Demo drop", "stock": STOCK, "per_user_limit": 1,
                     "payment_timeout_secs": PAYMENT_TIMEOUT_SECS }),
        )
        .await?;
    if status.as_u16() != 201 {
        bail!("creating the sale answered {status}: {body}");
    }

    // Wave 1: users drawn from 75 % as many ids as requests (so some ask
    // twice), and every tenth request a retry of an earlier request id.
    let users = args.buyers * 3 / 4;
    let mut requests = Vec::new();
    for i in 0..args.buyers {
        let (user, request) = if i % 10 == 9 {
            let earlier = rand::random_range(0..i);
            (user_of(earlier, users), format!("r{earlier}"))
        } else {
            (user_of(i, users), format!("r{i}"))
        };
        requests.push(json!({ "user_id": user, "request_id": request }));
    }
    let t = Instant::now();
    let answers = wave(&http, requests, args.concurrency as usize).await;
    let wave_secs = t.elapsed().as_secs_f64();
    let mut codes: BTreeMap<String, u64> = BTreeMap::new();
    let mut winners = Vec::new();
    for (code, body) in &answers {
        *codes.entry(code.clone()).or_default() += 1;
        if code == "ok" {
            winners.push(body["order_id"].as_str().unwrap_or_default().to_owned());
        }
    }
    let distinct: HashSet<&String> = winners.iter().collect();
    let mut winners: Vec<String> = distinct.into_iter().cloned().collect();
    winners.sort();
    let retried_ok = codes.get("ok").copied().unwrap_or(0) - winners.len() as u64;

    // Winners: the first 60 % pay, the rest abandon their orders.
    let payers = winners.len() * 3 / 5;
    for order in &winners[..payers] {
        expect_ok(&http, &format!("/v1/orders/{order}/pay")).await?;
    }
    let abandoned = (winners.len() - payers) as u64;

    // Their units expire and come back; a second wave buys them.
    let deadline = Instant::now() + Duration::from_secs(PAYMENT_TIMEOUT_SECS + 10);
    loop {
        let (_, sale) = http.get(&format!("/v1/sales/{SALE}")).await?;
        if sale["remaining"].as_u64() == Some(abandoned) {
            break;
        }
        if Instant::now() > deadline {
            bail!("abandoned orders did not expire: {sale}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let second: Vec<Value> = (0..abandoned * 20)
        .map(|i| json!({ "user_id": format!("late{i}"), "request_id": format!("late{i}") }))
        .collect();
    let resold: Vec<String> = wave(&http, second, args.concurrency as usize)
        .await
        .into_iter()
        .filter(|(code, _)| code == "ok")
        .map(|(_, body)| body["order_id"].as_str().unwrap_or_default().to_owned())
        .collect();
    for order in &resold {
        expect_ok(&http, &format!("/v1/orders/{order}/pay")).await?;
    }

    // Everything in SQL, then the audit.
    let store = Store::open(&database).await?;
    let mut conn = seckill_lock::client(&redis_url)?
        .get_multiplexed_async_connection()
        .await?;
    let drain_deadline = Instant::now() + Duration::from_secs(10);
    while unpersisted(&mut conn, SALE).await? > 0 {
        if Instant::now() > drain_deadline {
            bail!("the persister did not drain within 10 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let report = audit(&engine, &store, &redis_url, SALE).await?;
    let (_, sale) = http.get(&format!("/v1/sales/{SALE}")).await?;
    running.stop().await;

    let sold = sale["sold"].as_u64().unwrap_or(0);
    let paid = payers as u64 + resold.len() as u64;
    println!();
    println!("{:<44} {:>10}", "first wave requests (HTTP)", args.buyers);
    println!("{:<44} {:>10.2}", "first wave seconds", wave_secs);
    println!(
        "{:<44} {:>10.0}",
        "first wave requests/s",
        args.buyers as f64 / wave_secs
    );
    for (code, n) in &codes {
        println!("{:<44} {:>10}", format!("  answered {code}"), n);
    }
    println!(
        "{:<44} {:>10}",
        "orders won in the first wave",
        winners.len()
    );
    println!(
        "{:<44} {:>10}",
        "retries answered with their first order", retried_ok
    );
    println!("{:<44} {:>10}", "paid", payers);
    println!(
        "{:<44} {:>10}",
        "abandoned, expired, stock returned", abandoned
    );
    println!(
        "{:<44} {:>10}",
        "resold in the second wave and paid",
        resold.len()
    );
    println!("{:<44} {:>10}", "units sold (stock 100)", sold);
    println!("{:<44} {:>10}", "oversold", sold.saturating_sub(STOCK));
    println!("{:<44} {:>10}", "orders in SQL", report.orders_in_sql);
    println!(
        "{:<44} {:>10}",
        "audit",
        if report.clean { "clean" } else { "MISMATCHES" }
    );
    for finding in &report.findings {
        println!("  {}", serde_json::to_string(finding)?);
    }
    println!(
        "{:<44} {:>10.1}",
        "demo seconds",
        started.elapsed().as_secs_f64()
    );
    let ok = report.clean
        && sold == STOCK
        && paid == STOCK
        && resold.len() as u64 == abandoned
        && !codes.contains_key("transport_error");
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn user_of(i: u64, users: u64) -> String {
    format!("u{}", i % users.max(1))
}

async fn wave(http: &Http, requests: Vec<Value>, concurrency: usize) -> Vec<(String, Value)> {
    let path = format!("/v1/sales/{SALE}/purchase");
    futures_util::stream::iter(requests)
        .map(|body| {
            let (http, path) = (http.clone(), path.clone());
            async move {
                match http.post(&path, &body).await {
                    Ok((status, body)) => (code(status, &body), body),
                    Err(_) => ("transport_error".to_owned(), Value::Null),
                }
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await
}

async fn expect_ok(http: &Http, path: &str) -> Result<()> {
    let (status, body) = http.post(path, &json!({})).await?;
    if !status.is_success() {
        bail!("{path} answered {status}: {body}");
    }
    Ok(())
}
