//! `seckill bench` as a user runs it: the real binary, a private server.

mod common;

use common::{assert_refused, run as seckill};

#[test]
fn every_strategy_reports_a_clean_verified_run_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("strategies.svg");
    let out = seckill(&[
        "bench",
        "--strategy",
        "all",
        "--stock",
        "200",
        "--buyers",
        "2000",
        "--concurrency",
        "64",
        "--per-user-limit",
        "1",
        "--json",
        "--plot",
        plot.to_str().unwrap(),
    ]);
    common::assert_success(&out);
    // The picture: both panels of bars and a CDF line per strategy.
    common::assert_svg(
        &plot,
        &[
            "purchases per second",
            "p99 latency, ms",
            "latency CDF (ms, log scale)",
            "lock",
            "watch",
            "list",
            "lua",
            "atomic",
            "coalesced",
        ],
        12,
    );
    let rows = common::json_lines(&out);
    let names: Vec<&str> = rows
        .iter()
        .map(|r| {
            r["strategy"]
                .as_str()
                .unwrap_or_else(|| panic!("no strategy in {}", r))
        })
        .collect();
    assert_eq!(
        names,
        ["lock", "watch", "list", "lua", "atomic", "coalesced"]
    );
    for row in &rows {
        assert_eq!(row["ok"], true, "{row}");
        assert_eq!(row["sold"], 200, "{row}");
        assert_eq!(row["stock"], 200);
        assert_eq!(row["buyers"], 2000);
        for zero in ["oversold", "undersold", "limit_violations"] {
            assert_eq!(row[zero], 0, "{zero}: {row}");
        }
        common::assert_positive(
            row,
            &[
                "seconds",
                "purchases_per_s",
                "attempts_per_s",
                "p50_ms",
                "p99_ms",
            ],
        );
    }
}

/// `--compare` is what docs/benchmarks.md is built on: it must run, report
/// every baseline with its Redis time, and each strategy's Redis time per
/// purchase must be measured, not absent. Answers the strategy's row and
/// the baselines.
fn compare(redis: &[&str]) -> (serde_json::Value, Vec<serde_json::Value>) {
    let mut args = vec![
        "bench",
        "--strategy",
        "atomic",
        "--stock",
        "300",
        "--buyers",
        "1000",
        "--compare",
        "--json",
    ];
    args.extend(redis);
    let out = seckill(&args);
    common::assert_success(&out);
    let mut lines = common::json_lines(&out);
    let row = lines.remove(0);
    assert_eq!(row["strategy"], "atomic", "{row}");
    assert_eq!(row["ok"], true, "{row}");
    common::assert_positive(&row, &["redis_us_per_purchase"]);
    let baselines = lines;
    // Check+DECR and the purchase at -P 1 and -P 16, the two floors and
    // three refusals at -P 16.
    assert_eq!(baselines.len(), 9, "{baselines:?}");
    for floor in [
        "a purchase's three commands alone",
        "a refusal's read alone",
    ] {
        assert!(
            baselines
                .iter()
                .any(|b| b["baseline"].as_str().unwrap().ends_with(floor)),
            "no floor {floor:?}: {baselines:?}"
        );
    }
    for b in &baselines {
        common::assert_positive(b, &["requests_per_s", "redis_us_per_call"]);
    }
    (row, baselines)
}

#[test]
fn compare_runs_every_baseline_and_reports_redis_time() {
    let (row, baselines) = compare(&[]);
    assert!(
        row.get("redis_us_per_purchase_by_master").is_none(),
        "{row}"
    );
    assert!(baselines.iter().all(|b| b.get("master").is_none()));
}

/// On a private 3-master cluster: the same columns, the Redis time split
/// by master (the sale's master did the work), and each baseline run on
/// the master of its sale.
#[test]
fn compare_on_a_cluster_reports_redis_time_per_master() {
    let (row, baselines) = compare(&["--cluster"]);
    let by_master = row["redis_us_per_purchase_by_master"]
        .as_array()
        .unwrap_or_else(|| panic!("no split by master: {row}"));
    assert_eq!(by_master.len(), 3, "{row}");
    let shares: Vec<f64> = by_master
        .iter()
        .map(|m| m["redis_us"].as_f64().unwrap())
        .collect();
    let total = row["redis_us_per_purchase"].as_f64().unwrap();
    assert!(
        (shares.iter().sum::<f64>() - total).abs() < 0.01,
        "{shares:?} do not add up to {total}"
    );
    let busiest = shares.iter().copied().fold(0.0, f64::max);
    assert!(busiest > 0.99 * total, "one sale, one master: {shares:?}");
    for b in &baselines {
        assert!(b["master"].as_str().is_some(), "{b}");
    }
}

/// Every strategy that runs on a cluster sells exactly its stock there;
/// `watch`, which needs one server, is skipped with a word, and asked for
/// alone it is refused.
#[test]
fn every_strategy_but_watch_runs_on_a_cluster() {
    let out = seckill(&[
        "bench",
        "--cluster",
        "--strategy",
        "all",
        "--stock",
        "200",
        "--buyers",
        "1000",
        "--per-user-limit",
        "1",
        "--json",
    ]);
    common::assert_success(&out);
    let rows = common::json_lines(&out);
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["strategy"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["lock", "list", "lua", "atomic", "coalesced"]);
    for row in &rows {
        assert_eq!(row["ok"], true, "{row}");
        assert_eq!(row["sold"], 200, "{row}");
        assert_eq!(row["oversold"], 0, "{row}");
    }
    assert!(String::from_utf8_lossy(&out.stderr).contains("watch: skipped"));
    let out = seckill(&["bench", "--cluster", "--strategy", "watch"]);
    assert!(!out.status.success());
    assert_eq!(out.status.code(), Some(2), "could not run: 2");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not on a cluster"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_table_has_one_row_per_strategy() {
    let out = seckill(&[
        "bench",
        "--strategy",
        "coalesced",
        "--stock",
        "50",
        "--buyers",
        "500",
    ]);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.lines().next().unwrap().starts_with("strategy"));
    assert!(table.lines().nth(1).unwrap().starts_with("coalesced"));
}

#[test]
fn bad_arguments_are_refused_with_a_message() {
    assert_refused(&[
        &["bench", "--strategy", "magic"][..],
        &["bench", "--stock", "0"],
        &["bench", "--buyers", "-5"],
        &["bench", "--concurrency", "0"],
        &["bench", "--per-user-limit", "0"],
        &[
            "bench",
            "--redis-url",
            "redis://127.0.0.1:1/",
            "--buyers",
            "10",
        ],
    ]);
}

/// `--persist-to` (docs/benchmarks.md's persister table): every order in
/// SQL, the drain time, and what persisting cost per order, measured.
#[test]
fn persist_to_reports_every_order_in_sql_and_its_cost() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bench.db");
    let out = seckill(&[
        "bench",
        "--strategy",
        "coalesced",
        "--stock",
        "20000",
        "--buyers",
        "20000",
        "--persist-to",
        db.to_str().unwrap(),
        "--json",
    ]);
    common::assert_success(&out);
    let row: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(row["persisted_orders"], 20000, "{row}");
    assert!(row["persist_drain_ms"].as_f64().is_some(), "{row}");
    // 20,000 orders take the persister's threads far more than one 10 ms
    // tick of /proc CPU; its Redis time leaves out the bench's own polls.
    common::assert_positive(
        &row,
        &["persist_cpu_us_per_order", "persist_redis_us_per_order"],
    );
}

/// A sharded sale on a private 3-master cluster, demand skewed to a
/// quarter of the shards: every unit sold, none stranded, the books
/// balanced; the shards reported with their masters, units given back
/// from the shards whose buyers left, and the Redis time split by master.
/// A baseline strategy cannot sell a sharded sale and is refused.
#[test]
fn a_sharded_sale_with_skewed_demand_sells_out_on_a_cluster() {
    let out = seckill(&[
        "bench",
        "--cluster",
        "--strategy",
        "atomic",
        "--shards",
        "6",
        "--skew",
        "--stock",
        "2000",
        "--buyers",
        "8000",
        "--per-user-limit",
        "1",
        "--json",
    ]);
    common::assert_success(&out);
    let row = common::json_lines(&out).remove(0);
    assert_eq!(row["ok"], true, "{row}");
    assert_eq!(
        (row["sold"].as_u64(), row["oversold"].as_u64()),
        (Some(2000), Some(0)),
        "{row}"
    );
    let sharded = &row["sharded"];
    let shards = sharded["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 6, "{row}");
    let masters: std::collections::HashSet<&str> = shards
        .iter()
        .map(|s| s["master"].as_str().unwrap())
        .collect();
    assert_eq!(masters.len(), 3, "{row}");
    let sold: u64 = shards.iter().map(|s| s["sold"].as_u64().unwrap()).sum();
    assert_eq!(sold, 2000, "{row}");
    assert!(sharded["give_backs"].as_u64().unwrap() > 0, "{row}");
    assert_eq!(
        sharded["problems"].as_array().map(Vec::len),
        Some(0),
        "{row}"
    );
    assert_eq!(
        row["redis_us_per_purchase_by_master"]
            .as_array()
            .map(Vec::len),
        Some(3),
        "{row}"
    );

    let out = seckill(&["bench", "--strategy", "lua", "--shards", "2"]);
    assert!(!out.status.success());
    assert_eq!(out.status.code(), Some(2), "could not run: 2");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot sell a sharded sale"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
