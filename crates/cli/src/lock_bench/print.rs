//! The mutex run's table, for people (`--json` prints the report as is).

use anyhow::Result;

use super::{Mode, Report};

pub fn print(r: &Report, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(r)?);
        return Ok(());
    }
    let mode = match r.mode {
        Mode::Hot => "hot",
        Mode::Spread => "spread",
    };
    let opt = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"));
    println!(
        "{:<7} {:>7} {:>9} {:>12} {:>11} {:>9} {:>9} {:>9} {:>11} {:>11} {:>8} {:>8}",
        "mode",
        "clients",
        "seconds",
        "acquisitions",
        "acq/s",
        "wait p50",
        "wait p99",
        "wait max",
        "handoff p50",
        "handoff p99",
        "redis µs",
        "counter"
    );
    println!(
        "{:<7} {:>7} {:>9.2} {:>12} {:>11.0} {:>9.3} {:>9.3} {:>9.3} {:>11} {:>11} {:>8} {:>8}",
        mode,
        r.clients,
        r.duration_s,
        r.acquisitions,
        r.acquisitions_per_s,
        r.wait_p50_ms,
        r.wait_p99_ms,
        r.wait_max_ms,
        opt(r.handoff_p50_ms),
        opt(r.handoff_p99_ms),
        r.redis_us_per_acquisition
            .map_or_else(|| "-".to_owned(), |us| format!("{us:.2}")),
        if r.counter_ok { "exact" } else { "WRONG" }
    );
    println!("(latencies in ms; redis µs per acquisition)");
    if !r.redis_us_per_acquisition_by_master.is_empty() {
        let shares: Vec<String> = r
            .redis_us_per_acquisition_by_master
            .iter()
            .map(|(m, us)| format!("{m} {us:.2}"))
            .collect();
        println!("redis µs per acquisition by master: {}", shares.join(", "));
    }
    if let (Some(rps), Some(ratio)) = (
        r.redis_benchmark_set_nx_px_per_s,
        r.ratio_to_redis_benchmark_pairs,
    ) {
        println!(
            "redis-benchmark SET NX PX, 50 clients: {rps:.0}/s = {:.0} take+release pairs/s; \
             lock-bench reaches {ratio:.2}x of that",
            rps / 2.0
        );
    }
    if let (Some(rtt), Some(ratio)) = (r.redis_benchmark_round_trips_per_s, r.ratio_to_serial_floor)
    {
        println!(
            "redis-benchmark GET, 1 client: {rtt:.0} round trips/s; a hot lock's serial chain \
             allows at most {:.0} acquisitions/s here; lock-bench reaches {ratio:.2}x of that",
            r.acquisitions_per_s / ratio
        );
    }
    Ok(())
}
