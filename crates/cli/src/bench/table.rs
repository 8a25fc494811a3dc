//! `bench`'s table on the terminal: a row per strategy, then the
//! baselines of `--compare`.

use super::compare::{Baseline, FLOOR_PURCHASE};
use super::rows::Row;

pub(super) fn print_table(rows: &[Row], baselines: &[Baseline]) {
    print_rows(rows);
    print_spread(rows);
    if baselines.is_empty() {
        return;
    }
    print_baselines(rows, baselines);
}

/// The header, what each persister wrote, then a line per strategy.
fn print_rows(rows: &[Row]) {
    println!(
        "{:<10} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6} {:>6} {:>8} {:>11} {:>11} {:>8} {:>8} {:>8} {:>8} {:>4}",
        "strategy",
        "stock",
        "buyers",
        "sold",
        "oversold",
        "undersold",
        "limit",
        "errors",
        "seconds",
        "purchases/s",
        "attempts/s",
        "p50 ms",
        "p99 ms",
        "redis µs",
        "cpu µs",
        "ok"
    );
    for r in rows {
        if let Some(p) = &r.persisted {
            println!(
                "{:<10} persisted {} orders; backlog drained {:.0} ms after the last answer; \
                 per order: {} µs of persister CPU, {} µs of Redis",
                r.strategy,
                p.orders,
                p.drain_ms,
                micros(p.cpu_us_per_order),
                micros(p.redis_us_per_order),
            );
        }
    }
    for r in rows {
        println!(
            "{:<10} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6} {:>6} {:>8.3} {:>11.0} {:>11.0} {:>8.3} {:>8.3} {:>8} {:>8} {:>4}",
            r.strategy,
            r.stock,
            r.buyers,
            r.sold,
            r.oversold,
            r.undersold,
            r.limit_violations,
            r.errors,
            r.seconds,
            r.purchases_per_s,
            r.attempts_per_s,
            r.p50_ms,
            r.p99_ms,
            micros(r.redis_us_per_purchase),
            micros(r.redis_cpu_us_per_purchase),
            if r.ok { "yes" } else { "NO" }
        );
    }
}

/// Where each run's Redis time and stock went: by master, and by shard.
fn print_spread(rows: &[Row]) {
    for r in rows {
        if !r.redis_us_per_purchase_by_master.is_empty() {
            let shares: Vec<String> = r
                .redis_us_per_purchase_by_master
                .iter()
                .map(|m| format!("{} {:.2}", m.master, m.redis_us))
                .collect();
            println!(
                "{:<10} redis µs per purchase by master: {}",
                r.strategy,
                shares.join(", ")
            );
        }
        if let Some(sharded) = &r.sharded {
            let shards: Vec<String> = sharded
                .shards
                .iter()
                .map(|s| format!("{} on {} sold {}", s.id, s.master, s.sold))
                .collect();
            println!(
                "{:<10} {} refills, {} give-backs, {} buyers answered stock_moving; {}{}",
                r.strategy,
                sharded.refills,
                sharded.give_backs,
                r.stock_moving,
                shards.join(", "),
                if sharded.problems.is_empty() {
                    String::new()
                } else {
                    format!("; BOOKS DO NOT ADD UP: {}", sharded.problems.join("; "))
                }
            );
        }
    }
}

/// The `--compare` baselines, and each strategy measured against them.
fn print_baselines(rows: &[Row], baselines: &[Baseline]) {
    println!();
    let full_p16 = baselines
        .iter()
        .find(|b| b.baseline.ends_with("full purchase script") && b.pipeline == 16)
        .map(|b| b.requests_per_s);
    for b in baselines {
        println!(
            "{:<45} {:>3} clients  -P {:<2} {:>10.0} requests/s {:>8} redis µs per call{}",
            b.baseline,
            b.clients,
            b.pipeline,
            b.requests_per_s,
            micros(b.redis_us_per_call),
            b.master
                .as_ref()
                .map_or_else(String::new, |m| format!(" (on {m})"))
        );
    }
    if let Some(full) = full_p16 {
        for r in rows {
            println!(
                "{:<10} reaches {:.2}x of redis-benchmark's full purchase script at -P 16",
                r.strategy,
                r.purchases_per_s / full
            );
        }
    }
    let floor = baselines
        .iter()
        .find(|b| b.baseline.ends_with(FLOOR_PURCHASE))
        .and_then(|b| b.redis_us_per_call);
    if let Some(floor) = floor {
        for r in rows {
            if let Some(us) = r.redis_us_per_purchase {
                println!(
                    "{:<10} costs Redis {:.2}x the floor of a purchase's commands ({floor:.2} µs)",
                    r.strategy,
                    us / floor
                );
            }
        }
    }
}

/// A µs figure for the table, `-` when there is none.
fn micros(us: Option<f64>) -> String {
    us.map_or_else(|| "-".to_owned(), |us| format!("{us:.2}"))
}
