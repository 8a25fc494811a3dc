//! Same-run baselines from `redis-benchmark` against the server under test:
//! these machines are noisy, so only ratios within one run mean anything.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context, Result, bail};

/// Requests per second `redis-benchmark` reaches for `command` against
/// `master` with `clients` connections and `pipeline` commands in flight
/// per connection.
pub fn rps(
    master: &seckill_redis::Master,
    clients: u32,
    pipeline: u32,
    requests: u64,
    command: &[&str],
) -> Result<f64> {
    let (host, port) = master
        .host_port()
        .context("redis-benchmark needs a TCP address")?;
    // Two redis-benchmark runs a few seconds apart can draw the same random
    // numbers (seen here in one `--compare` in five: the second run of the
    // purchase script repeated every request id of the first, so it made
    // no orders and was answered on the cheap repeated-id path). Each
    // run's random values carry a tag of their own, of the same width
    // every time.
    static RUNS: AtomicU32 = AtomicU32::new(0);
    let tag = format!("{:02x}", RUNS.fetch_add(1, Ordering::Relaxed) % 256);
    let command: Vec<String> = command
        .iter()
        .map(|arg| arg.replace("__rand_int__", &format!("{tag}__rand_int__")))
        .collect();
    let output = Command::new("redis-benchmark")
        .args(["-h", &host, "-p", &port.to_string()])
        .args(["-c", &clients.to_string(), "-P", &pipeline.to_string()])
        // A range of 10^9 random ids: a run of 200,000 repeats about 20 of
        // them by chance (about 20,000 with 10^6).
        .args([
            "-n",
            &requests.to_string(),
            "-r",
            "1000000000",
            "--csv",
            "-e",
        ])
        .args(command)
        .output()
        .context("running redis-benchmark (apt-get install -y redis-tools)")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    // An error reply means the baseline measured a failing command, not
    // the work: never report a rate for it.
    if let Some(error) = stdout.lines().find(|l| l.starts_with("Error from server")) {
        bail!("redis-benchmark got an error reply: {error}");
    }
    if !output.status.success() {
        bail!(
            "redis-benchmark failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // CSV: a header line, then `"name","rps",...` for the one test we ran.
    stdout
        .lines()
        .filter(|l| !l.starts_with("\"test\""))
        .find_map(|l| l.split(',').nth(1)?.trim_matches('"').parse().ok())
        .with_context(|| format!("unexpected redis-benchmark output: {stdout}"))
}
