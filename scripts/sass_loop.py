#!/usr/bin/env python3
"""Instruction histogram of the main (outermost MMA-holding) loop of a kernel's SASS, and the
sizes of the forward-branch blocks inside it (usually skipped: masking, folds, prefetch tails).
Usage: sass_loop.py FILE.sass|FILE.cubin   (cubins need cuobjdump on PATH)"""
import collections
import re
import subprocess
import sys

INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)([^;]*);")


def parse(text):
    out = []
    for line in text.split("\n"):
        m = INSTRUCTION.search(line)
        if m:
            out.append((int(m.group(1), 16), m.group(3), m.group(4), m.group(2) or ""))
    return out


def main():
    path = sys.argv[1]
    text = open(path).read() if path.endswith(".sass") else subprocess.run(
        ["cuobjdump", "--dump-sass", path], capture_output=True, text=True).stdout
    code = parse(text)
    mma = [a for a, op, _, _ in code if "MMA" in op]
    loops = []
    for address, op, operands, _ in code:
        target = re.search(r"0x([0-9a-f]+)", operands)
        if op.startswith("BRA") and target and int(target.group(1), 16) < address:
            start = int(target.group(1), 16)
            if any(start <= a <= address for a in mma):
                loops.append((start, address))
    if not loops:
        print("no MMA loop found")
        return
    start, end = max(loops, key=lambda l: l[1] - l[0])
    body = [(a, op, operands, guard) for a, op, operands, guard in code if start <= a <= end]
    histogram = collections.Counter(op.split(".")[0] for _, op, _, _ in body)
    print(f"loop {start:#x}..{end:#x}: {len(body)} instructions, "
          f"{sum(1 for _, op, _, _ in body if 'MMA' in op)} MMA")
    print("  " + ", ".join(f"{op} {n}" for op, n in histogram.most_common(30)))
    for address, op, operands, guard in body:
        target = re.search(r"0x([0-9a-f]+)", operands)
        if op.startswith("BRA") and target and int(target.group(1), 16) > address:
            skipped = [o for a, o, _, _ in body if address < a < int(target.group(1), 16)]
            if len(skipped) > 8:
                print(f"  block {address:#x}->{target.group(1)} ({guard.strip() or 'always'}): "
                      f"{len(skipped)} instructions, {sum('MMA' in o for o in skipped)} MMA")


if __name__ == "__main__":
    main()
