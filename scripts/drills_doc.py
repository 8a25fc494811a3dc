"""Writes the cluster and sharded-sale drills' figures into docs/reliability.md.

Reads the `drill-figures {...}` lines the drills print (scripts/drills.sh)
and replaces the table between the cluster-drills markers of the page.
"""

import datetime
import json
import re
import sys

from doc_section import replace_section

BEGIN = "<!-- cluster-drills:begin (scripts/drills.sh writes this table) -->"
END = "<!-- cluster-drills:end -->"


def n(x):
    return f"{x:,}"


def outcome(o):
    return (
        f"{n(o['acknowledged'])} acknowledged; forgotten by Redis **{o['forgotten']}** "
        f"({o['reported']} reported by the audit, {o['lost']} in neither Redis nor SQL); "
        f"oversold {o['oversold']}; audit {'clean' if o['audit_clean'] else 'NOT clean'}"
    )


def transfer(record):
    """An open transfer as the sale's hash records it, `t|from|to|units|…`."""
    t, source, to, units = record.split("|")[:4]
    source = "the pool" if source == "p" else f"shard {source}"
    return f"transfer {t} ({n(int(units))} units from {source} to shard {to})"


def books(b):
    problems = len(b["problems"])
    return f"{b['transfers']} transfers, {problems} book problems"


def row(d, f):
    test = "`crates/service/tests/cluster_drills.rs`"
    if d == "11 default":
        return (
            "11", "SIGKILL of the sale's master, default durability",
            "8 HTTP buyers on one sale; its master SIGKILLed 1 s in; its replica takes over",
            "503 while the slot has no master, each answer < 2.5 s; selling resumes with nothing restarted; every loss counted, any in SQL reported by the audit; 0 oversold",
            f"replica took over after {n(f['replica_took_over_ms'])} ms; {n(f['unavailable_503'])} 503s, slowest answer {n(f['slowest_answer_ms'])} ms; "
            f"{n(f['acknowledged_after_recovery'])} sold after; " + outcome(f["outcome"]),
            test,
        )
    if d == "11 replica":
        return (
            "11r", "the same with `--durability replica`",
            "as 11; the killed node restarted (it rejoins as the new master's replica): a purchase is acknowledged only once a replica has it",
            "0 acknowledged purchases lost; 503 while no replica can confirm; selling resumes once one can",
            f"replica took over after {n(f['replica_took_over_ms'])} ms, killed node back as a replica after {n(f['killed_node_rejoined_ms'])} ms; "
            f"{n(f['unavailable_503'])} 503s, slowest answer {n(f['slowest_answer_ms'])} ms; {n(f['acknowledged_after_recovery'])} sold after; " + outcome(f["outcome"]),
            test,
        )
    if d == "12":
        return (
            "12", "`CLUSTER FAILOVER` mid-sale",
            "8 HTTP buyers; the sale's replica promoted by a manual failover 1 s in",
            "0 lost, 0 oversold, audit clean, selling goes on",
            f"failover {n(f['failover_ms'])} ms; {n(f['unavailable_503'])} 503s; p99 {f['p99_ms']} ms, slowest {f['slowest_answer_ms']} ms; " + outcome(f["outcome"]),
            test,
        )
    if d == "13":
        return (
            "13", "the sale's slot moved mid-sale",
            "8 HTTP buyers; the slot moved to another master 1 s in (`SETSLOT IMPORTING/MIGRATING`, `MIGRATE`, `SETSLOT NODE`)",
            "purchases go on through `ASK`/`TRYAGAIN`; 0 lost, audit clean",
            f"move {n(f['move_ms'])} ms; {n(f['unavailable_503'])} 503s; p99 {f['p99_ms']} ms, slowest {f['slowest_answer_ms']} ms; " + outcome(f["outcome"]),
            test,
        )
    if d == "14":
        return (
            "14", "one master frozen (SIGSTOP) for 5 s",
            "buyers on a sale of the frozen master and, during the freeze, on a sale of another master",
            "the other sale: p99 < 50 ms, no 503, its orders reach SQL during the freeze; the frozen sale answers 503 (each < 2.5 s) and sells again after",
            f"other sale: {n(f['other_sale_acknowledged'])} sold, p50 {f['other_sale_p50_ms']:.1f} ms, p99 {f['other_sale_p99_ms']:.1f} ms, "
            f"{f['other_sale_unavailable_503']} 503s, {n(f['other_sale_in_sql_while_frozen'])} in SQL before the thaw; "
            f"frozen sale: {n(f['frozen_sale_unavailable_503'])} 503s, slowest {n(f['frozen_sale_slowest_answer_ms'])} ms, "
            f"{n(f['frozen_sale_acknowledged_after_resume'])} sold after; " + outcome(f["frozen_outcome"]),
            test,
        )
    if d == "15":
        return (
            "15", "lock holder's master killed",
            "a lock (lease 1 s) is held and a fenced write made; the lock's master SIGKILLed; the replica takes over; another client takes the lock",
            "the new fence is higher; the stale holder's write is refused; its release says `NotHeld`",
            f"fences {f['stale_fence']} → {f['fresh_fence']}; stale write refused: {'yes' if f['stale_write_refused'] else 'NO'}; replica took over after {n(f['failover_ms'])} ms",
            "`crates/lock/tests/cluster.rs` `drill_15_…`",
        )
    if d == "16":
        return (
            "16", "a sharded sale's refiller SIGKILLed mid-transfer",
            "two `serve` processes on one server; a sale of 8,000 over 4 shards bought through the first; it is frozen when a transfer is open and SIGKILLed; the rest bought through the second",
            "the second finishes the open transfer once the lease lapses (a later fence); each transfer in the ledger once; books balance; sold == stock; every acknowledged order in SQL; audit clean",
            f"killed with {transfer(f['open_at_kill'])} open (fence {f['fence_at_kill']}), ended by fence {f['finished_by_fence']}; {f['transfers']} transfers; "
            f"sold {n(f['sold'])} of {n(f['stock'])}, sold out {n(f['sold_out_after_kill_ms'])} ms after the kill; {n(f['acknowledged_in_sql'])} acknowledged, all in SQL; {f['problems']} book problems",
            "`crates/cli/tests/drills.rs` `drill_16_…`",
        )
    if d == "17":
        return (
            "17", "a shard's master SIGKILLed, `--durability replica`",
            "8 HTTP buyers on a sale of 8,000 over 3 shards (one per master); one shard's master SIGKILLed 1 s in; its replica takes over; the killed node rejoins",
            "0 acknowledged purchases lost; books balance; refills ran; `sold_out` only once all sold; audit clean",
            f"killed node back as a replica after {n(f['killed_node_rejoined_ms'])} ms; {n(f['unavailable_503'])} 503s, slowest answer {n(f['slowest_answer_ms'])} ms; "
            f"{n(f['acknowledged_after_recovery'])} sold after; {books(f['books'])}; " + outcome(f["outcome"]),
            test,
        )
    if d == "18":
        return (
            "18", "a shard's slot moved mid-sale",
            "as 17, but one shard's slot moved to another master 1 s in",
            "purchases and transfers go on; 0 lost; books balance; audit clean",
            f"move {n(f['move_ms'])} ms; {n(f['unavailable_503'])} 503s; p99 {f['p99_ms']} ms, slowest {f['slowest_answer_ms']} ms; "
            f"{books(f['books'])}; " + outcome(f["outcome"]),
            test,
        )
    if d == "19":
        return (
            "19", "redis-server restarted empty mid-sale (no AOF, no snapshot)",
            "8 HTTP buyers on one sale with `seckill serve --restore-lost-sales` (persister in-process); redis-server SIGKILLed 1.5 s in and restarted at once with nothing on disk",
            "503 (`unavailable`, then `sale_lost`), never 404, and an admin re-creating it refused (409 `sale_exists`), until the watch restores the sale from SQL; then units sold in Redis = units of live orders in SQL, 0 oversold, no buyer over its limit; an order from before the loss is paid, every other expires on time",
            f"first `sale_lost` answer {n(f['first_sale_lost_answer_ms'])} ms after the kill, restored after {n(f['restored_after_ms'])} ms; "
            f"{n(f['acknowledged'])} acknowledged, {n(f['orders_in_sql'])} in SQL: **{f['acknowledged_lost_with_redis']}** acknowledged orders lost with Redis "
            f"(not yet persisted at the kill: the persister's lag); 0 oversold",
            "`crates/service/tests/lost.rs` `drill_19_…`",
        )
    if d == "20":
        return (
            "20", "a cluster master restarted empty mid-sale",
            "3 masters + 3 replicas; buyers on a sale of one master and a sale of another, and a sharded sale with a shard on every master and 3 orders; the first master SIGKILLed 1.5 s in and restarted at once with nothing on disk (back within the node timeout: it keeps its slots, empty, and its replica syncs from it)",
            "as 19 for the lost sale; the other master's sale never answers `sale_lost` and loses nothing; the sharded sale is rebuilt with its books balanced, its 3 orders kept, and sells exactly its stock",
            f"first `sale_lost` answer {n(f['first_sale_lost_answer_ms'])} ms after the kill, restored after {n(f['restored_after_ms'])} ms; "
            f"{n(f['acknowledged'])} acknowledged, {n(f['orders_in_sql'])} in SQL: **{f['acknowledged_lost_with_redis']}** acknowledged orders lost with the master; "
            f"other sale: {n(f['other_sale_acknowledged'])} acknowledged, all in SQL; 0 oversold",
            "`crates/service/tests/lost.rs` `drill_20_…`",
        )
    if d == "21":
        return (
            "21", "the master SIGKILLed under Sentinel, `--durability replica`",
            "a master, 2 replicas, 3 sentinels (quorum 2, `down-after-milliseconds` 1,000); `serve` given only the sentinels; 8 HTTP buyers on one sale; the master SIGKILLed 1 s in",
            "the service follows the promoted replica with nothing restarted; 0 acknowledged purchases lost (in Redis and in SQL); 0 oversold; each answer < 2.5 s; selling resumes within 1.5 s of the promotion; the audit finds nothing: the persister, too, commits only what a replica has, so no unacknowledged order is in SQL only",
            f"sentinels promoted a replica after {n(f['promoted_ms'])} ms; selling resumed {n(f['resumed_ms'])} ms after the kill ({n(f['no_sale_for_ms'])} ms without a sale); "
            f"{n(f['unavailable_503'])} 503s, slowest answer {n(f['slowest_answer_ms'])} ms; {n(f['acknowledged_after_kill'])} sold after; "
            f"{n(f['acknowledged'])} acknowledged; forgotten by Redis **{f['forgotten']}**, missing in SQL {f['missing_in_sql']}; oversold {f['oversold']}; "
            f"unacknowledged orders in SQL only {f.get('unacknowledged_in_sql_only', 0)}, other audit findings {f.get('other_findings', 0 if f.get('audit_clean', True) else '?')}",
            "`crates/service/tests/sentinel_drills.rs`",
        )
    raise SystemExit(f"unknown drill {d}")


def main():
    figures = {}
    for line in open(sys.argv[1], encoding="utf-8"):
        m = re.search(r"drill-figures (\{.*\})\s*$", line)
        if m:
            record = json.loads(m.group(1))
            figures[record["drill"]] = record["figures"]
    order = ["11 default", "11 replica", "12", "13", "14", "15", "16", "17", "18", "19", "20", "21"]
    missing = [d for d in order if d not in figures]
    if missing:
        raise SystemExit(f"no figures for drills {missing}")
    lines = [
        BEGIN,
        "",
        f"Measured by `bash scripts/drills.sh` on {datetime.date.today().isoformat()}, this machine (2 vCPU):",
        "",
        "| # | drill | what is done | what is checked | figures | test |",
        "|---|---|---|---|---|---|",
    ]
    for d in order:
        lines.append("| " + " | ".join(row(d, figures[d])) + " |")
    lines += ["", END]
    replace_section(sys.argv[2], BEGIN, END, lines)


if __name__ == "__main__":
    main()
