//! Helpers shared by the CLI test binaries (each uses what it needs).
#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs the `seckill` binary under test with `args`.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_seckill"))
        .args(args)
        .output()
        .expect("run seckill")
}

/// The run must have succeeded; its output is shown if not.
pub fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The JSON objects a `--json` run printed, one per line of stdout.
pub fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Every one of `calls` must fail with a message on stderr and no panic.
pub fn assert_refused(calls: &[&[&str]]) {
    for args in calls {
        let out = run(args);
        assert!(!out.status.success(), "{args:?} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.is_empty() && !stderr.contains("panicked"),
            "{args:?}: {stderr}"
        );
    }
}

/// `args` must fail with a message on stderr that says `words`.
pub fn assert_refused_saying(args: &[&str], words: &str) {
    let out = run(args);
    assert!(!out.status.success(), "{args:?} was accepted");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(words), "{args:?}: {stderr}");
}

/// Every one of `fields` of the JSON `report` must be a number above zero.
pub fn assert_positive(report: &serde_json::Value, fields: &[&str]) {
    for field in fields {
        assert!(
            report[*field].as_f64().is_some_and(|v| v > 0.0),
            "{field}: {report}"
        );
    }
}

/// `path` must be an SVG picture holding every one of `texts` (titles,
/// legend entries, axis labels) and at least `min_lines` data lines (the
/// plots draw data, and its legend marks, 2 px wide; axes and grid 1 px).
pub fn assert_svg(path: &std::path::Path, texts: &[&str], min_lines: usize) {
    let svg = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(svg.contains("<svg"), "not an SVG: {}", path.display());
    for text in texts {
        assert!(svg.contains(text), "no {text:?} in {}", path.display());
    }
    let lines = svg
        .split("<polyline")
        .skip(1)
        .filter(|p| {
            p.split('>')
                .next()
                .is_some_and(|a| a.contains("stroke-width=\"2\""))
        })
        .count();
    assert!(lines >= min_lines, "{lines} lines in {}", path.display());
}

/// A `seckill serve` child, killed when dropped, so a failing test leaves
/// no server behind.
pub struct Serve(pub std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for Serve {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Serve {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// Starts `seckill serve` on a free port with admin token `t`, Redis
/// `redis`, database `db` and `extra` flags (buyers named in the body
/// unless `extra` says otherwise, no per-address limit: every test buyer
/// calls from one address); answers it and its base URL.
pub fn start_serve(redis: &str, db: &std::path::Path, extra: &[&str]) -> (Serve, String) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_seckill"))
        .args(["serve", "--listen", "127.0.0.1:0", "--admin-token", "t"])
        .args(["--redis-url", redis, "--rate-per-ip", "0"])
        .env("SECKILL_BUYER_AUTH", "body")
        .args(extra)
        .arg("--database-url")
        .arg(db)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let line = std::io::BufReader::new(child.stdout.take().unwrap())
        .lines()
        .next()
        .unwrap()
        .unwrap();
    let base = line.strip_prefix("listening on ").expect(&line).to_owned();
    (Serve(child), base)
}
