//! The rate limiter on real servers, tested against the failures rate
//! limiters are known for: too many admitted at the start or across a
//! window's edge (64 clients in 4 processes starting together, every
//! window checked), a wait that is not what it says, keys left behind by
//! limiters no longer used; the bound on a cluster too (`on_both!`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use seckill_lock::{Error, Rate};
use seckill_testkit::RedisServer;

mod common;

use common::Rig;

/// The rate of the bound test: 400 a second, 40 at once.
const RATE: f64 = 400.0;
const BURST: u64 = 40;

/// Run by `sixty_four_clients_starting_together_never_pass_the_bound` as a
/// child process: 16 clients take one cell at a time from the moment the
/// parent named until the run ends, and print the server time of each
/// admission.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper process for another test"]
async fn rate_child() {
    let Ok(url) = std::env::var("SECKILL_TEST_CHILD_URL") else {
        return;
    };
    let start: u64 = std::env::var("SECKILL_TEST_START_MS")
        .unwrap()
        .parse()
        .unwrap();
    let run = Duration::from_millis(
        std::env::var("SECKILL_TEST_RUN_MS")
            .unwrap()
            .parse()
            .unwrap(),
    );
    let locks = common::connect(&url).await;
    let limiter = locks
        .rate_limiter("bound", Rate::per_second(RATE).burst(BURST))
        .unwrap();
    let start = UNIX_EPOCH + Duration::from_millis(start);
    tokio::time::sleep(start.duration_since(SystemTime::now()).unwrap_or_default()).await;
    let end = Instant::now() + run;
    let clients = (0..16).map(|_| {
        let limiter = limiter.clone();
        tokio::spawn(async move {
            let mut admitted = Vec::new();
            while Instant::now() < end {
                let d = limiter.take(1).await.unwrap();
                if d.admitted {
                    admitted.push(d.decided_at.duration_since(UNIX_EPOCH).unwrap().as_micros());
                }
            }
            admitted
        })
    });
    for client in clients.collect::<Vec<_>>() {
        for at in client.await.unwrap() {
            println!("ADMITTED {at}");
        }
    }
}

/// The largest excess over `burst + rate × t` of any window of admissions
/// (times in µs, sorted): for every pair i ≤ j, the j - i + 1 admissions
/// in [t_i, t_j] against `burst + rate × (t_j - t_i)`.
fn worst_excess(times: &[u128], rate: f64, burst: u64) -> f64 {
    let mut worst = f64::NEG_INFINITY;
    // max over i ≤ j of (j - i + 1) - rate (t_j - t_i) = (j + 1 - rate t_j) - min_i (i - rate t_i)
    let mut least = f64::INFINITY;
    // Times from the first: absolute µs since 1970 times a rate would
    // lose the fractions this compares.
    let first = times.first().copied().unwrap_or(0);
    for (j, &t) in times.iter().enumerate() {
        let t = (t - first) as f64 / 1e6;
        least = least.min(j as f64 - rate * t);
        worst = worst.max((j as f64 + 1.0 - rate * t) - least - burst as f64);
    }
    worst
}

async fn sixty_four_clients_starting_together_never_pass_the_bound(rig: Rig) {
    let spec = rig.spec();
    let start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 1_500;
    // Ten windows of the burst's length (100 ms) and then some.
    let run_ms = 1_500;
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .args(["rate_child", "--exact", "--ignored", "--nocapture"])
                .env("SECKILL_TEST_CHILD_URL", &spec)
                .env("SECKILL_TEST_START_MS", start.to_string())
                .env("SECKILL_TEST_RUN_MS", run_ms.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs = tokio::task::spawn_blocking(move || {
        let outputs: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        outputs
    });
    let mut times = Vec::new();
    for out in outputs.await.unwrap() {
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        times.extend(
            text.lines()
                .filter_map(|l| l.strip_prefix("ADMITTED "))
                .map(|t| t.parse::<u128>().unwrap()),
        );
    }
    times.sort_unstable();
    let span = (times[times.len() - 1] - times[0]) as f64 / 1e6;
    let excess = worst_excess(&times, RATE, BURST);
    eprintln!(
        "{} admitted over {span:.3} s (bound {:.0}); worst window {excess:+.6} cells over the bound",
        times.len(),
        BURST as f64 + RATE * span
    );
    assert!(
        excess <= 1e-6,
        "a window admitted {excess} more than burst + rate × t"
    );
    // And the limiter admits what it may: the burst at once, then the rate.
    assert!(
        times.len() as f64 >= BURST as f64 + RATE * span * 0.9,
        "only {} admitted over {span} s",
        times.len()
    );
    // From the start, the burst and no more.
    let first_ms: Vec<_> = times
        .iter()
        .take_while(|&&t| t < times[0] + 1_000)
        .collect();
    assert!(
        first_ms.len() as u64 <= BURST + 1,
        "{} in the first ms",
        first_ms.len()
    );
}

on_both!(sixty_four_clients_starting_together_never_pass_the_bound);

#[tokio::test]
async fn a_refusal_says_how_long_to_wait_and_wait_waits_that_long() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    let limiter = locks
        .rate_limiter("w", Rate::per_second(20.0).burst(5))
        .unwrap();
    for left in (0..5).rev() {
        let d = limiter.take(1).await.unwrap();
        assert!(d.admitted);
        assert_eq!(d.remaining, left);
    }
    let refused = limiter.take(1).await.unwrap();
    assert!(!refused.admitted);
    assert_eq!(refused.remaining, 0);
    // One cell comes back every 50 ms.
    assert!(
        refused.retry_after <= Duration::from_millis(50),
        "{refused:?}"
    );
    assert!(
        refused.retry_after >= Duration::from_millis(40),
        "{refused:?}"
    );
    assert!(
        refused.reset_after >= Duration::from_millis(200),
        "{refused:?}"
    );
    let started = Instant::now();
    let d = limiter.wait(2, Duration::from_secs(1)).await.unwrap();
    assert!(d.admitted);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(90) && waited < Duration::from_millis(250),
        "{waited:?}"
    );
    // A wait the limiter says would end past the timeout fails at once.
    let started = Instant::now();
    let e = limiter
        .wait(5, Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    assert!(started.elapsed() < Duration::from_millis(40));
    // Asking for more than the burst can never be admitted: said at once.
    let e = limiter.take(6).await.unwrap_err().to_string();
    assert!(e.contains("must be 1 to the burst, 5"), "{e}");
    for bad in [0.0, -1.0, f64::NAN, 2e6] {
        let e = locks.rate_limiter("w", Rate::per_second(bad)).unwrap_err();
        assert!(e.to_string().contains("invalid rate"), "{e}");
    }
    let e = locks
        .rate_limiter("w", Rate::per_second(1.0).burst(0))
        .unwrap_err();
    assert!(e.to_string().contains("burst"), "{e}");
}

/// 100,000 decisions over 1,000 names, then the limiters left idle: no
/// key is left once each is full again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_limiters_leave_no_keys() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    let admitted = common::on_1000_names(
        &locks,
        "user-",
        100_000 / 64 + 1,
        |locks, name, _| async move {
            let limiter = locks
                .rate_limiter(&name, Rate::per_second(50.0).burst(10))
                .unwrap();
            u64::from(limiter.take(1).await.unwrap().admitted)
        },
    )
    .await;
    let keys = common::live_keys(&server.url()).await.len();
    assert!(keys > 0 && admitted > 0);
    // A limiter is full again `burst / rate` (200 ms) after its last cell.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        common::live_keys(&server.url()).await.len(),
        0,
        "keys left by idle limiters"
    );
}

/// Decisions asked at once of one `Locks`, on limiters of different rates
/// and names: each limiter still admits exactly its burst, and on one
/// server, where they ride shared calls, far fewer calls are made than
/// decisions (on a cluster each is a call of its own).
async fn decisions_asked_at_once_count_each_limiter_exactly(rig: Rig) {
    let locks = rig.locks().await;
    // One cell back every 100 s: nothing refills during the test.
    let bursts = [1_u64, 5, 20, 64];
    let limiters: Vec<_> = bursts
        .iter()
        .map(|&b| {
            locks
                .rate_limiter(&format!("mixed-{b}"), Rate::per_second(0.01).burst(b))
                .unwrap()
        })
        .collect();
    let calls_before = rig.function_calls().await;
    let asks = (0..400).map(|i| {
        let limiter = limiters[i % limiters.len()].clone();
        tokio::spawn(async move { (i % 4, limiter.take(1).await.unwrap()) })
    });
    let mut admitted = [0_u64; 4];
    for ask in asks.collect::<Vec<_>>() {
        let (which, decision) = ask.await.unwrap();
        admitted[which] += u64::from(decision.admitted);
        assert!(decision.admitted || decision.retry_after > Duration::from_secs(50));
    }
    assert_eq!(admitted.to_vec(), bursts.to_vec());
    let calls = rig.function_calls().await - calls_before;
    eprintln!("400 decisions in {calls} calls");
    match rig {
        Rig::Server(_) => assert!(
            (1..200).contains(&calls),
            "400 decisions took {calls} calls"
        ),
        Rig::Cluster(_) => assert!(calls >= 400, "400 decisions took {calls} calls"),
    }
}

on_both!(decisions_asked_at_once_count_each_limiter_exactly);

/// Decisions on a limiter whose interval has a fraction (900,000 a second:
/// 1.111112 µs, rounded up), taken at one instant in one call of the function: exactly
/// the burst is admitted. A TAT kept as absolute µs, a double stepping by
/// 0.25 µs at today's clock, added 1.0 per cell and admitted 111 of 100.
#[tokio::test]
async fn an_interval_with_a_fraction_admits_exactly_the_burst() {
    let server = RedisServer::start().unwrap();
    let locks = common::connect(&server.url()).await;
    let limiter = locks
        .rate_limiter("fraction", Rate::per_second(900_000.0).burst(100))
        .unwrap();
    // Loads the library; this cell is long refilled before the call below.
    limiter.take(1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let mut conn = common::client(&server.url())
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let rate = seckill_testkit::function_named(server.port(), "rate_")
        .unwrap()
        .expect("the rate function is loaded");
    let mut call = redis::cmd("FCALL");
    call.arg(&rate)
        .arg(1)
        .arg("seckill-test:rate:{fraction-direct}");
    for _ in 0..200 {
        call.arg(1).arg("1.111112").arg(100).arg(1);
    }
    let answer: Vec<i64> = call.query_async(&mut conn).await.unwrap();
    let admitted: i64 = answer[..answer.len() - 1].chunks(4).map(|d| d[0]).sum();
    assert_eq!(admitted, 100);
}
