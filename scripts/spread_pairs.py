"""What scripts/spread.sh's repeated pairs say, for the pages that quote it:
one sale and 10,000 run as `one` and `spread`, then again as `one-2` and
`spread-2`, `one-3` and `spread-3`, …"""

import re


def is_repeat(case):
    """Whether `case` is one of the pairs run again (not in the main table)."""
    return re.fullmatch(r"(one|spread)-\d+", case) is not None


def pair_ratios(cases):
    """The Redis CPU per purchase over 10,000 sales against one sale, per
    pair, the first run first, from spread.sh's JSON lines keyed by case."""
    runs = sorted({int(c.partition("-")[2]) for c in cases if is_repeat(c)} | {1})
    out = []
    for suffix in ["" if run == 1 else f"-{run}" for run in runs]:
        one, many = cases.get("one" + suffix), cases.get("spread" + suffix)
        if one and many:
            out.append(many["redis_cpu_us_per_purchase"] / one["redis_cpu_us_per_purchase"])
    return out
