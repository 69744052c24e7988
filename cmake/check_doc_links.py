#!/usr/bin/env python3
"""Every relative link of README.md and of the pages under docs/, bench/, cache/, python/ and
templates/ reaches a file of the repository, and every #anchor a heading of the page it names
(GitHub's anchors: the heading in lower case, punctuation dropped, spaces as dashes). Links to
http(s) are not followed, nor links in code. Run by ctest (Docs.RelativeLinksResolve); exits 1
naming each broken link as FILE:LINE.

    python3 cmake/check_doc_links.py [REPO_DIR] [PAGE.md ...]
"""
import pathlib
import re
import sys

LINK = re.compile(r"\]\(([^()\s]+)\)")  # [text](target) and ![alt](target)
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
# The folders whose pages are checked besides README.md (not build trees or virtual environments).
DOC_FOLDERS = ["docs", "bench", "cache", "python", "templates"]


def prose_lines(path):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def anchor(heading):
    text = re.sub(r"[`*_]|<[^>]*>", "", heading).strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path):
    seen, result = {}, set()
    for _, line in prose_lines(path):
        match = HEADING.match(line)
        if match:
            name = anchor(match.group(1))
            count = seen.get(name, 0)
            seen[name] = count + 1
            result.add(name if count == 0 else f"{name}-{count}")
    return result


def broken_links(repo, page):
    for number, line in prose_lines(page):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z]+:", target):  # https:, mailto:
                continue
            path, _, fragment = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page.resolve()
            where = f"{page.relative_to(repo)}:{number}: {target}"
            if repo.resolve() not in resolved.parents and resolved != repo.resolve():
                yield f"{where} points outside the repository"
            elif not resolved.exists():
                yield f"{where} names no file"
            elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
                yield f"{where} names no heading of {resolved.relative_to(repo.resolve())}"


def main():
    repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    pages = [repo / name for name in sys.argv[2:]] or [
        repo / "README.md", *(page for folder in DOC_FOLDERS
                              for page in sorted((repo / folder).rglob("*.md")))]
    broken = [problem for page in pages for problem in broken_links(repo, page)]
    for problem in broken:
        print(problem)
    print(f"{len(pages)} pages, {len(broken)} broken links")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
