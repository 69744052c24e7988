#!/usr/bin/env python3
"""Summarises ncu's per-SASS-instruction stall samples (the CSV of `ncu -i REPORT --page source
--csv --print-source sass`, as `scripts/device_run.sh probe` writes it, gzipped or not).

Prints the share of samples by how often an instruction ran (per tile, per block, ...: the
kernel's phases) and the instructions that gathered the most samples with their top stall
reasons.

    python3 scripts/stall_samples.py logs/ncu_source_csv.log.gz [--top 30]
"""
import argparse
import collections
import csv
import gzip
import io


def read_rows(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        lines = f.read().splitlines()
    # ncu prints its own lines first; the table starts at the header that names the address.
    start = next(i for i, line in enumerate(lines) if line.startswith('"Address"'))
    reader = csv.reader(io.StringIO("\n".join(lines[start:])))
    header = next(reader)
    return header, [row for row in reader if len(row) == len(header)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    header, rows = read_rows(args.csv)
    column = {name: i for i, name in enumerate(header)}
    samples = column["Warp Stall Sampling (All Samples)"]
    executed = column["Instructions Executed"]
    reasons = [name for name in header if name.startswith("stall_") and "Not Issued" not in name]

    def count(row, index):
        return int(row[index]) if row[index].isdigit() else 0

    total = sum(count(row, samples) for row in rows)
    print(f"{total} samples over {len(rows)} SASS instructions")
    by_executions = collections.Counter()
    for row in rows:
        by_executions[count(row, executed)] += count(row, samples)
    print("samples by how often the instruction ran:")
    for runs, n in by_executions.most_common(8):
        print(f"  {runs:>12} runs: {n:>9} samples ({100 * n / max(total, 1):.1f}%)")
    print(f"the {args.top} instructions with the most samples:")
    ranked = sorted(range(len(rows)), key=lambda i: -count(rows[i], samples))[:args.top]
    for i in ranked:
        row = rows[i]
        top = sorted(((count(row, column[r]), r[len("stall_"):]) for r in reasons),
                     reverse=True)[:2]
        why = ", ".join(f"{name} {n}" for n, name in top if n)
        print(f"  #{i:<5} {count(row, samples):>8} {row[column['Source']].strip()[:58]:<58}"
              f" runs {count(row, executed)}: {why}")


if __name__ == "__main__":
    main()
