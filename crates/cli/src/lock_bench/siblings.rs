//! `seckill lock-bench --primitive semaphore|rwlock|ratelimit`: the lock's
//! siblings under N clients, each in a loop for the run's duration, on one
//! name (`hot`) or one each (`spread`), and the invariant each promises
//! checked on what the clients saw:
//! - semaphore: never more holders at once than permits;
//! - rwlock: a writer never beside anyone (one client in eight writes);
//! - ratelimit: never more admitted than `burst + rate × t` over the run,
//!   by the server's clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, UNIX_EPOCH};

use anyhow::{Context, Result};
use seckill_lock::{Locks, Rate};
use serde::Serialize;

use super::{Connections, Mode, Primitive};
use crate::redis_cost::Meter;
use crate::stats::Latency;

/// What a run of one sibling found.
#[derive(Serialize)]
pub struct Report {
    pub primitive: Primitive,
    pub mode: Mode,
    pub clients: u32,
    pub connections: Connections,
    pub duration_s: f64,
    /// Grants (semaphore, rwlock) or decisions (ratelimit).
    pub operations: u64,
    pub operations_per_s: f64,
    pub wait_p50_ms: f64,
    pub wait_p99_ms: f64,
    pub wait_max_ms: f64,
    /// Hot mode: from a release to the next grant.
    pub handoff_p50_ms: Option<f64>,
    pub handoff_p99_ms: Option<f64>,
    pub redis_us_per_operation: Option<f64>,
    /// Semaphore: the most holders seen at once; rwlock: the most writers
    /// beside anyone (0 when right).
    pub most_at_once: i64,
    /// Ratelimit: cells admitted, and the most the rate allowed.
    pub admitted: Option<u64>,
    pub bound: Option<f64>,
    pub ok: bool,
}

/// The settings a sibling run takes from `lock-bench`'s arguments.
pub struct Settings {
    pub primitive: Primitive,
    pub mode: Mode,
    pub clients: u32,
    pub connections: Connections,
    pub duration: Duration,
    pub lease: Duration,
    pub permits: u64,
    pub rate: f64,
    pub burst: u64,
}

/// Who holds what now, across the clients of this process.
#[derive(Default)]
struct Gauges {
    holders: AtomicI64,
    writers: AtomicI64,
    most: AtomicI64,
    /// Nanoseconds after the start at which the last holder released.
    released_at: AtomicI64,
}

#[derive(Default)]
struct Seen {
    operations: u64,
    admitted: u64,
    wait: Latency,
    handoff: Latency,
    /// Ratelimit: the server's clock (µs) at the first and last admission.
    first_us: Option<u128>,
    last_us: Option<u128>,
    /// The most at once its gauges saw (see [`Report::most_at_once`]).
    most: i64,
}

pub async fn run(s: &Settings, redis: &seckill_redis::Target) -> Result<Report> {
    let run_id = format!("{:08x}", rand::random::<u32>());
    let locks = Locks::new(redis)
        .await
        .with_context(|| format!("connecting to {redis}"))?;
    // Hot: every client on one name, one set of gauges; spread: each its own.
    let shared = Arc::new(Gauges::default());
    let mut meter = Meter::start(redis).await?;
    let started = Instant::now();
    let stop = started + s.duration;
    let mut tasks = Vec::new();
    for i in 0..s.clients {
        let name = match s.mode {
            Mode::Hot => format!("bench-{run_id}"),
            Mode::Spread => format!("bench-{run_id}-{i}"),
        };
        // Its own connections, as a process of its own would have, unless
        // the clients are to share them.
        let locks = if i == 0 || s.connections == Connections::Shared {
            locks.clone()
        } else {
            Locks::new(redis).await?
        };
        let client = Client {
            locks,
            name,
            gauges: match s.mode {
                Mode::Hot => shared.clone(),
                Mode::Spread => Arc::default(),
            },
            started,
            stop,
            writer: i % 8 == 0,
        };
        tasks.push(tokio::spawn(client.run(settings_of(s))));
    }
    let mut seen = Seen::default();
    for task in tasks {
        let one = task.await??;
        seen.operations += one.operations;
        seen.admitted += one.admitted;
        seen.wait.merge(&one.wait);
        seen.handoff.merge(&one.handoff);
        seen.first_us = seen.first_us.into_iter().chain(one.first_us).min();
        seen.last_us = seen.last_us.into_iter().chain(one.last_us).max();
        seen.most = seen.most.max(one.most);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cost = meter.read(&[]).await?;
    Ok(report(
        s,
        elapsed,
        &seen,
        cost.per(seen.operations).map(|c| c.0),
    ))
}

fn report(s: &Settings, elapsed: f64, seen: &Seen, redis_us: Option<f64>) -> Report {
    let most = seen.most;
    let spread = s.mode == Mode::Spread;
    let (admitted, bound, ok) = match s.primitive {
        Primitive::Semaphore => (None, None, most <= s.permits as i64),
        Primitive::Rwlock => (None, None, most == 0),
        _ => {
            // Per limiter: spread runs one per client.
            let span = match (seen.first_us, seen.last_us) {
                (Some(a), Some(b)) => (b - a) as f64 / 1e6,
                _ => 0.0,
            };
            let limiters = if spread { f64::from(s.clients) } else { 1.0 };
            let bound = limiters * (s.burst as f64 + s.rate * span) + 1e-6;
            (
                Some(seen.admitted),
                Some(bound),
                seen.admitted as f64 <= bound,
            )
        }
    };
    let handoff = (seen.handoff.count() > 0).then_some(&seen.handoff);
    Report {
        primitive: s.primitive,
        mode: s.mode,
        clients: s.clients,
        connections: s.connections,
        duration_s: elapsed,
        operations: seen.operations,
        operations_per_s: seen.operations as f64 / elapsed,
        wait_p50_ms: seen.wait.ms(0.5),
        wait_p99_ms: seen.wait.ms(0.99),
        wait_max_ms: seen.wait.max_ms(),
        handoff_p50_ms: handoff.map(|h| h.ms(0.5)),
        handoff_p99_ms: handoff.map(|h| h.ms(0.99)),
        redis_us_per_operation: redis_us,
        most_at_once: most,
        admitted,
        bound,
        ok,
    }
}

/// The per-client copy of what a loop needs from the settings.
#[derive(Clone, Copy)]
struct Loop {
    primitive: Primitive,
    hot: bool,
    lease: Duration,
    permits: u64,
    rate: Rate,
}

fn settings_of(s: &Settings) -> Loop {
    Loop {
        primitive: s.primitive,
        hot: s.mode == Mode::Hot,
        lease: s.lease,
        permits: s.permits,
        rate: Rate::per_second(s.rate).burst(s.burst),
    }
}

struct Client {
    locks: Locks,
    name: String,
    gauges: Arc<Gauges>,
    started: Instant,
    stop: Instant,
    writer: bool,
}

impl Client {
    async fn run(self, l: Loop) -> Result<Seen> {
        let mut seen = Seen::default();
        match l.primitive {
            Primitive::Semaphore => {
                let sem = self.locks.semaphore(&self.name, l.permits)?.lease(l.lease);
                while Instant::now() < self.stop {
                    let asked = Instant::now();
                    let permits = sem.acquire(1, Duration::from_secs(30)).await?;
                    self.granted(&mut seen, asked, l.primitive, false);
                    self.releasing(false);
                    for permit in permits {
                        permit.release().await?;
                    }
                }
            }
            Primitive::Rwlock => {
                let rw = self.locks.rwlock(&self.name)?.lease(l.lease);
                while Instant::now() < self.stop {
                    let asked = Instant::now();
                    let guard = if self.writer {
                        rw.write(Duration::from_secs(30)).await?
                    } else {
                        rw.read(Duration::from_secs(30)).await?
                    };
                    self.granted(&mut seen, asked, l.primitive, self.writer);
                    self.releasing(self.writer);
                    guard.release().await?;
                }
            }
            _ => {
                let limiter = self.locks.rate_limiter(&self.name, l.rate)?;
                while Instant::now() < self.stop {
                    let asked = Instant::now();
                    let decision = limiter.take(1).await?;
                    seen.operations += 1;
                    seen.wait.record(asked.elapsed());
                    if decision.admitted {
                        seen.admitted += 1;
                        let at = decision.decided_at.duration_since(UNIX_EPOCH)?.as_micros();
                        seen.first_us = Some(seen.first_us.map_or(at, |f| f.min(at)));
                        seen.last_us = Some(seen.last_us.map_or(at, |f| f.max(at)));
                    }
                }
            }
        }
        if !l.hot {
            seen.handoff = Latency::default();
        }
        seen.most = self.gauges.most.load(Ordering::SeqCst);
        Ok(seen)
    }

    /// A grant arrived: counts it, its wait and hand-off, and who holds
    /// now (inside the grant's real interval, so an overlap seen here is
    /// one in Redis).
    fn granted(&self, seen: &mut Seen, asked: Instant, primitive: Primitive, writer: bool) {
        let got = Instant::now();
        seen.operations += 1;
        seen.wait.record(got - asked);
        let released = self.gauges.released_at.load(Ordering::Acquire);
        if released > 0 {
            let since = (got - self.started).saturating_sub(Duration::from_nanos(released as u64));
            seen.handoff.record(since);
        }
        let holders = self.gauges.holders.fetch_add(1, Ordering::SeqCst) + 1;
        let writers = self
            .gauges
            .writers
            .fetch_add(i64::from(writer), Ordering::SeqCst)
            + i64::from(writer);
        let at_once = match primitive {
            // A writer beside anyone.
            Primitive::Rwlock => i64::from(writers > 0 && holders > 1),
            _ => holders,
        };
        self.gauges.most.fetch_max(at_once, Ordering::SeqCst);
    }

    fn releasing(&self, writer: bool) {
        self.gauges.holders.fetch_sub(1, Ordering::SeqCst);
        self.gauges
            .writers
            .fetch_sub(i64::from(writer), Ordering::SeqCst);
        let now = (Instant::now() - self.started).as_nanos() as i64;
        self.gauges.released_at.store(now, Ordering::Release);
    }
}

pub fn print(r: &Report, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(r)?);
        return Ok(());
    }
    let opt = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"));
    println!(
        "{:<10} {:<7} {:>7} {:>10} {:>10} {:>9} {:>9} {:>11} {:>11} {:>8} {:>6}",
        "primitive",
        "mode",
        "clients",
        "operations",
        "ops/s",
        "wait p50",
        "wait p99",
        "handoff p50",
        "handoff p99",
        "redis µs",
        "check"
    );
    println!(
        "{:<10} {:<7} {:>7} {:>10} {:>10.0} {:>9.3} {:>9.3} {:>11} {:>11} {:>8} {:>6}",
        format!("{:?}", r.primitive).to_lowercase(),
        if r.mode == Mode::Hot { "hot" } else { "spread" },
        r.clients,
        r.operations,
        r.operations_per_s,
        r.wait_p50_ms,
        r.wait_p99_ms,
        opt(r.handoff_p50_ms),
        opt(r.handoff_p99_ms),
        r.redis_us_per_operation
            .map_or_else(|| "-".to_owned(), |us| format!("{us:.2}")),
        if r.ok { "ok" } else { "WRONG" }
    );
    match (r.admitted, r.bound) {
        (Some(admitted), Some(bound)) => {
            println!(
                "(latencies in ms) admitted {admitted} of at most {bound:.0} (burst + rate × t)"
            );
        }
        _ => println!("(latencies in ms) most at once: {}", r.most_at_once),
    }
    Ok(())
}
