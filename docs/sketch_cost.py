#!/usr/bin/env python3
"""What a sparse, log-spaced RTT sketch would cost per path (issue 20, part 4).

Reads RTTs in ms (the `time=` of iputils ping output, or one number a line) from the files named
on the command line, one file a path, and prints for each: the replies, p50/p90/p99 of the
samples, and the buckets a sketch with relative accuracy ALPHA and an absolute floor of FLOOR_US
has in use for the whole file and for each slice of SLICE replies (a report window), with the
bytes that would take.

The sketch: a value x (µs) below FLOOR_US / (gamma - 1) falls in linear buckets FLOOR_US wide
(so that a 10 µs path does not spread over many buckets); above, in the bucket
ceil(log_gamma(x)), gamma = (1 + ALPHA) / (1 - ALPHA) (DDSketch's mapping: any value reported
from a bucket is within ALPHA of the true one). Sparse: only buckets in use are kept, each as a
u16 index and a u16 count (4 bytes; a window of fewer than 65,536 replies), plus nothing else:
the cheapest possible layout, so the figures are a lower bound.
"""
import math
import re
import sys

ALPHA = 0.01
FLOOR_US = 1.0
GAMMA = (1 + ALPHA) / (1 - ALPHA)
LINEAR_UP_TO = FLOOR_US / (GAMMA - 1)  # µs: below, linear buckets FLOOR_US wide
BYTES_PER_BUCKET = 4
SLICE = int(__import__("os").environ.get("SLICE", "2000"))  # replies a window


def bucket(us):
    if us < LINEAR_UP_TO:
        return ("lin", int(us // FLOOR_US))
    return ("log", math.ceil(math.log(us) / math.log(GAMMA)))


def quantile(sorted_values, q):
    i = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[i]


def read(path):
    values = []
    with open(path) as f:
        for line in f:
            m = re.search(r"time=([0-9.]+) ms", line)
            if m:
                values.append(float(m.group(1)) * 1000.0)
            elif re.fullmatch(r"\s*[0-9.]+\s*", line):
                values.append(float(line) * 1000.0)
    return values


def main():
    print(f"alpha {ALPHA}, floor {FLOOR_US} µs (linear below {LINEAR_UP_TO:.1f} µs), "
          f"{BYTES_PER_BUCKET} bytes a bucket, windows of {SLICE} replies")
    print("| path | replies | p50 µs | p90 µs | p99 µs | buckets (all) | buckets a window "
          "(min–max) | bytes a window | bytes for 6 windows |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in sys.argv[1:]:
        us = read(path)
        if not us:
            print(f"| {path} | 0 | | | | | | | |")
            continue
        s = sorted(us)
        whole = len({bucket(x) for x in us})
        per = [len({bucket(x) for x in us[i:i + SLICE]})
               for i in range(0, len(us) - SLICE + 1, SLICE)] or [whole]
        print(f"| {path} | {len(us)} | {quantile(s, .5):.0f} | {quantile(s, .9):.0f} | "
              f"{quantile(s, .99):.0f} | {whole} | {min(per)}–{max(per)} | "
              f"{max(per) * BYTES_PER_BUCKET} | {6 * max(per) * BYTES_PER_BUCKET} |")


if __name__ == "__main__":
    main()
