#!/usr/bin/env python3
"""A kernel change against the kernels before it: `intfa bench` with the embedded templates (the
change) and with a copy of the templates before it (INTFA_TEMPLATE_DIR), in alternating runs,
the order reversed each round, same problems and configs; per problem the median TOPS of each
and their ratio. Separate processes, each compiling its kernels once (the kernel cache is keyed by
the templates' bytes, so the two never share an entry), then timing them with CUDA events.

usage: python3 bench/template_ab.py --before DIR [--after DIR] [--rounds 3]
                                    [--bin build/bin/intfa] [--json FILE] -- [intfa bench options]
(--after: another templates/ copy instead of the embedded templates.)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def host_header_differences(before, after):
    """The templates' .h files (parameter structs and enums the host library is compiled with,
    not only the kernels) that differ between two template folders. The binary passes the
    structs as it was built: a kernel rendered from templates whose .h files differ would read
    its parameters wrongly, so the script refuses such a pair."""
    differing = []
    for folder, _, files in os.walk(before):
        for name in files:
            if not name.endswith(".h"):
                continue
            path = os.path.join(folder, name)
            other = os.path.join(after, os.path.relpath(path, before))
            if not os.path.exists(other) or open(path, "rb").read() != open(other, "rb").read():
                differing.append(os.path.relpath(path, before))
    return sorted(differing)


def bench_once(binary, template_dir, bench_args):
    """One `intfa bench` run; returns {problem key: TOPS}."""
    env = dict(os.environ)
    env.pop("INTFA_TEMPLATE_DIR", None)
    if template_dir:
        env["INTFA_TEMPLATE_DIR"] = template_dir
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([binary, "bench", *bench_args, "--json", out.name], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        with open(out.name) as stream:
            rows = json.load(stream)
    result = {}
    for row in rows:
        key = "{} {} B={} H={} d={} N={} {} {}".format(
            row["variant"], row["numerics"], row["batch"], row["heads"], row["head_dim"],
            row["seq"], "causal" if row["causal"] else "non-causal", row["config"])
        result[key] = row["tops"]
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="templates/ as they were before")
    parser.add_argument("--after", help="default: the embedded templates")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bin", default="build/bin/intfa")
    parser.add_argument("--json")
    parser.add_argument("bench_args", nargs="*")
    args = parser.parse_args()
    # The embedded templates are those of this checkout's binary: templates/ beside this script.
    after = args.after or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                       "templates")
    differing = host_header_differences(args.before, after)
    if differing:
        sys.exit("template_ab.py: the host's headers differ between the two template folders ("
                 + ", ".join(differing) + "): the binary's parameter structs fit one of them "
                 "only. Put a change of those headers in a binary of its own.")
    runs = {"after": [], "before": []}
    for round_index in range(args.rounds):
        order = ["after", "before"] if round_index % 2 == 0 else ["before", "after"]
        for name in order:
            runs[name].append(bench_once(args.bin, args.before if name == "before" else args.after,
                                         args.bench_args))
            print(f"round {round_index + 1}: {name} done", file=sys.stderr, flush=True)
    keys = list(runs["after"][0])
    table = []
    print("| problem | before TOPS (median, runs) | after TOPS | after / before |")
    print("| --- | --- | --- | --- |")
    for key in keys:
        before = [run[key] for run in runs["before"]]
        after = [run[key] for run in runs["after"]]
        ratio = statistics.median(after) / statistics.median(before)
        table.append({"problem": key, "before": before, "after": after, "ratio": ratio})
        print(f"| {key} | {statistics.median(before):.0f} ({'/'.join(f'{x:.0f}' for x in before)})"
              f" | {statistics.median(after):.0f} ({'/'.join(f'{x:.0f}' for x in after)})"
              f" | {ratio:.3f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)


if __name__ == "__main__":
    main()
