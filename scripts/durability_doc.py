"""Writes what each Redis durability setting costs a purchase into
docs/reliability.md, between the durability-cost markers, from the JSON
lines of scripts/durability.sh (one `seckill bench` run each)."""

import datetime
import json
import statistics
import sys

from doc_section import replace_section

BEGIN = "<!-- durability-cost:begin (scripts/durability.sh writes this table) -->"
END = "<!-- durability-cost:end -->"
SETTINGS = [
    ("none", "no persistence (Debian's default here)"),
    ("everysec", "`appendonly yes`, `appendfsync everysec`"),
    ("always", "`appendonly yes`, `appendfsync always`"),
    ("replica", "no persistence, a replica, `--durability replica`"),
]


def main():
    runs = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
    for r in runs:
        if not r["ok"]:
            raise SystemExit(f"a run failed its checks: {r}")
    lines = [
        BEGIN,
        "",
        f"Measured by `bash scripts/durability.sh` on {datetime.date.today().isoformat()}, this machine (2 vCPU): "
        "`seckill bench`, 50,000 buyers for 50,000 units, median of three runs.",
        "",
        "| Redis setting | strategy | purchases/s | p99 ms | Redis µs per purchase (commands) | redis-server CPU µs per purchase |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for setting, label in SETTINGS:
        for strategy in ["atomic", "coalesced"]:
            mine = [r for r in runs if r["setting"] == setting and r["strategy"] == strategy]
            if not mine:
                raise SystemExit(f"no runs for {setting} {strategy}")
            med = lambda k: statistics.median(r[k] for r in mine)
            lines.append(
                f"| {label} | {strategy} | {med('purchases_per_s'):,.0f} | {med('p99_ms'):.2f} | "
                f"{med('redis_us_per_purchase'):.2f} | {med('redis_cpu_us_per_purchase'):.2f} |"
            )
    lines += ["", END]
    replace_section(sys.argv[2], BEGIN, END, lines)


if __name__ == "__main__":
    main()
