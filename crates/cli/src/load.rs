//! `seckill load`: an HTTP load generator for one sale, bounded in count
//! and time, that checks the sale afterwards.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use serde::Serialize;
use serde_json::json;

use crate::redis_cost::Meter;
use crate::stats::{Latency, progress};
use seckill_service::client::{Http, Signer, code};

#[derive(ClapArgs)]
pub struct Args {
    /// Base URL of the service.
    #[arg(long)]
    url: String,
    /// Sale to buy from.
    #[arg(long)]
    sale: String,
    /// Purchase requests to send.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    buyers: u64,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    concurrency: u32,
    /// Stop sending after this many seconds even if requests remain.
    #[arg(long, default_value_t = 120)]
    max_seconds: u64,
    /// Give every request its own request id (idempotent retries).
    #[arg(long)]
    request_ids: bool,
    /// Distinct buyers the requests are spread over (default: 70 % of
    /// --buyers, so some buy twice); as many as --buyers: one request each.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    users: Option<u64>,
    /// Sign each buyer's token (HS256) with the secret in this file, as the
    /// service's `--buyer-auth jwt --jwt-secret-file` expects.
    #[arg(long)]
    jwt_secret_file: Option<std::path::PathBuf>,
    /// Sign each buyer's token with this PEM private key (RS256, ES256 or
    /// EdDSA by its type).
    #[arg(long)]
    jwt_private_key_file: Option<std::path::PathBuf>,
    /// `body`: name buyers in the body instead, for a service run with
    /// `--buyer-auth body`.
    #[arg(long, value_parser = ["body"])]
    buyer_auth: Option<String>,
    /// The service's Redis: report the Redis time per request, measured on
    /// the server (its command statistics are reset at the start).
    #[arg(long)]
    redis_url: Option<String>,
    #[arg(long)]
    json: bool,
    /// Also draw the run as an SVG picture here: answers per second and
    /// latency, second by second.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<std::path::PathBuf>,
}

#[derive(Serialize)]
pub struct Report {
    pub requests: u64,
    pub seconds: f64,
    pub requests_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub codes: BTreeMap<String, u64>,
    pub stock: u64,
    pub sold: u64,
    pub acknowledged: u64,
    pub oversold: u64,
    /// With `--redis-url`: Redis command time per request, µs (script calls
    /// plus the persister's and sweeper's plain commands).
    pub redis_us_per_request: Option<f64>,
    /// With `--redis-url` on this machine: `redis-server` CPU per request, µs.
    pub redis_cpu_us_per_request: Option<f64>,
}

pub async fn run(args: Args) -> Result<ExitCode> {
    seckill_engine::check_id("sale", &args.sale)?;
    let http = Http::new(&args.url, None);
    let signer = signer(&args)?;
    let report = load(&http, &args, signer).await?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{} requests in {:.2} s: {:.0}/s; latency p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            report.requests,
            report.seconds,
            report.requests_per_s,
            report.p50_ms,
            report.p99_ms,
            report.max_ms
        );
        for (code, n) in &report.codes {
            println!("  {code:<16} {n}");
        }
        println!(
            "sale: stock {}, sold {}, acknowledged {}, oversold {}",
            report.stock, report.sold, report.acknowledged, report.oversold
        );
        if let Some(us) = report.redis_us_per_request {
            print!("redis: {us:.2} µs of commands per request");
            match report.redis_cpu_us_per_request {
                Some(cpu) => println!(", {cpu:.2} µs of redis-server CPU per request"),
                None => println!(),
            }
        }
    }
    // More acknowledged than sold is fine when orders expired or were
    // cancelled and their units sold again; more sold than stock never is.
    let ok = report.oversold == 0;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// How buyers prove who they are: a signer of their tokens, or `None` to
/// name them in the body.
fn signer(args: &Args) -> Result<Option<Signer>> {
    let read = |path: &std::path::Path| {
        std::fs::read(path).with_context(|| format!("reading {}", path.display()))
    };
    match (
        &args.jwt_secret_file,
        &args.jwt_private_key_file,
        &args.buyer_auth,
    ) {
        (Some(file), None, None) => {
            let secret = read(file)?;
            let secret = secret.trim_ascii_end();
            Ok(Some(Signer::hs256(secret)))
        }
        (None, Some(file), None) => Ok(Some(Signer::pem(&read(file)?)?)),
        (None, None, Some(_)) => Ok(None),
        _ => anyhow::bail!(
            "name how buyers sign in, once: --jwt-secret-file FILE, --jwt-private-key-file FILE \
             or --buyer-auth body"
        ),
    }
}

/// The buyers' tokens, one per user, signed before the clock starts: a
/// shop's identity service signs them, not the buyer's request.
fn tokens(signer: &Signer, users: u64) -> Vec<String> {
    let ttl = Duration::from_secs(3600);
    let per_thread = users.div_ceil(4).max(1);
    std::thread::scope(|s| {
        let parts: Vec<_> = (0..users)
            .step_by(per_thread as usize)
            .map(|start| {
                s.spawn(move || {
                    (start..(start + per_thread).min(users))
                        .map(|u| signer.token(&format!("u{u}"), ttl))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|p| p.join().unwrap_or_default())
            .collect()
    })
}

pub async fn load(http: &Http, args: &Args, signer: Option<Signer>) -> Result<Report> {
    let path = format!("/v1/sales/{}/purchase", args.sale);
    let (status, _) = http.get(&format!("/v1/sales/{}", args.sale)).await?;
    anyhow::ensure!(status.is_success(), "sale {} answered {status}", args.sale);
    let users = args.users.unwrap_or(args.buyers * 7 / 10).max(1);
    let tokens: Arc<Vec<String>> = Arc::new(match &signer {
        Some(signer) => tokens(signer, users),
        None => Vec::new(),
    });
    let deadline = Instant::now() + Duration::from_secs(args.max_seconds);
    let meter = match &args.redis_url {
        Some(url) => Some(Meter::start(&seckill_redis::Target::server(url)).await?),
        None => None,
    };
    let bar = progress(args.buyers, "requests");
    let started = Instant::now();
    let worker = Worker {
        http: http.clone(),
        next: Arc::new(AtomicU64::new(0)),
        path,
        bar: bar.clone(),
        tokens,
        buyers: args.buyers,
        request_ids: args.request_ids,
        keep_samples: args.plot.is_some(),
        users,
        deadline,
        started,
    };
    let tasks: Vec<_> = (0..args.concurrency)
        .map(|_| tokio::spawn(worker.clone().run()))
        .collect();
    let mut tally = Tally::default();
    for task in tasks {
        tally.merge(task.await?);
    }
    let Tally {
        latency,
        codes,
        samples,
    } = tally;
    let seconds = started.elapsed().as_secs_f64();
    let requests = latency.count();
    let cost = match meter {
        Some(mut meter) => meter
            .read(&seckill_orders::PLAIN_COMMANDS)
            .await?
            .per(requests),
        None => None,
    };
    bar.finish_and_clear();
    if let Some(path) = &args.plot {
        crate::plot::load(path, &per_second(&samples))?;
    }
    let (_, sale) = http
        .get(&format!("/v1/sales/{}", args.sale))
        .await
        .context("reading the sale back")?;
    let stock = sale["stock"].as_u64().unwrap_or(0);
    let sold = sale["sold"].as_u64().unwrap_or(0);
    let remaining = sale["remaining"].as_u64().unwrap_or(0);
    Ok(Report {
        requests,
        seconds,
        requests_per_s: requests as f64 / seconds,
        p50_ms: latency.ms(0.5),
        p99_ms: latency.ms(0.99),
        max_ms: latency.max_ms(),
        acknowledged: codes.get("ok").copied().unwrap_or(0),
        codes,
        stock,
        sold,
        oversold: (sold + remaining).saturating_sub(stock) + sold.saturating_sub(stock),
        redis_us_per_request: cost.map(|c| c.0),
        redis_cpu_us_per_request: cost.and_then(|c| c.1),
    })
}

/// What the workers saw: each its own, then all of them merged.
#[derive(Default)]
struct Tally {
    latency: Latency,
    codes: BTreeMap<String, u64>,
    samples: Vec<Sample>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.latency.merge(&other.latency);
        self.samples.extend(other.samples);
        for (k, v) in other.codes {
            *self.codes.entry(k).or_default() += v;
        }
    }
}

/// One of the `--concurrency` request loops, with its own handles on what
/// they share (the next request number, the tokens, the progress bar).
#[derive(Clone)]
struct Worker {
    http: Http,
    next: Arc<AtomicU64>,
    path: String,
    bar: indicatif::ProgressBar,
    tokens: Arc<Vec<String>>,
    buyers: u64,
    request_ids: bool,
    keep_samples: bool,
    users: u64,
    deadline: Instant,
    started: Instant,
}

impl Worker {
    /// Takes the next request number and sends it, until all are sent or
    /// time is up.
    async fn run(self) -> Tally {
        let Worker {
            http,
            next,
            path,
            bar,
            tokens,
            buyers,
            request_ids,
            keep_samples,
            users,
            deadline,
            started,
        } = self;
        let mut latency = Latency::default();
        let mut codes: BTreeMap<String, u64> = BTreeMap::new();
        let mut samples = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= buyers || Instant::now() >= deadline {
                break;
            }
            // As many buyers as requests: each request a buyer of its
            // own (every token seen once); fewer: drawn at random.
            let user = if users >= buyers {
                i
            } else {
                rand::random_range(0..users)
            };
            let mut body = json!({});
            let buyer = match tokens.get(user as usize) {
                Some(token) => http.with_token(Some(token.clone())),
                None => {
                    body["user_id"] = json!(format!("u{user}"));
                    http.clone()
                }
            };
            if request_ids {
                body["request_id"] = json!(format!("r{i}"));
            }
            let t = Instant::now();
            let answer = buyer.post(&path, &body).await;
            let took = t.elapsed();
            latency.record(took);
            let code = match answer {
                Ok((status, body)) => code(status, &body),
                Err(_) => "transport_error".to_owned(),
            };
            if keep_samples {
                samples.push(Sample {
                    at: started.elapsed(),
                    took,
                    ok: code == "ok",
                });
            }
            *codes.entry(code).or_default() += 1;
            if i % 256 == 0 {
                bar.set_position(i);
            }
        }
        Tally {
            latency,
            codes,
            samples,
        }
    }
}

/// One answered request, kept for `--plot`.
struct Sample {
    /// When it was answered, since the load started.
    at: Duration,
    took: Duration,
    ok: bool,
}

/// The samples second by second (a second with none counts zero).
fn per_second(samples: &[Sample]) -> Vec<crate::plot::LoadSecond> {
    let n = samples
        .iter()
        .map(|s| s.at.as_secs() + 1)
        .max()
        .unwrap_or(0) as usize;
    let mut seconds: Vec<(u64, u64, Latency)> = vec![(0, 0, Latency::default()); n];
    for s in samples {
        let second = &mut seconds[s.at.as_secs() as usize];
        second.0 += u64::from(s.ok);
        second.1 += 1;
        second.2.record(s.took);
    }
    seconds
        .into_iter()
        .enumerate()
        .map(|(t, (ok, answers, latency))| crate::plot::LoadSecond {
            t: t as f64,
            ok: ok as f64,
            answers: answers as f64,
            p50_ms: latency.ms(0.5),
            p99_ms: latency.ms(0.99),
        })
        .collect()
}
