//! `seckill serve`, `seckill load` and `seckill demo` as a user runs them.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use seckill_testkit::RedisServer;

mod common;

use common::assert_refused;

fn seckill() -> Command {
    Command::new(env!("CARGO_BIN_EXE_seckill"))
}

/// Runs `seckill demo` with `args`: it must exit 0, and its summary must
/// show nothing oversold, a count of units resold and a clean audit.
/// Answers stdout.
fn demo(args: &[&str]) -> String {
    let out = common::run(&[&["demo"], args].concat());
    common::assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let figure = |label: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(label))
            .and_then(|l| l.split_whitespace().last())
            .unwrap_or_else(|| panic!("no {label} line:\n{stdout}"))
            .to_owned()
    };
    assert_eq!(figure("oversold"), "0", "{stdout}");
    assert_eq!(figure("audit"), "clean", "{stdout}");
    let resold = figure("resold in later waves");
    assert!(resold.parse::<u64>().is_ok(), "{stdout}");
    stdout
}

#[test]
fn demo_runs_a_whole_sale_and_exits_0_with_a_clean_audit() {
    let stdout = demo(&["--buyers", "3000", "--concurrency", "100"]);
    for line in ["audit", "clean", "oversold", "resold in later waves"] {
        assert!(stdout.contains(line), "{line} missing:\n{stdout}");
    }
}

/// `seckill demo --dashboard`: after the demo the service stays up, the
/// dashboard's URL and admin token are printed, the page and the sale
/// answer, and SIGTERM stops it with the demo's exit code.
#[test]
fn demo_with_dashboard_keeps_the_service_up_until_stopped() {
    let mut demo = seckill()
        .args([
            "demo",
            "--dashboard",
            "--buyers",
            "2000",
            "--concurrency",
            "50",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(demo.stdout.take().unwrap()).lines();
    let mut printed = String::new();
    let mut field = |prefix: &str| loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("no {prefix:?} in:\n{printed}"))
            .unwrap();
        printed.push_str(&line);
        printed.push('\n');
        if let Some(value) = line.strip_prefix(prefix) {
            break value.to_owned();
        }
    };
    let url = field("dashboard: ");
    let token = field("admin token: ");
    assert!(
        printed.contains("audit") && printed.contains("clean"),
        "{printed}"
    );
    let base = url.strip_suffix("/dashboard").expect(&url).to_owned();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let admin = seckill_service::client::Http::new(&base, Some(token));
    // The page is HTML: the JSON client reads it as no value.
    let (status, page) = runtime.block_on(admin.get("/dashboard")).unwrap();
    assert_eq!((status.as_u16(), page), (200, serde_json::Value::Null));
    let (status, sale) = runtime.block_on(admin.get("/v1/sales/demo")).unwrap();
    assert_eq!(status.as_u16(), 200, "{sale}");
    assert_eq!(sale["sold"], 100, "{sale}");

    // SAFETY: a signal to our own child.
    unsafe { libc::kill(demo.id() as i32, libc::SIGTERM) };
    let status = demo.wait().unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        status.success(),
        "{status} after SIGTERM; it printed:\n{printed}{}",
        rest.join("\n")
    );
}

/// `seckill demo --cluster`: the same demo on a private 3-master +
/// 3-replica Redis Cluster, audit clean, exit 0.
#[test]
fn demo_runs_on_a_private_cluster() {
    let stdout = demo(&["--cluster", "--buyers", "3000", "--concurrency", "100"]);
    assert!(stdout.contains("redis the cluster at"), "{stdout}");
    for line in ["audit", "clean", "resold in later waves"] {
        assert!(stdout.contains(line), "{line} missing:\n{stdout}");
    }
}

/// The demo's timings hold whatever the machine's speed: ten demos in a
/// row, each beside a CPU hog on every core, all exit 0 with a clean audit.
#[test]
fn demo_succeeds_ten_times_in_a_row_on_a_busy_machine() {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let hogs: Vec<_> = (0..cores)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            })
        })
        .collect();
    let runs: Vec<std::process::Output> = (0..10)
        .map(|_| {
            seckill()
                .args(["demo", "--buyers", "8000", "--concurrency", "200"])
                .output()
                .unwrap()
        })
        .collect();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for hog in hogs {
        hog.join().unwrap();
    }
    for (i, out) in runs.iter().enumerate() {
        assert!(
            out.status.success(),
            "run {i}:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn serve_answers_load_then_stops_gracefully_on_sigterm() {
    let redis = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db");
    // Buyers sign in with HS256 tokens; the secret and the admin token
    // come from files.
    let secret = dir.path().join("jwt.secret");
    std::fs::write(&secret, "a secret for this test of at least 32 bytes\n").unwrap();
    let admin_token = dir.path().join("admin.token");
    std::fs::write(&admin_token, "t0ken\n").unwrap();
    let mut serve = seckill()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--redis-url",
            &redis.url(),
            "--buyer-auth",
            "jwt",
            "--rate-per-ip",
            "0",
        ])
        .arg("--jwt-secret-file")
        .arg(&secret)
        .arg("--admin-token-file")
        .arg(&admin_token)
        .arg("--database-url")
        .arg(&db)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(serve.stdout.take().unwrap()).lines();
    let line = lines.next().unwrap().unwrap();
    let base = line.strip_prefix("listening on ").expect(&line).to_owned();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let admin = seckill_service::client::Http::new(&base, Some("t0ken".into()));
    let sale = serde_json::json!({ "id": "l", "name": "x", "stock": 500, "per_user_limit": 2 });
    let (status, _) = runtime.block_on(admin.post("/v1/sales", &sale)).unwrap();
    assert_eq!(status.as_u16(), 201);

    let out = seckill()
        .args([
            "load",
            "--url",
            &base,
            "--sale",
            "l",
            "--buyers",
            "3000",
            "--concurrency",
            "32",
            "--redis-url",
            &redis.url(),
            "--json",
            "--plot",
        ])
        .arg(dir.path().join("load.svg"))
        .arg("--jwt-secret-file")
        .arg(&secret)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["requests"], 3000);
    assert_eq!(report["sold"], 500, "{report}");
    assert_eq!(report["oversold"], 0);
    assert_eq!(report["codes"]["ok"], 500, "{report}");
    common::assert_svg(
        &dir.path().join("load.svg"),
        &["answers per second", "latency, ms", "purchases (ok)", "p99"],
        8,
    );
    common::assert_positive(
        &report,
        &[
            "requests_per_s",
            "p50_ms",
            "p99_ms",
            "max_ms",
            "redis_us_per_request",
        ],
    );

    // SAFETY: a signal to our own child.
    unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
    assert!(serve.wait().unwrap().success());
    // Graceful: the persister committed everything before exiting.
    let audit = seckill()
        .args(["audit", "--sale", "l", "--redis-url", &redis.url()])
        .arg("--database-url")
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        audit.status.success(),
        "{}",
        String::from_utf8_lossy(&audit.stdout)
    );
}

#[test]
fn serve_refuses_bad_configuration_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short.secret");
    std::fs::write(&short, "too short\n").unwrap();
    let short = short.to_str().unwrap();
    let empty = dir.path().join("empty.secret");
    std::fs::write(&empty, "\n").unwrap();
    let empty = empty.to_str().unwrap();
    assert_refused(&[
        &["serve", "--admin-token", "", "--buyer-auth", "body"][..],
        &[
            "serve",
            "--admin-token",
            "x",
            "--buyer-auth",
            "body",
            "--listen",
            "nowhere",
        ],
        &[
            "load",
            "--url",
            "http://127.0.0.1:1",
            "--sale",
            "x",
            "--buyer-auth",
            "body",
        ],
        &[
            "load",
            "--url",
            "http://127.0.0.1:1",
            "--sale",
            "bad id",
            "--buyer-auth",
            "body",
        ],
    ]);
    // Each names what is missing or wrong, and the choices.
    for (args, words) in [
        (
            &["serve", "--admin-token", "x"][..],
            "--buyer-auth is required: `jwt` (verified tokens), `trusted-header`",
        ),
        (
            &["serve", "--buyer-auth", "body"],
            "the admin token is required",
        ),
        (
            &["serve", "--admin-token", "x", "--buyer-auth", "jwt"],
            "exactly one of --jwt-secret-file, --jwt-public-key-file and --jwks-url",
        ),
        (
            &[
                "serve",
                "--admin-token",
                "x",
                "--buyer-auth",
                "jwt",
                "--jwt-secret-file",
                short,
            ],
            "at least 32 bytes",
        ),
        (
            &["serve", "--admin-token-file", empty, "--buyer-auth", "body"],
            "is empty",
        ),
        (
            &[
                "serve",
                "--admin-token",
                "x",
                "--buyer-auth",
                "trusted-header",
            ],
            "needs --trusted-proxies",
        ),
        (
            &[
                "serve",
                "--admin-token",
                "x",
                "--buyer-auth",
                "trusted-header",
                "--trusted-proxies",
                "10.0.0.0/33",
            ],
            "is not an address or CIDR range",
        ),
        (
            &[
                "serve",
                "--admin-token",
                "x",
                "--buyer-auth",
                "jwt",
                "--jwt-public-key-file",
                short,
            ],
            "not an RSA, EC P-256 or Ed25519 public key",
        ),
        (
            &["load", "--url", "http://127.0.0.1:1", "--sale", "x"],
            "name how buyers sign in",
        ),
    ] {
        common::assert_refused_saying(args, words);
    }
}

/// What `seckill serve` (with `extra` flags) logs in its first second on a
/// redis-server started with `options`.
fn first_logs(options: seckill_testkit::Options, extra: &[&str]) -> String {
    let redis = options.start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let mut child = seckill()
        .args(["serve", "--listen", "127.0.0.1:0", "--admin-token", "t"])
        .args(["--redis-url", &redis.url(), "--buyer-auth", "body"])
        .args(extra)
        .arg("--database-url")
        .arg(dir.path().join("o.db"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    let _ = child.kill();
    let _ = child.wait();
    std::fs::read_to_string(&log).unwrap()
}

/// `serve` says at start when its Redis can lose acknowledged orders: no
/// append-only file and no replica, or a policy that evicts keys; and
/// says nothing of it when Redis keeps an AOF and evicts nothing.
#[test]
fn serve_warns_when_redis_can_lose_acknowledged_orders() {
    use seckill_testkit::{Fsync, Options};
    const NO_AOF: &str = "keeps no append-only file and has no replica";
    const EVICTS: &str = "Redis may evict keys";
    let bare = first_logs(Options::default(), &[]);
    assert!(bare.contains(NO_AOF), "{bare}");
    assert!(!bare.contains(EVICTS), "{bare}");
    let evicting = first_logs(
        Options::default()
            .aof(Fsync::EverySec)
            .arg("maxmemory-policy", "allkeys-lru"),
        &[],
    );
    assert!(evicting.contains(EVICTS), "{evicting}");
    assert!(evicting.contains("allkeys-lru"), "{evicting}");
    assert!(!evicting.contains(NO_AOF), "{evicting}");
    // With the README's other flag of this concern, which serve takes.
    let safe = first_logs(
        Options::default().aof(Fsync::EverySec),
        &["--restore-lost-sales"],
    );
    assert!(!safe.contains(NO_AOF) && !safe.contains(EVICTS), "{safe}");
    assert!(!safe.contains("error:"), "{safe}");
}
