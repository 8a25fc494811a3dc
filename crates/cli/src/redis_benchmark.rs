//! Same-run baselines from `redis-benchmark` against the server under test:
//! these machines are noisy, so only ratios within one run mean anything.

use std::process::Command;

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
    let output = Command::new("redis-benchmark")
        .args(["-h", &host, "-p", &port.to_string()])
        .args(["-c", &clients.to_string(), "-P", &pipeline.to_string()])
        // A range of 10^9 random ids: the runs of one `--compare` share a
        // sale, and with 10^6 a quarter of a run's request ids repeated an
        // earlier run's, which the script answers on its cheaper path.
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
