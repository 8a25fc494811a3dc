//! `seckill lock-bench` as a user runs it: the real binary, a private server.

mod common;

use common::{assert_refused, run as seckill};

#[test]
fn json_reports_an_exact_counter_in_both_modes() {
    for mode in ["hot", "spread"] {
        for work in ["counter", "empty"] {
            let out = seckill(&[
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
            ]);
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

/// `--compare` runs its `redis-benchmark` baselines and reports both.
#[test]
fn compare_reports_both_baselines() {
    for mode in ["hot", "spread"] {
        let out = seckill(&[
            "lock-bench",
            "--mode",
            mode,
            "--clients",
            "4",
            "--duration",
            "0.3",
            "--compare",
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for field in [
            "redis_benchmark_set_nx_px_per_s",
            "ratio_to_redis_benchmark_pairs",
            "redis_benchmark_round_trips_per_s",
        ] {
            assert!(
                report[field].as_f64().is_some_and(|v| v > 0.0),
                "{field}: {report}"
            );
        }
    }
}
