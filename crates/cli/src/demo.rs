//! `seckill demo`: the whole system end to end on a private redis-server (or,
//! with `--cluster`, a private 3-master + 3-replica Redis Cluster) and a
//! SQLite file in a temporary directory. A 100-unit sale, 20,000 buyers
//! over HTTP (some repeating, some retrying with the same request id), some
//! winners paying as they win and some abandoning; the abandoned units expire and are
//! sold again; then the audit. Buyers sign in with tokens (HS256, a secret
//! minted for the run) and payments arrive as signed webhooks: the
//! service's real path, not `--buyer-auth body`. Exit 0 only if everything checks out. With
//! `--dashboard` the service stays up afterwards for its live dashboard.

use std::collections::{BTreeMap, HashSet};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args as ClapArgs;
use futures_util::StreamExt;
use seckill_engine::Engine;
use seckill_orders::{Store, audit, wait_drained};
use serde_json::{Value, json};

use seckill_service::client::{Http, Signer, code};
use seckill_service::webhook;

use crate::target::RedisArgs;

const SALE: &str = "demo";
const STOCK: u64 = 100;
const PAYMENT_TIMEOUT_SECS: u64 = 2;
/// Waves after the first, at most: each sells again what expired unpaid.
const MAX_WAVES: usize = 10;

#[derive(ClapArgs)]
pub struct Args {
    #[command(flatten)]
    redis: RedisArgs,
    /// Buyers in the first wave.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    buyers: u64,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    concurrency: u32,
    /// Keep the service up after the demo, print the live dashboard's URL
    /// and admin token, and stop on Ctrl-C or SIGTERM.
    #[arg(long)]
    dashboard: bool,
}

pub async fn run(args: Args) -> Result<ExitCode> {
    let started = Instant::now();
    let target = args.redis.target()?;
    let redis = target.redis.clone();
    let dir = tempfile::Builder::new().prefix("seckill-demo-").tempdir()?;
    let database = dir.path().join("orders.db").to_string_lossy().into_owned();
    let service = Service::start(&redis, &database).await?;
    let admin = Http::new(&service.base, Some(service.token.clone()));
    let http = &service.buyers.http;
    let engine = create_sale(&redis, &admin).await?;

    let requests = first_wave_requests(args.buyers);
    let t = Instant::now();
    let first = wave(
        &service.buyers,
        requests,
        args.concurrency as usize,
        STOCK * 3 / 5,
    )
    .await?;
    let wave_secs = t.elapsed().as_secs_f64();
    let resold = resell(&service.buyers, args.concurrency as usize, first.paid).await?;

    // Everything in SQL, then the audit.
    let store = Store::open(&database).await?;
    wait_drained(&mut engine.connection(), SALE, Duration::from_secs(10)).await?;
    let report = audit(&engine, &store, SALE).await?;
    let (_, sale) = http.get(&format!("/v1/sales/{SALE}")).await?;

    let sold = sale["sold"].as_u64().unwrap_or(0);
    let summary = Summary {
        buyers: args.buyers,
        wave_secs,
        first: &first,
        resold,
        sold,
        report: &report,
    };
    summary.print(started)?;
    let ok = report.clean && sold == STOCK && !first.codes.contains_key("transport_error");
    if args.dashboard {
        let stopped = crate::signals::shutdown();
        println!();
        println!("dashboard: {}/dashboard", service.base);
        println!("admin token: {}", service.token);
        println!("the service stays up; Ctrl-C stops it");
        stopped.await;
    }
    service.running.stop().await;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The demo's own service, and what its admin and buyers need to reach it.
struct Service {
    running: seckill_service::Running,
    base: String,
    /// The admin token minted for the run.
    token: String,
    buyers: Buyers,
}

impl Service {
    /// Starts the service on a free port, with secrets minted for this run.
    async fn start(redis: &seckill_redis::Target, database: &str) -> Result<Service> {
        let token = format!("{:032x}", rand::random::<u128>());
        // The real path: buyers carry HS256 tokens signed with a secret minted
        // for this run (as a shop's identity service would sign them), and
        // payments arrive as signed webhooks.
        let jwt_secret = format!(
            "{:032x}{:032x}",
            rand::random::<u128>(),
            rand::random::<u128>()
        );
        let webhook_secret = format!("{:032x}", rand::random::<u128>());
        let auth = seckill_service::Auth {
            webhook_secret: Some(webhook_secret.as_str().into()),
            ..seckill_service::Auth::new(seckill_service::Buyers::Jwt(seckill_service::Jwt::new(
                seckill_service::JwtKeys::Secret(jwt_secret.as_str().into()),
            )))
        };
        let running = seckill_service::start(seckill_service::Config {
            listen: "127.0.0.1:0".parse()?,
            redis: redis.clone(),
            database_url: database.to_owned(),
            admin_token: token.as_str().into(),
            auth,
            rate_per_user: 50.0,
            burst_per_user: 100.0,
            rate_limit: Default::default(),
            // Every buyer of the demo calls from this machine's one address.
            rate_per_ip: 0.0,
            burst_per_ip: 1.0,
            background: true,
            limits: Default::default(),
            archive_after: std::time::Duration::from_secs(3600),
            restore_lost_sales: false,
            durability: Default::default(),
        })
        .await
        .context("starting the service")?;
        let base = format!("http://{}", running.addr);
        println!("service on {base}, redis {redis}, orders in {database}");
        let buyers = Buyers {
            http: Http::new(&base, None),
            signer: Signer::hs256(jwt_secret.as_bytes()),
            webhook_secret,
        };
        Ok(Service {
            running,
            base,
            token,
            buyers,
        })
    }
}

/// The sale: if an earlier demo left one on a shared Redis, start over.
async fn create_sale(redis: &seckill_redis::Target, admin: &Http) -> Result<Engine> {
    let engine = Engine::connect_target(redis).await?;
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
    Ok(engine)
}

/// Wave 1: users drawn from 75 % as many ids as requests (so some ask
/// twice), and every tenth request a retry of an earlier request id.
/// Winners pay the moment they win, so no speed of the machine can let an
/// order that is meant to be paid expire first: the first 60 % of the
/// winners pay, the rest abandon their orders.
fn first_wave_requests(buyers: u64) -> Vec<(String, Value)> {
    let users = buyers * 3 / 4;
    let mut requests = Vec::new();
    for i in 0..buyers {
        let (user, request) = if i % 10 == 9 {
            let earlier = rand::random_range(0..i);
            (user_of(earlier, users), format!("r{earlier}"))
        } else {
            (user_of(i, users), format!("r{i}"))
        };
        requests.push((user, json!({ "request_id": request })));
    }
    requests
}

/// Abandoned orders expire and their units come back; later waves buy
/// them and pay at once. An order whose payment came too late (it expired
/// first) is sold again the same way, so the sale always ends sold out
/// and paid, however slow the machine. Answers how many were resold.
async fn resell(buyers: &Buyers, concurrency: usize, paid: u64) -> Result<u64> {
    let mut paid = paid;
    let mut resold = 0;
    let mut late_buyers = 0;
    for _ in 0..MAX_WAVES {
        if paid == STOCK {
            break;
        }
        let returned = wait_returned(&buyers.http, paid).await?;
        let late: Vec<(String, Value)> = (late_buyers..late_buyers + returned * 20)
            .map(|i| {
                (
                    format!("late{i}"),
                    json!({ "request_id": format!("late{i}") }),
                )
            })
            .collect();
        late_buyers += returned * 20;
        let again = wave(buyers, late, concurrency, u64::MAX).await?;
        resold += again.won;
        paid += again.paid;
    }
    if paid != STOCK {
        bail!("only {paid} of {STOCK} units were paid after {MAX_WAVES} waves");
    }
    Ok(resold)
}

/// Waits for every unpaid unit to be back on sale (its order expired);
/// answers how many are.
async fn wait_returned(http: &Http, paid: u64) -> Result<u64> {
    let deadline = Instant::now() + Duration::from_secs(PAYMENT_TIMEOUT_SECS + 10);
    loop {
        let (status, sale) = http.get(&format!("/v1/sales/{SALE}")).await?;
        let remaining = sale["remaining"]
            .as_u64()
            .with_context(|| format!("GET /v1/sales/{SALE} answered {status}: {sale}"))?;
        if remaining == STOCK - paid {
            return Ok(remaining);
        }
        if Instant::now() > deadline {
            bail!("abandoned orders did not expire: {sale}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What the demo prints at the end.
struct Summary<'a> {
    /// Requests in the first wave.
    buyers: u64,
    wave_secs: f64,
    first: &'a Wave,
    /// Units resold in later waves and paid.
    resold: u64,
    /// Units the sale reports sold.
    sold: u64,
    report: &'a seckill_orders::Report,
}

impl Summary<'_> {
    /// The table of the run, then the audit's findings.
    fn print(&self, started: Instant) -> Result<()> {
        let (buyers, wave_secs, first, sold) = (self.buyers, self.wave_secs, self.first, self.sold);
        let retried_ok = first.codes.get("ok").copied().unwrap_or(0) - first.won;
        let (won, payers, abandoned) = (first.won, first.paid, first.won - first.paid);
        println!();
        println!("{:<44} {:>10}", "first wave requests (HTTP)", buyers);
        println!("{:<44} {:>10.2}", "first wave seconds", wave_secs);
        println!(
            "{:<44} {:>10.0}",
            "first wave requests/s",
            buyers as f64 / wave_secs
        );
        for (code, n) in &first.codes {
            println!("{:<44} {:>10}", format!("  answered {code}"), n);
        }
        println!("{:<44} {:>10}", "orders won in the first wave", won);
        println!(
            "{:<44} {:>10}",
            "retries answered with their first order", retried_ok
        );
        println!("{:<44} {:>10}", "paid as they won", payers);
        println!(
            "{:<44} {:>10}",
            "abandoned (or paid too late), expired", abandoned
        );
        println!(
            "{:<44} {:>10}",
            "resold in later waves and paid", self.resold
        );
        println!("{:<44} {:>10}", "units sold (stock 100)", sold);
        println!("{:<44} {:>10}", "oversold", sold.saturating_sub(STOCK));
        println!("{:<44} {:>10}", "orders in SQL", self.report.orders_in_sql);
        println!(
            "{:<44} {:>10}",
            "audit",
            if self.report.clean {
                "clean"
            } else {
                "MISMATCHES"
            }
        );
        for finding in &self.report.findings {
            println!("  {}", serde_json::to_string(finding)?);
        }
        println!(
            "{:<44} {:>10.1}",
            "demo seconds",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }
}

fn user_of(i: u64, users: u64) -> String {
    format!("u{}", i % users.max(1))
}

/// What one wave of buyers did.
#[derive(Default)]
struct Wave {
    /// Answers by code (`ok` counts retries answered with their order).
    codes: BTreeMap<String, u64>,
    /// Distinct orders won.
    won: u64,
    /// Orders paid (the first `pay_first` won, as they were won).
    paid: u64,
}

/// How the demo's buyers and payment side reach the service.
struct Buyers {
    http: Http,
    /// Signs each buyer's token.
    signer: Signer,
    /// Signs the payment side's webhooks.
    webhook_secret: String,
}

/// Sends `requests` (a buyer and its body) at `concurrency`, each with its
/// buyer's token; the first `pay_first` distinct orders won are paid as
/// soon as they are won. A payment refused because the order expired first
/// is not an error: its unit comes back to be sold again.
async fn wave(
    buyers: &Buyers,
    requests: Vec<(String, Value)>,
    concurrency: usize,
    pay_first: u64,
) -> Result<Wave> {
    let path = format!("/v1/sales/{SALE}/purchase");
    let seen = std::sync::Mutex::new(HashSet::new());
    let answers: Vec<Result<(String, bool)>> = futures_util::stream::iter(requests)
        .map(|(user, body)| {
            let token = buyers.signer.token(&user, Duration::from_secs(600));
            let http = buyers.http.with_token(Some(token));
            let (path, seen) = (path.clone(), &seen);
            async move {
                let (status, body) = match http.post(&path, &body).await {
                    Ok(answer) => answer,
                    Err(_) => return Ok(("transport_error".to_owned(), false)),
                };
                let code = code(status, &body);
                let order = body["order_id"].as_str().unwrap_or_default().to_owned();
                let to_pay = {
                    let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
                    let first = code == "ok" && seen.insert(order.clone());
                    first && (seen.len() as u64) <= pay_first
                };
                let paid = to_pay && pay(buyers, &order).await?;
                Ok((code, paid))
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let mut wave = Wave::default();
    for answer in answers {
        let (code, paid) = answer?;
        *wave.codes.entry(code).or_default() += 1;
        wave.paid += u64::from(paid);
    }
    wave.won = seen.lock().unwrap_or_else(|p| p.into_inner()).len() as u64;
    Ok(wave)
}

/// Pays an order by a signed webhook, as a payment provider would; `false`
/// if it had expired before the payment arrived.
async fn pay(buyers: &Buyers, order: &str) -> Result<bool> {
    let path = format!("/v1/orders/{order}/pay");
    let body = serde_json::to_vec(&json!({ "payment_ref": format!("pay-{order}") }))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let signature = webhook::sign(buyers.webhook_secret.as_bytes(), now, &body);
    let (status, body) = buyers
        .http
        .post_bytes(&path, body.into(), &[(webhook::HEADER, &signature)])
        .await?;
    if status.is_success() {
        return Ok(true);
    }
    if code(status, &body) == "order_expired" {
        return Ok(false);
    }
    bail!("{path} answered {status}: {body}")
}
