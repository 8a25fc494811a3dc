//! `seckill lock-bench`: N clients take a lock in a loop and do an
//! unprotected GET/SET of a counter inside it; the counter must come out
//! exact. `hot`: all clients share one lock. `spread`: one lock each.
//! With `--work empty` the holders do nothing and the check is that every
//! grant got a fence of its own, each client's above its last.
//! `--primitive semaphore|rwlock|ratelimit` runs a sibling instead
//! (`siblings`).

mod print;
mod siblings;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Args as ClapArgs, ValueEnum};
use redis::AsyncCommands;
use seckill_lock::Locks;
use serde::Serialize;

use crate::redis_benchmark;
use crate::redis_cost::{Cost, Meter};
use crate::stats::{Latency, progress};
use crate::target::RedisArgs;

#[derive(ClapArgs)]
pub struct Args {
    #[command(flatten)]
    redis: RedisArgs,
    /// What the clients take: the lock (`mutex`), a `semaphore` of
    /// `--permits`, a read-write lock (`rwlock`, one client in eight
    /// writes), or a rate limiter (`ratelimit`, `--rate` and `--burst`).
    #[arg(long, value_enum, default_value_t = Primitive::Mutex)]
    primitive: Primitive,
    /// `--primitive semaphore`: its permits.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    permits: u64,
    /// `--primitive ratelimit`: cells a second per limiter.
    #[arg(long, default_value_t = 1000.0)]
    rate: f64,
    /// `--primitive ratelimit`: the burst.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    burst: u64,
    /// `hot`: every client contends for one lock; `spread`: one lock per client.
    #[arg(long, value_enum, default_value_t = Mode::Hot)]
    mode: Mode,
    /// Concurrent clients.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=4096))]
    clients: u32,
    /// `own`: each client has its own connections, as a process of its
    /// own would; `shared`: the clients are tasks of one process sharing
    /// one `Locks` (its calls pipelined, rate decisions batched).
    #[arg(long, value_enum, default_value_t = Connections::Own)]
    connections: Connections,
    /// Seconds to run.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// What each holder does: `counter` = unprotected GET then SET of a
    /// counter (checked for exactness); `empty` = nothing, so the run
    /// measures bare take+release pairs (checked through the fences).
    #[arg(long, value_enum, default_value_t = Work::Counter)]
    work: Work,
    /// Lease of each acquisition, in milliseconds.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(10..))]
    lease_ms: u64,
    /// Also run `redis-benchmark` (SET NX PX, 50 clients) on the same server.
    #[arg(long)]
    compare: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum Primitive {
    Mutex,
    Semaphore,
    Rwlock,
    Ratelimit,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Hot,
    Spread,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum Connections {
    Own,
    Shared,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum Work {
    Counter,
    Empty,
}

#[derive(Serialize)]
struct Report {
    mode: Mode,
    work: Work,
    clients: u32,
    connections: Connections,
    duration_s: f64,
    acquisitions: u64,
    acquisitions_per_s: f64,
    wait_p50_ms: f64,
    wait_p99_ms: f64,
    wait_max_ms: f64,
    /// From the holder starting its release to the next holder having the
    /// lock (hot mode only: every acquisition there is a hand-off).
    handoff_p50_ms: Option<f64>,
    handoff_p99_ms: Option<f64>,
    handoff_max_ms: Option<f64>,
    counter_ok: bool,
    /// Redis command time per acquisition, µs: the lock's function calls
    /// and the counter's GET and SET (`INFO commandstats`).
    redis_us_per_acquisition: Option<f64>,
    /// On a cluster: the same, split by master.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    redis_us_per_acquisition_by_master: Vec<(String, f64)>,
    redis_benchmark_set_nx_px_per_s: Option<f64>,
    /// acquisitions/s ÷ (SET NX PX/s ÷ 2): an acquisition is a take and a release.
    ratio_to_redis_benchmark_pairs: Option<f64>,
    /// One client's GET round trips per second (`redis-benchmark -c 1`): the
    /// latency floor a hot lock's serial hand-off chain is built from.
    redis_benchmark_round_trips_per_s: Option<f64>,
    /// Hot mode: acquisitions/s ÷ the most the serial chain allows, which is
    /// one round trip per acquisition (release reaching the next holder) plus
    /// one per command of the critical section.
    ratio_to_serial_floor: Option<f64>,
}

struct ClientResult {
    acquisitions: u64,
    /// Every fence this client was granted, in order.
    fences: Vec<u64>,
    wait: Latency,
    handoff: Latency,
}

pub async fn run(args: Args) -> Result<ExitCode> {
    anyhow::ensure!(
        args.duration > 0.0 && args.duration <= 3600.0,
        "--duration must be between 0 and 3600 seconds"
    );
    let target = args.redis.target()?;
    let duration = Duration::from_secs_f64(args.duration);
    if args.primitive != Primitive::Mutex {
        return sibling(&args, &target.redis, duration).await;
    }
    let clients = connect_clients(&args, &target.redis).await?;

    let bar = progress(duration.as_millis() as u64, "ms");
    let mut meter = Meter::start(&target.redis).await?;
    let started = Instant::now();
    let shared = Shared {
        started,
        stop: started + duration,
        released_at: Arc::new(AtomicU64::new(0)),
        hot: args.mode == Mode::Hot,
        work: args.work,
    };
    let mut tasks = Vec::new();
    for client in clients.iter().cloned() {
        tasks.push(tokio::spawn(take_in_a_loop(client, shared.clone())));
    }
    let ticker = {
        let (bar, stop) = (bar.clone(), shared.stop);
        tokio::spawn(async move {
            while Instant::now() < stop {
                bar.set_position(started.elapsed().as_millis() as u64);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let mut check = target.redis.connect().await?;
    let mut totals = Totals {
        fences_rose: true,
        ..Totals::default()
    };
    for task in tasks {
        totals.add(task.await??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cost = meter.read(&["get", "set"]).await?;
    ticker.abort();
    bar.finish_and_clear();
    let counter_ok = verify(&mut check, args.mode, args.work, &totals).await?;
    let keys: Vec<String> = totals.counts.iter().map(|c| c.0.clone()).collect();
    for key in keys {
        let _: () = check.del(key).await?;
    }
    let baselines = if args.compare {
        redis_benchmark_baselines(&target.redis).await?
    } else {
        (None, None)
    };
    let report = report(&args, elapsed, &totals, counter_ok, &cost, baselines);
    print::print(&report, args.json)?;
    Ok(if counter_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `--primitive` other than `mutex`: its run, printed.
async fn sibling(
    args: &Args,
    redis: &seckill_redis::Target,
    duration: Duration,
) -> Result<ExitCode> {
    anyhow::ensure!(
        args.rate.is_finite() && args.rate > 0.0 && args.rate <= 1e6,
        "--rate must be above 0 and at most 1,000,000"
    );
    let settings = siblings::Settings {
        primitive: args.primitive,
        mode: args.mode,
        clients: args.clients,
        connections: args.connections,
        duration,
        lease: Duration::from_millis(args.lease_ms),
        permits: args.permits,
        rate: args.rate,
        burst: args.burst,
    };
    let report = siblings::run(&settings, redis).await?;
    siblings::print(&report, args.json)?;
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// One bench client: its lock, its own connection, and its counter's key.
type Client = (seckill_lock::Lock, seckill_redis::Conn, String);

/// Each client with its own connections or all sharing the first's, on
/// one lock (`hot`) or its own (`spread`), named fresh for this run.
async fn connect_clients(args: &Args, redis: &seckill_redis::Target) -> Result<Vec<Client>> {
    let run_id = format!("{:08x}", rand::random::<u32>());
    let lease = Duration::from_millis(args.lease_ms);
    let mut clients = Vec::new();
    let mut first: Option<(Locks, seckill_redis::Conn)> = None;
    for i in 0..args.clients {
        let (locks, conn) = match &first {
            Some(shared) if args.connections == Connections::Shared => shared.clone(),
            _ => {
                let locks = Locks::new(redis)
                    .await
                    .with_context(|| format!("connecting to {}", redis))?;
                (locks, redis.connect().await?)
            }
        };
        first.get_or_insert_with(|| (locks.clone(), conn.clone()));
        let name = match args.mode {
            Mode::Hot => format!("bench-{run_id}"),
            Mode::Spread => format!("bench-{run_id}-{i}"),
        };
        // In the lock's hash slot: on a cluster, on the lock's master.
        clients.push((
            locks.lock(&name)?.lease(lease),
            conn,
            format!("bench:{{{name}}}:counter"),
        ));
    }
    Ok(clients)
}

/// What every client's loop shares: the clock, and where hand-offs are
/// measured from.
#[derive(Clone)]
struct Shared {
    started: Instant,
    stop: Instant,
    /// Nanoseconds after `started` at which the last holder began releasing.
    released_at: Arc<AtomicU64>,
    hot: bool,
    work: Work,
}

/// One client until the time is up: take, do the work, release.
async fn take_in_a_loop(client: Client, shared: Shared) -> Result<(ClientResult, String)> {
    let (lock, mut conn, counter) = client;
    let Shared {
        started,
        stop,
        released_at,
        hot,
        work,
    } = shared;
    let mut result = ClientResult {
        acquisitions: 0,
        fences: Vec::new(),
        wait: Latency::default(),
        handoff: Latency::default(),
    };
    while Instant::now() < stop {
        let asked = Instant::now();
        let guard = lock.acquire(Duration::from_secs(30)).await?;
        let got = Instant::now();
        result.wait.record(got - asked);
        let previous = released_at.load(Ordering::Acquire);
        if hot && previous > 0 {
            let since = (got - started).saturating_sub(Duration::from_nanos(previous));
            result.handoff.record(since);
        }
        result.fences.push(guard.fence());
        if work == Work::Counter {
            let value: Option<i64> = conn.get(&counter).await?;
            let () = conn.set(&counter, value.unwrap_or(0) + 1).await?;
        }
        released_at.store(
            (Instant::now() - started).as_nanos() as u64,
            Ordering::Release,
        );
        guard.release().await?;
        result.acquisitions += 1;
    }
    Ok((result, counter))
}

/// The clients' results together.
#[derive(Default)]
struct Totals {
    total: u64,
    wait: Latency,
    handoff: Latency,
    /// Per client: its counter's key and its acquisitions.
    counts: Vec<(String, u64)>,
    /// Whether each client's fences rose with every grant.
    fences_rose: bool,
    /// Every fence granted.
    fences: Vec<u64>,
}

impl Totals {
    fn add(&mut self, (result, counter): (ClientResult, String)) {
        self.total += result.acquisitions;
        self.wait.merge(&result.wait);
        self.handoff.merge(&result.handoff);
        self.fences_rose &= result.fences.windows(2).all(|w| w[0] < w[1]);
        self.fences.extend(&result.fences);
        self.counts.push((counter, result.acquisitions));
    }
}

/// Whether the run came out exact: the counters, or with `--work empty`
/// the fences.
async fn verify(
    check: &mut seckill_redis::Conn,
    mode: Mode,
    work: Work,
    totals: &Totals,
) -> Result<bool> {
    let (total, counts) = (totals.total, &totals.counts);
    let mut counter_ok = true;
    match (mode, work) {
        (Mode::Hot, Work::Counter) => {
            let value: Option<u64> = check.get(&counts[0].0).await?;
            counter_ok = value.unwrap_or(0) == total;
        }
        (Mode::Spread, Work::Counter) => {
            for (counter, expected) in counts {
                let value: Option<u64> = check.get(counter).await?;
                counter_ok &= value.unwrap_or(0) == *expected;
            }
        }
        // Every grant a fence of its own (on one lock, no two alike),
        // each client's rising.
        (Mode::Hot, Work::Empty) => {
            let mut fences = totals.fences.clone();
            fences.sort_unstable();
            fences.dedup();
            counter_ok = totals.fences_rose && fences.len() as u64 == total;
        }
        (Mode::Spread, Work::Empty) => {
            counter_ok = totals.fences_rose && totals.fences.len() as u64 == total;
        }
    }
    Ok(counter_ok)
}

/// `--compare`: redis-benchmark's SET NX PX/s (50 clients) and one client's
/// GET round trips/s, on the same master.
async fn redis_benchmark_baselines(
    redis: &seckill_redis::Target,
) -> Result<(Option<f64>, Option<f64>)> {
    // One hash tag: on a cluster, every key on one master, which
    // redis-benchmark is pointed at.
    let key = "rb:lock:{bench}:__rand_int__";
    let master = redis.master_of(key).await?;
    let set = ["SET", key, "token", "NX", "PX", "10000"];
    let pairs = redis_benchmark::rps(&master, 50, 1, 200_000, &set)?;
    let get = ["GET", key];
    let trips = redis_benchmark::rps(&master, 1, 1, 20_000, &get)?;
    Ok((Some(pairs), Some(trips)))
}

/// The run's numbers, and how they compare with the baselines.
fn report(
    args: &Args,
    elapsed: f64,
    totals: &Totals,
    counter_ok: bool,
    cost: &Cost,
    (baseline, round_trips): (Option<f64>, Option<f64>),
) -> Report {
    let (total, wait, handoff) = (totals.total, &totals.wait, &totals.handoff);
    let per_acquisition = |us: f64| (total > 0).then(|| us / total as f64);
    let acquisitions_per_s = total as f64 / elapsed;
    let trips_per_acquisition = match args.work {
        Work::Counter => 3.0,
        Work::Empty => 1.0,
    };
    Report {
        mode: args.mode,
        work: args.work,
        clients: args.clients,
        connections: args.connections,
        duration_s: elapsed,
        acquisitions: total,
        acquisitions_per_s,
        wait_p50_ms: wait.ms(0.5),
        wait_p99_ms: wait.ms(0.99),
        wait_max_ms: wait.max_ms(),
        handoff_p50_ms: (handoff.count() > 0).then(|| handoff.ms(0.5)),
        handoff_p99_ms: (handoff.count() > 0).then(|| handoff.ms(0.99)),
        handoff_max_ms: (handoff.count() > 0).then(|| handoff.max_ms()),
        counter_ok,
        redis_us_per_acquisition: per_acquisition(cost.command_us),
        redis_us_per_acquisition_by_master: if cost.by_master.len() > 1 {
            cost.by_master
                .iter()
                .filter_map(|(m, us)| Some((m.clone(), per_acquisition(*us)?)))
                .collect()
        } else {
            Vec::new()
        },
        redis_benchmark_set_nx_px_per_s: baseline,
        ratio_to_redis_benchmark_pairs: baseline.map(|rps| acquisitions_per_s / (rps / 2.0)),
        redis_benchmark_round_trips_per_s: round_trips,
        ratio_to_serial_floor: round_trips
            .filter(|_| args.mode == Mode::Hot)
            .map(|rtt| acquisitions_per_s / (rtt / trips_per_acquisition)),
    }
}
