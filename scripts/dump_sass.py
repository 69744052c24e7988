#!/usr/bin/env python3
"""Extracts the cubins of attention kernels from an intfa cache directory (format: cache/README.md)
and writes each one's SASS (cuobjdump --dump-sass) plus an instruction histogram of its hottest
loop region to OUT_DIR. Usage: dump_sass.py CACHE_DIR OUT_DIR [substring of the spec to select]"""
import collections
import glob
import json
import os
import re
import struct
import subprocess
import sys


def cubin_of(entry_path):
    """The cubin inside a cache entry (cache/README.md, "Entry format")."""
    data = open(entry_path, "rb").read()
    header_size, = struct.unpack_from("<I", data, 12)
    name_length, = struct.unpack_from("<I", data, 40)
    cubin_size, = struct.unpack_from("<Q", data, 48)
    start = header_size + name_length
    return data[start:start + cubin_size]


def main():
    cache_dir, out_dir = sys.argv[1], sys.argv[2]
    wanted = sys.argv[3] if len(sys.argv) > 3 else "attention"
    os.makedirs(out_dir, exist_ok=True)
    report = []
    for sidecar in sorted(glob.glob(os.path.join(cache_dir, "*", "*.json"))):
        spec_text = json.load(open(sidecar)).get("spec_text", "")
        if wanted not in spec_text:
            continue
        cubin_path = os.path.join(out_dir, "kernel.cubin")
        open(cubin_path, "wb").write(cubin_of(sidecar[:-5] + ".cubin"))
        sass = subprocess.run(["cuobjdump", "--dump-sass", cubin_path], capture_output=True,
                              text=True).stdout
        opcodes = collections.Counter(
            m.group(1).split(".")[0]
            for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass))
        report.append(f"{spec_text}\n  total {sum(opcodes.values())}: " +
                      ", ".join(f"{op} {n}" for op, n in opcodes.most_common(24)))
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", spec_text)[:80]
        open(os.path.join(out_dir, safe + ".sass"), "w").write(sass)
    open(os.path.join(out_dir, "sass_summary.txt"), "w").write("\n".join(report) + "\n")
    print("\n".join(report))


if __name__ == "__main__":
    main()
