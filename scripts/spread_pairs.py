"""What scripts/spread.sh's repeated pairs say, for the pages that quote it."""


def pair_ratios(cases):
    """The Redis CPU per purchase over 10,000 sales against one sale, per pair
    spread.sh ran back to back (one and spread, one-2 and spread-2, ...), from
    its JSON lines keyed by case."""
    out = []
    for suffix in ["", "-2", "-3", "-4", "-5"]:
        one, many = cases.get("one" + suffix), cases.get("spread" + suffix)
        if one and many:
            out.append(many["redis_cpu_us_per_purchase"] / one["redis_cpu_us_per_purchase"])
    return out
