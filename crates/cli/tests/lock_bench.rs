//! `seckill lock-bench` as a user runs it: the real binary, a private server.

mod common;

use common::{assert_refused, run as seckill};

/// Both modes, both kinds of work; with `empty` work also `--compare`, whose
/// `redis-benchmark` baselines must both be reported.
#[test]
fn json_reports_an_exact_counter_in_both_modes() {
    for mode in ["hot", "spread"] {
        for work in ["counter", "empty"] {
            let compare = work == "empty";
            let mut args = vec![
                "lock-bench",
                "--mode",
                mode,
                "--work",
                work,
                "--clients",
                "8",
                "--duration",
                "0.3",
                "--json",
            ];
            if compare {
                args.push("--compare");
            }
            let out = seckill(&args);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(report["mode"], mode);
            assert_eq!(report["clients"], 8);
            assert_eq!(report["counter_ok"], true);
            assert!(
                report["acquisitions"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("no acquisitions in {}", report))
                    > 0
            );
            for field in [
                "acquisitions_per_s",
                "wait_p50_ms",
                "wait_p99_ms",
                "wait_max_ms",
                "duration_s",
            ] {
                assert!(report[field].is_number(), "{field}");
            }
            if compare {
                common::assert_positive(
                    &report,
                    &[
                        "redis_benchmark_set_nx_px_per_s",
                        "ratio_to_redis_benchmark_pairs",
                        "redis_benchmark_round_trips_per_s",
                    ],
                );
            }
        }
    }
}

#[test]
fn bad_arguments_are_refused_with_a_message() {
    assert_refused(&[
        &["lock-bench", "--mode", "lukewarm"][..],
        &["lock-bench", "--clients", "0"],
        &["lock-bench", "--duration", "-1"],
        &["lock-bench", "--duration", "nan"],
        &["lock-bench", "--lease-ms", "1"],
        &[
            "lock-bench",
            "--redis-url",
            "not-a-url",
            "--duration",
            "0.1",
        ],
    ]);
}

/// On a private 3-master cluster: hand-offs stay exact, and the Redis time
/// per acquisition is reported in total and by master (the hot lock's
/// master did the work).
#[test]
fn a_hot_lock_on_a_cluster_reports_redis_time_per_master() {
    let out = seckill(&[
        "lock-bench",
        "--cluster",
        "--mode",
        "hot",
        "--clients",
        "8",
        "--duration",
        "0.5",
        "--compare",
        "--json",
    ]);
    common::assert_success(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["counter_ok"], true, "{report}");
    common::assert_positive(
        &report,
        &[
            "acquisitions",
            "redis_us_per_acquisition",
            "redis_benchmark_set_nx_px_per_s",
        ],
    );
    let by_master = report["redis_us_per_acquisition_by_master"]
        .as_array()
        .unwrap_or_else(|| panic!("no split by master: {report}"));
    assert_eq!(by_master.len(), 3, "{report}");
    let total = report["redis_us_per_acquisition"].as_f64().unwrap();
    let busiest = by_master
        .iter()
        .map(|m| m[1].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(
        busiest > 0.99 * total,
        "one lock, one master: {by_master:?}"
    );
}

/// `--primitive semaphore|rwlock|ratelimit`, both modes: each run checks
/// the invariant its primitive promises and says so; a rate limiter
/// admits what its rate allows.
#[test]
fn every_primitive_runs_and_holds_its_promise() {
    for primitive in ["semaphore", "rwlock", "ratelimit"] {
        for mode in ["hot", "spread"] {
            let args = [
                "lock-bench",
                "--primitive",
                primitive,
                "--mode",
                mode,
                "--clients",
                "8",
                "--duration",
                "0.5",
                "--rate",
                "200",
                "--burst",
                "20",
                "--json",
            ];
            let out = seckill(&args);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(report["primitive"], primitive);
            assert_eq!(report["ok"], true, "{report}");
            assert!(report["operations"].as_u64().unwrap() > 0, "{report}");
            if primitive == "ratelimit" {
                let admitted = report["admitted"].as_f64().unwrap();
                let bound = report["bound"].as_f64().unwrap();
                assert!(admitted <= bound && admitted >= 20.0, "{report}");
            }
        }
    }
    common::assert_refused_saying(
        &["lock-bench", "--primitive", "ratelimit", "--rate", "0"],
        "--rate",
    );
}
