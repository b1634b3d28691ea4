#!/usr/bin/env python3
"""Every relative link of the documentation resolves.

Reads README.md, docs/*.md, deploy/README.md and bench/results/*.md; for
each Markdown link or image outside code (inline `[text](target)` and
reference definitions `[name]: target`) whose target is relative, checks
that the file or folder exists, and for `page.md#anchor` (or `#anchor` in
the same page) that the page has a heading with that anchor, as GitHub
makes them (lower case, punctuation dropped, spaces to hyphens, "-1", "-2"
for repeats). Links to other sites are not fetched. Prints every broken
link, file and line; exit 1 when there is one.

    python3 tests/docs/links_test.py REPOSITORY_ROOT
"""

import pathlib
import re
import sys

INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def pages(root):
    """The documentation files, relative to `root`."""
    found = [root / "README.md", root / "deploy" / "README.md"]
    found += sorted((root / "docs").glob("*.md"))
    found += sorted((root / "bench" / "results").glob("*.md"))
    return [page for page in found if page.is_file()]


def prose_lines(text):
    """(line number, line) of `text` outside fenced code blocks, with inline
    code spans blanked."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        marker = re.match(r"(`{3,}|~{3,})", stripped)
        if marker:
            if fence is None:
                fence = marker.group(1)[0] * len(marker.group(1))
                continue
            if stripped.startswith(fence):
                fence = None
                continue
        if fence is None:
            yield number, re.sub(r"(`+)(?:(?!\1).)+?\1", lambda m: " " * len(m.group(0)), line)


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # A link keeps its text.
    text = text.strip().lower()
    kept = "".join(c for c in text if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def anchors(page):
    """Every anchor of `page`'s headings (and explicit id/name attributes)."""
    seen = {}
    result = set()
    fence = None
    for line in page.read_text(errors="replace").splitlines():
        stripped = line.lstrip()
        marker = re.match(r"(`{3,}|~{3,})", stripped)
        if marker:
            fence = None if fence else marker.group(1)
            continue
        if fence:
            continue
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            result.add(base if count == 0 else f"{base}-{count}")
        for explicit in re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line):
            result.add(explicit)
    return result


def check(root):
    """(links checked, broken links) of the documentation under `root`."""
    cache = {}
    broken = []
    checked = 0
    for page in pages(root):
        relative = page.relative_to(root).as_posix()
        for number, line in prose_lines(page.read_text(errors="replace")):
            targets = [m.group(1) for m in INLINE.finditer(line)]
            reference = REFERENCE.match(line)
            if reference:
                targets.append(reference.group(1))
            for target in targets:
                if EXTERNAL.match(target):
                    continue
                checked += 1
                path, _, anchor = target.partition("#")
                resolved = (page.parent / path).resolve() if path else page
                where = f"{relative}:{number}: {target}"
                if not resolved.exists():
                    broken.append(f"{where}: no such file")
                    continue
                if not anchor or resolved.suffix != ".md":
                    continue
                if resolved not in cache:
                    cache[resolved] = anchors(resolved)
                if anchor not in cache[resolved]:
                    broken.append(f"{where}: no heading with anchor #{anchor}")
    return checked, broken


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    checked, broken = check(root)
    if checked < 50:
        sys.exit(f"links_test: found only {checked} links; is {root} the repository?")
    for failure in broken:
        print(failure)
    print(f"links_test: {checked} links, {len(broken)} broken")
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
