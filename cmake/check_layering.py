#!/usr/bin/env python3
"""The stages of src/ and the rules between them: a file includes headers of its own stage or of
stages below it, never above (docs/layout.md says what each stage holds), and the JIT core
(nvrtc, cache, launch) includes no kernel family's spec. Run by ctest
(Layering.IncludesPointDown); exits 1 naming every include that points up.

    python3 cmake/check_layering.py [SRC_DIR]
"""
import pathlib
import re
import sys

# Lowest first. Stages on one line are one level: they may include each other's headers.
STAGES = [
    ["common", "numerics"],  # errors, JSON, files, env; the numerics options and their tables
    ["device"],  # the driver, arch detection, device memory
    ["render"],  # instantiation units, the template set, KernelSource (what the JIT core takes)
    ["nvrtc"],  # compiling a unit
    ["cache"],  # cache keys, the disk cache, deployment bundles
    ["launch"],  # loaded kernels and launches: the JIT core ends here
    ["families"],  # each family's host file (its spec, instantiation, checks, params), AnySpec
    ["spec"],  # from a problem to the specs that serve it, the heuristics
    ["tune"],  # the tuning database and the tuner
    ["quantize"],  # the quantize API
    ["attention"],  # the attention API (quantizes through quantize/, configs through tune/)
    ["decode"],  # the paged KV-cache API
    ["api", "capi"],  # ahead-of-time lists, precompile, runtime info; the C API
]
LEVEL = {stage: level for level, names in enumerate(STAGES) for stage in names}
# The JIT core compiles, caches and loads what a family renders (render/kernel_source.hpp) and
# knows no family: of render/ it includes only these, never a family's spec.
FAMILY_FREE = ["nvrtc", "cache", "launch"]
FAMILY_FREE_RENDER = {"render/kernel_source.hpp", "render/template_set.hpp"}
# Any spelling the preprocessor takes: "x" or <x>, with or without space after include.
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def main():
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent / "src")
    problems = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".hpp", ".cpp", ".h") or not path.is_file():
            continue
        stage = path.relative_to(src).parts[0]
        if stage not in LEVEL:
            problems.append(f"{path}: src/{stage}/ is not a stage of {__file__}")
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = match.group(1)
            # A path relative to the including file ("../attention/x.hpp") is found there first,
            # as the preprocessor finds a quoted include; else under src/ (the include path).
            beside = (path.parent / target).resolve()
            if beside.is_file() and src.resolve() in beside.parents:
                resolved = beside.relative_to(src.resolve())
            elif (src / target).is_file():
                resolved = pathlib.Path(target)
            else:
                continue  # templates/, include/ and system headers: below every stage
            included_stage = resolved.parts[0]
            if included_stage not in LEVEL:
                continue
            if LEVEL[included_stage] > LEVEL[stage]:
                problems.append(f"{path}:{number}: src/{stage}/ includes \"{target}\", a stage above it")
            elif (stage in FAMILY_FREE and included_stage == "render"
                  and resolved.as_posix() not in FAMILY_FREE_RENDER):
                problems.append(f"{path}:{number}: src/{stage}/ includes \"{target}\", but the JIT "
                                f"core knows no kernel family (of render/ only "
                                f"{', '.join(sorted(FAMILY_FREE_RENDER))})")
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} include(s) break the layering; the stages, lowest first: "
              + " < ".join("/".join(names) for names in STAGES))
        return 1
    print("every include of src/ points to its own stage or one below")
    return 0


if __name__ == "__main__":
    sys.exit(main())
