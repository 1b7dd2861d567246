#!/usr/bin/env python3
"""benchcmp.py OLD NEW [--max-slowdown 0.20] [--alpha 0.05] [--metric UNIT ...]

Compares two files of Go benchmark results (the benchstat format: lines
"BenchmarkName-N  iters  value unit  value unit ...", plus "key: value"
configuration lines) as benchstat does: per benchmark and unit, the
median of each side and a two-sided Mann-Whitney U test of the samples.
It prints a table, and exits 1 when a checked unit got slower by more than
--max-slowdown with p < --alpha (both must hold: a noisy difference does
not fail it), 2 on bad input. Only the units given with --metric are
checked (default: ns/record and p50-µs); others are shown.
"""
import argparse
import math
import re
import statistics
import sys

LINE = re.compile(r"^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$")


def load(path):
    out = {}
    with open(path) as f:
        for line in f:
            m = LINE.match(line.strip())
            if not m:
                continue
            fields = m.group(2).split()
            for value, unit in zip(fields[0::2], fields[1::2]):
                try:
                    out.setdefault((m.group(1), unit), []).append(float(value))
                except ValueError:
                    sys.exit("benchcmp: %s: %r is not a number in: %s" % (path, value, line.strip()))
    return out


def mann_whitney_p(a, b):
    """Two-sided p of the Mann-Whitney U test: exact for small samples
    without ties, else the normal approximation with a tie correction."""
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return 1.0
    pooled = sorted((v, i) for i, v in enumerate(a + b))
    ranks = [0.0] * (n1 + n2)
    i = 0
    ties = 0.0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[pooled[k][1]] = (i + j) / 2.0 + 1
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    u1 = sum(ranks[:n1]) - n1 * (n1 + 1) / 2.0
    u = min(u1, n1 * n2 - u1)
    if ties == 0 and n1 + n2 <= 20:
        return min(1.0, 2 * exact_cdf(int(u), n1, n2))
    mu = n1 * n2 / 2.0
    n = n1 + n2
    sigma = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1))))
    if sigma == 0:
        return 1.0
    z = (abs(u - mu) - 0.5) / sigma
    return min(1.0, math.erfc(max(z, 0) / math.sqrt(2)))


def exact_cdf(u, n1, n2):
    """P(U <= u) under the null hypothesis, by counting."""
    memo = {}

    def count(u, n1, n2):
        if u < 0:
            return 0
        if n1 == 0 or n2 == 0:
            return 1 if u == 0 else 0
        key = (u, n1, n2)
        if key not in memo:
            memo[key] = count(u - n2, n1 - 1, n2) + count(u, n1, n2 - 1)
        return memo[key]

    total = math.comb(n1 + n2, n1)
    return sum(count(k, n1, n2) for k in range(u + 1)) / total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--max-slowdown", type=float, default=0.20)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--metric", action="append")
    args = ap.parse_args()
    checked = set(args.metric or ["ns/record", "p50-µs"])
    old, new = load(args.old), load(args.new)
    failed = []
    found = 0
    print("%-60s %-10s %12s %12s %8s %7s" % ("benchmark", "unit", "old median", "new median", "delta", "p"))
    for key in sorted(set(old) & set(new)):
        a, b = old[key], new[key]
        mo, mn = statistics.median(a), statistics.median(b)
        delta = (mn - mo) / mo if mo else 0.0
        p = mann_whitney_p(a, b)
        mark = ""
        if key[1] in checked:
            found += 1
            if delta > args.max_slowdown and p < args.alpha:
                mark = "  REGRESSION"
                failed.append(key)
        print("%-60s %-10s %12.4g %12.4g %+7.1f%% %7.3f%s (n=%d+%d)" % (key[0], key[1], mo, mn, delta * 100, p, mark, len(a), len(b)))
    if found == 0:
        sys.exit("benchcmp: no result in both files has a checked unit (%s)" % ", ".join(sorted(checked)))
    if failed:
        print("benchcmp: slower by more than %.0f%% (p < %.2f): %s" % (args.max_slowdown * 100, args.alpha, ", ".join("%s %s" % k for k in failed)))
        sys.exit(1)
    print("benchcmp: no checked unit is slower by more than %.0f%% with p < %.2f" % (args.max_slowdown * 100, args.alpha))


if __name__ == "__main__":
    main()
