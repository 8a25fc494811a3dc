//! What a run cost Redis, measured on the server: the one Redis core is a
//! flash sale's ceiling, and requests per second on this noisy machine move
//! far more than the work each request gives Redis.
//!
//! Two figures, both per purchase (or request):
//! - **command time**: `usec` from `INFO commandstats` of the script calls
//!   (`EVAL`, `EVALSHA`, `FCALL` and their `_RO` forms) plus the plain
//!   commands the caller sends outside scripts. The commands a script runs
//!   are counted again under their own names, so only the named plain ones
//!   are added. Stats are reset at the start (`CONFIG RESETSTAT`); on a
//!   server that others use too, their commands are in the figure.
//! - **process CPU**: user + system time of the `redis-server` process from
//!   `/proc/PID/stat` (network I/O included), where the server is local.
//!
//! The same module reads this process's own threads' CPU, for the share of
//! a run an in-process component (the order persister) spent.

use std::collections::HashMap;

use anyhow::{Context, Result};
use redis::aio::MultiplexedConnection;

/// The script-calling commands, as `INFO commandstats` names them.
const SCRIPT_CALLS: [&str; 6] = [
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
];

/// A measurement under way on every master; [`Meter::read`] ends it.
pub struct Meter {
    masters: Vec<MasterMeter>,
}

struct MasterMeter {
    addr: String,
    conn: MultiplexedConnection,
    pid: Option<u32>,
    cpu_start: Option<f64>,
}

/// Microseconds of Redis work in a measured run.
#[derive(Clone, Debug)]
pub struct Cost {
    pub command_us: f64,
    /// The process CPU of every master, where all of them are local.
    pub cpu_us: Option<f64>,
    /// Command time per master (`host:port`), in the order of the masters.
    pub by_master: Vec<(String, f64)>,
}

impl Cost {
    /// Per unit of work (`n` purchases or requests); `None` for `n == 0`.
    pub fn per(&self, n: u64) -> Option<(f64, Option<f64>)> {
        (n > 0).then(|| {
            (
                self.command_us / n as f64,
                self.cpu_us.map(|c| c / n as f64),
            )
        })
    }
}

impl Meter {
    /// Resets the command statistics of every master of `redis` (one
    /// server, or each master of a cluster) and notes their CPU time.
    pub async fn start(redis: &seckill_redis::Target) -> Result<Self> {
        let masters = redis
            .masters()
            .await
            .with_context(|| format!("listing the masters of {redis}"))?;
        let mut meters = Vec::new();
        for master in masters {
            let addr = master.addr();
            let mut conn = master
                .client()?
                .get_multiplexed_async_connection()
                .await
                .with_context(|| format!("connecting to {addr}"))?;
            let () = redis::cmd("CONFIG")
                .arg("RESETSTAT")
                .query_async(&mut conn)
                .await
                .context("CONFIG RESETSTAT")?;
            let pid = local_pid(&master, &mut conn).await;
            let cpu_start = pid.and_then(process_cpu_us);
            meters.push(MasterMeter {
                addr,
                conn,
                pid,
                cpu_start,
            });
        }
        Ok(Self { masters: meters })
    }

    /// The cost since [`Meter::start`]: script calls plus the commands in
    /// `plain` (lowercase names, as sent outside scripts).
    pub async fn read(&mut self, plain: &[&str]) -> Result<Cost> {
        let commands: Vec<&str> = SCRIPT_CALLS.iter().chain(plain).copied().collect();
        self.read_only(&commands).await
    }

    /// The cost since [`Meter::start`] of exactly `commands`; the servers'
    /// CPU is all of it, whoever sent what.
    pub async fn read_only(&mut self, commands: &[&str]) -> Result<Cost> {
        let mut cost = Cost {
            command_us: 0.0,
            cpu_us: Some(0.0),
            by_master: Vec::new(),
        };
        for master in &mut self.masters {
            let cpu_end = master.pid.and_then(process_cpu_us);
            let info: String = redis::cmd("INFO")
                .arg("commandstats")
                .query_async(&mut master.conn)
                .await
                .with_context(|| format!("INFO commandstats of {}", master.addr))?;
            let usec = command_usec(&info);
            let command_us: f64 = commands.iter().filter_map(|c| usec.get(*c)).sum();
            cost.command_us += command_us;
            cost.cpu_us = match (cost.cpu_us, master.cpu_start, cpu_end) {
                (Some(sum), Some(a), Some(b)) => Some(sum + b - a),
                _ => None,
            };
            cost.by_master.push((master.addr.clone(), command_us));
        }
        Ok(cost)
    }
}

/// User + system CPU so far, in µs, of this process's threads whose name
/// starts with one of `prefixes` (Linux truncates names to 15 bytes).
pub fn threads_cpu_us(prefixes: &[&str]) -> Option<f64> {
    let mut total = 0.0;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let path = task.path();
        let Ok(name) = std::fs::read_to_string(path.join("comm")) else {
            continue;
        };
        if prefixes.iter().any(|p| name.trim_end().starts_with(p)) {
            // A thread that ended meanwhile simply counts no more.
            total += stat_cpu_us(&path.join("stat")).unwrap_or(0.0);
        }
    }
    Some(total)
}

/// `usec` per command from `INFO commandstats`
/// (`cmdstat_NAME:calls=…,usec=…,…`); subcommands (`config|resetstat`) as named.
fn command_usec(info: &str) -> HashMap<String, f64> {
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let usec = stats
                .split(',')
                .find_map(|kv| kv.strip_prefix("usec="))?
                .parse()
                .ok()?;
            Some((name.to_owned(), usec))
        })
        .collect()
}

/// The server's pid, if it runs on this machine (a loopback address).
async fn local_pid(
    master: &seckill_redis::Master,
    conn: &mut MultiplexedConnection,
) -> Option<u32> {
    let local = match master.host_port() {
        Some((host, _)) => {
            host == "localhost"
                || host
                    .trim_matches(['[', ']'])
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        None => true,
    };
    if !local {
        return None;
    }
    let server: String = redis::cmd("INFO")
        .arg("server")
        .query_async(conn)
        .await
        .ok()?;
    server
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))?
        .trim()
        .parse()
        .ok()
}

/// User + system CPU of process `pid` so far, in µs.
fn process_cpu_us(pid: u32) -> Option<f64> {
    stat_cpu_us(std::path::Path::new(&format!("/proc/{pid}/stat")))
}

/// User + system CPU in a `/proc/…/stat` file, in µs.
fn stat_cpu_us(path: &std::path::Path) -> Option<f64> {
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| ticks * 1e6 / hz as f64)
}

#[cfg(test)]
mod tests {
    use super::command_usec;

    #[test]
    fn reads_usec_per_command() {
        let info = "# Commandstats\r\ncmdstat_evalsha:calls=10,usec=250,usec_per_call=25.00,rejected_calls=0,failed_calls=0\r\ncmdstat_config|resetstat:calls=1,usec=9,usec_per_call=9.00\r\n";
        let usec = command_usec(info);
        assert_eq!(usec["evalsha"], 250.0);
        assert_eq!(usec["config|resetstat"], 9.0);
    }
}
