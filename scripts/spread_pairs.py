"""What scripts/spread.sh's repeated pairs say, for the pages that quote it:
one sale and 10,000 run as `one` and `spread`, then again as `one-2` and
`spread-2`, `one-3` and `spread-3`, …, and with redis-server on a core of
its own as `one-pinned-1` and `spread-pinned-1`, …"""

import re


def is_repeat(case):
    """Whether `case` is one of the pairs run again (not in the main table)."""
    return re.fullmatch(r"(one|spread)-(pinned-)?\d+", case) is not None


def pair_ratios(cases, pinned=False):
    """The Redis CPU per purchase over 10,000 sales against one sale, per
    pair, the first run first, from spread.sh's JSON lines keyed by case;
    with `pinned`, of the pairs run with redis-server on a core of its own."""
    mark = "pinned-" if pinned else ""
    runs = sorted(int(m.group(1)) for c in cases if (m := re.fullmatch(rf"one-{mark}(\d+)", c)))
    # The first unpinned pair is the table's, `one` and `spread`.
    suffixes = ([] if pinned else [""]) + [f"-{mark}{run}" for run in runs]
    out = []
    for suffix in suffixes:
        one, many = cases.get("one" + suffix), cases.get("spread" + suffix)
        if one and many:
            out.append(many["redis_cpu_us_per_purchase"] / one["redis_cpu_us_per_purchase"])
    return out
