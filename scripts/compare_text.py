#!/usr/bin/env python3
"""Compares the machine code of two kernel caches or bundles (`intfa precompile --out DIR`, or an
INTFA_CACHE_DIR): for every kernel both hold (matched by the sidecar's spec_text), the bytes of each
ELF section whose name starts with .text (one per kernel function). A change that must not touch
the kernels' code (a compile option, an include, a refactor) is checked by precompiling the same
kernels before and after into two folders and running this; it prints the kernels compared, those
whose .text differs (with the sections), and those only one side holds, and exits 1 if any
differs or none was compared.

usage: python3 scripts/compare_text.py BEFORE_DIR AFTER_DIR
"""
import glob
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dump_sass import cubin_of  # noqa: E402  (the cubin inside a cache entry)


def text_sections(elf):
    """{section name: bytes} of an ELF64 little-endian image's .text* sections."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ValueError("not an ELF64 little-endian image")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = []
    for index in range(shnum):
        name, kind, _flags, _addr, offset, size = struct.unpack_from(
            "<IIQQQQ", elf, shoff + index * shentsize)
        headers.append((name, kind, offset, size))
    names_offset = headers[shstrndx][2]
    sections = {}
    for name, kind, offset, size in headers:
        end = elf.index(b"\0", names_offset + name)
        section_name = elf[names_offset + name:end].decode()
        if section_name.startswith(".text"):
            sections[section_name] = bytes(elf[offset:offset + size]) if kind != 8 else b""
    return sections


def kernels(directory):
    """{spec_text: {section: bytes}} for every entry with a sidecar under `directory`."""
    found = {}
    for sidecar in glob.glob(os.path.join(directory, "*", "*.json")):
        entry = sidecar[:-len(".json")] + ".cubin"
        if not os.path.exists(entry):
            continue
        spec = json.load(open(sidecar)).get("spec_text") or os.path.basename(entry)
        found[spec] = text_sections(cubin_of(entry))
    return found


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    before, after = kernels(sys.argv[1]), kernels(sys.argv[2])
    common = sorted(set(before) & set(after))
    differing = []
    for spec in common:
        a, b = before[spec], after[spec]
        if a != b:
            names = sorted(name for name in set(a) | set(b) if a.get(name) != b.get(name))
            differing.append((spec, names))
    only = sorted(set(before) ^ set(after))
    print(f"{len(common)} kernels in both, {sum(len(before[s]) for s in common)} .text sections: "
          f"{len(common) - len(differing)} identical, {len(differing)} differ; "
          f"{len(only)} only in one folder")
    for spec, names in differing:
        print(f"  differs: {spec}: {', '.join(names)}")
    for spec in only:
        print(f"  only in {'before' if spec in before else 'after'}: {spec}")
    return 1 if differing or not common else 0


if __name__ == "__main__":
    sys.exit(main())
