//! `redis-cli` for the rigs: a command to one node, and the waits built
//! on it. Going through `redis-cli` keeps this crate free of a Redis client.

use std::io;
use std::process::Command;
use std::time::{Duration, Instant};

/// Runs `redis-cli -p PORT ARGS…` with a short timeout; its answer, or an
/// error for an error reply or an unreachable node.
pub(crate) fn cli(port: u16, args: &[&str]) -> io::Result<String> {
    cli_as(port, None, args)
}

/// [`cli`] with a password (given in the environment, not on the command
/// line, where `ps` would show it).
pub(crate) fn cli_as(port: u16, password: Option<&str>, args: &[&str]) -> io::Result<String> {
    let mut cmd = Command::new("timeout");
    cmd.args(["2", "redis-cli", "-p", &port.to_string()])
        .args(args);
    if let Some(password) = password {
        cmd.env("REDISCLI_AUTH", password);
    }
    let output = cmd.output()?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let failed = !output.status.success()
        || text.starts_with("ERR")
        || text.starts_with("Could not connect")
        || text.starts_with("(error)");
    if failed {
        return Err(io::Error::other(format!(
            "redis-cli -p {port} {}: {text}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(text)
}

/// Whether node `port` is a replica whose link to its master is up.
pub(crate) fn synced_replica(port: u16) -> bool {
    cli(port, &["info", "replication"])
        .is_ok_and(|i| i.contains("role:slave") && i.contains("master_link_status:up"))
}

pub(crate) fn settle_or_fail(deadline: Instant, what: &str) -> io::Result<()> {
    if Instant::now() > deadline {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("Redis did not settle: waiting for {what}"),
        ));
    }
    std::thread::sleep(Duration::from_millis(50));
    Ok(())
}

/// The full name of the function loaded on node `port` whose name starts
/// with `prefix` (a library's functions carry its version: `rate_1a2b…`),
/// for tests that call one directly.
///
/// ```no_run
/// let server = seckill_testkit::RedisServer::start().unwrap();
/// let name = seckill_testkit::function_named(server.port(), "rate_").unwrap();
/// ```
pub fn function_named(port: u16, prefix: &str) -> io::Result<Option<String>> {
    Ok(cli(port, &["function", "list"])?
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(prefix))
        .map(str::to_owned))
}

/// Calls counted in an `INFO commandstats` answer, of `command` alone
/// (lower case, as Redis names it: `"fcall"`) or of every command.
///
/// ```
/// let info = "cmdstat_fcall:calls=7,usec=70\r\ncmdstat_get:calls=3,usec=3\r\n";
/// assert_eq!(seckill_testkit::commandstats_calls(info, Some("fcall")), 7);
/// assert_eq!(seckill_testkit::commandstats_calls(info, None), 10);
/// ```
pub fn commandstats_calls(info: &str, command: Option<&str>) -> u64 {
    info.lines()
        .filter_map(|l| {
            let (name, stats) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            if command.is_some_and(|c| c != name) {
                return None;
            }
            stats
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}
