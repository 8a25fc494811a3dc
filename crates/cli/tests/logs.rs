//! What `seckill serve` writes to its log, read as an operator reads it:
//! an outage of Redis is a few lines, not a stream; colour only on a
//! terminal; JSON lines on request; no secret in any line.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use seckill_testkit::{Options, RedisServer};

mod common;

const ADMIN_TOKEN: &str = "admin-token-5e1f0c2b9a7d";
const REDIS_PASSWORD: &str = "redis-pw-3c4d5e6f7a8b";

/// `seckill serve` with its log going to the file `log`; answers it once
/// it listens.
fn serve_logging_to(
    redis: &str,
    dir: &std::path::Path,
    log: &std::path::Path,
    extra: &[&str],
) -> common::Serve {
    let password = dir.join("redis-password");
    std::fs::write(&password, REDIS_PASSWORD).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_seckill"))
        .args(["serve", "--listen", "127.0.0.1:0", "--redis-url", redis])
        .arg("--redis-password-file")
        .arg(&password)
        .arg("--database-url")
        .arg(dir.join("o.db"))
        .env("SECKILL_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("SECKILL_BUYER_AUTH", "body")
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let line = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .next()
        .unwrap()
        .unwrap();
    assert!(line.starts_with("listening on "), "{line}");
    common::Serve(child)
}

/// Redis away for 10 s under a running service: each background task says
/// so once (the next line would be 30 s later), and once more when it
/// works again; nothing is coloured in a file; no secret is printed.
#[test]
fn a_redis_outage_is_a_few_plain_lines() {
    let mut redis = Options::default()
        .arg("requirepass", REDIS_PASSWORD)
        .start()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let serve = serve_logging_to(&redis.url(), dir.path(), &log, &[]);
    std::thread::sleep(Duration::from_secs(1));
    redis.kill();
    std::thread::sleep(Duration::from_secs(10));
    redis.restart().unwrap();
    // Every task runs again within a few seconds (the slowest looks every 2 s).
    std::thread::sleep(Duration::from_secs(6));
    drop(serve);
    let text = std::fs::read_to_string(&log).unwrap();
    eprintln!("the log:\n{text}");
    assert!(!text.contains('\u{1b}'), "colour codes in a file:\n{text}");
    for secret in [ADMIN_TOKEN, REDIS_PASSWORD] {
        assert!(!text.contains(secret), "a secret in the log:\n{text}");
    }
    let failing: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("failed; retrying"))
        .collect();
    assert!(!failing.is_empty(), "the outage went unsaid:\n{text}");
    // One line per task that failed, not one per attempt.
    let mut tasks: Vec<&str> = failing
        .iter()
        .map(|l| {
            l.split("task=\"")
                .nth(1)
                .and_then(|t| t.split('"').next())
                .unwrap_or(l)
        })
        .collect();
    let lines = tasks.len();
    tasks.sort_unstable();
    tasks.dedup();
    assert_eq!(lines, tasks.len(), "a task said it twice:\n{text}");
    let recovered = text.lines().filter(|l| l.contains("works again")).count();
    assert!(recovered >= 1, "no task said it recovered:\n{text}");
    assert!(
        text.lines().count() <= 3 * tasks.len() + 5,
        "{} lines for a 10 s outage:\n{text}",
        text.lines().count()
    );
}

/// `--log-format json`: every line one JSON object with the time, the
/// level, where it comes from and its fields; a service started with
/// Redis away says so at once.
#[test]
fn json_logs_are_one_object_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let serve = serve_logging_to(
        "redis://127.0.0.1:1/",
        dir.path(),
        &log,
        &["--log-format", "json"],
    );
    std::thread::sleep(Duration::from_secs(1));
    drop(serve);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for line in &lines {
        for key in ["timestamp", "level", "target", "fields"] {
            assert!(line.get(key).is_some(), "no {key}: {line}");
        }
    }
    let said = lines.iter().any(|l| {
        l["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Redis does not answer"))
    });
    assert!(said, "no word of Redis being away:\n{text}");
    assert!(!text.contains(ADMIN_TOKEN) && !text.contains(REDIS_PASSWORD));
}

/// A database that cannot be opened stops `serve` with one plain line
/// naming it, its password left out, each cause said once.
#[test]
fn an_unreachable_database_is_named_once_without_its_password() {
    let server = RedisServer::start().unwrap();
    let out = common::run(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--buyer-auth",
        "body",
        "--admin-token",
        ADMIN_TOKEN,
        "--redis-url",
        &server.url(),
        "--database-url",
        "postgres://nobody:db-secret-77@127.0.0.1:1/none",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("postgres://nobody:***@127.0.0.1:1/none"),
        "{stderr}"
    );
    assert!(!stderr.contains("db-secret-77"), "{stderr}");
    let error = stderr.lines().find(|l| l.starts_with("error: ")).unwrap();
    let words: Vec<&str> = error.split(": ").collect();
    let mut unique = words.clone();
    unique.dedup();
    assert_eq!(words, unique, "a cause said twice: {error}");
}

/// `SECKILL_DATABASE_URL_FILE` names a file holding the database URL, so
/// its password is on no command line: `serve` reads it from there (here
/// an unreachable one, so it says which it tried), and prints it redacted.
#[test]
fn the_database_url_comes_from_a_file() {
    let server = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("database-url");
    std::fs::write(&file, "postgres://app:db-secret-88@127.0.0.1:1/shop\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_seckill"))
        .args(["serve", "--listen", "127.0.0.1:0", "--buyer-auth", "body"])
        .args(["--admin-token", ADMIN_TOKEN, "--redis-url", &server.url()])
        .env("SECKILL_DATABASE_URL_FILE", &file)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("postgres://app:***@127.0.0.1:1/shop"),
        "{stderr}"
    );
    assert!(!stderr.contains("db-secret-88"), "{stderr}");
}
