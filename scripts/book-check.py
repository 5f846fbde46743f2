#!/usr/bin/env python3
"""Checks the links of README.md and of the book (book/src/*.md), offline. Python 3.11 standard library only.

    python3 scripts/book-check.py                 check this repository (make book and make test run it)
    python3 scripts/book-check.py --html DIR      also check each chapter-to-chapter #anchor against the ids of the
                                                  pages mdBook built into DIR (book/book): the slugs below are what
                                                  mdBook really generated
    python3 scripts/book-check.py --self-test     build a broken book in a temporary folder and require that every
                                                  kind of break below is reported

What it checks, in README.md and every .md file under book/src:
- every relative link (`[text](path)`, `[text](path#anchor)`, `[ref]: path`, `<a href="path">`) names a file or
  folder of the repository; absolute paths (`/x`) are refused; a chapter links other .md files of the repository by
  their folder (mdBook rewrites every `x.md` link to `x.html`, which exists only for chapters; book/book/ sits two
  levels down like book/src/, so `../../crates/sqsafe/` works from the source and from the built pages);
- every `#anchor` (in the same file or in another .md file) is the GitHub/mdBook slug of a heading of the target, or
  an explicit `id="..."` there;
- every `{{#include path}}` / `{{#include path:anchor}}` (and `#rustdoc_include`) names an existing file and, for a
  named anchor, a file with `ANCHOR: anchor` and `ANCHOR_END: anchor`;
- every chapter file under book/src is listed in book/src/SUMMARY.md, and every entry of SUMMARY.md exists;
- no ```rust block is left uncompiled: a file with a Rust block is named by an `include_str!` in
  crates/sqsafe/src/lib.rs (its doctests), unless the block is only `{{#include ...}}` lines (code from tested files);
  in a file compiled that way, a fence without a language is reported too (rustdoc would compile it as Rust).
External http(s) links are not fetched (no network): they are listed. Each broken link is reported as
file:line: reason, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import html
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCTEST_HOST = Path("crates/sqsafe/src/lib.rs")

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HREF = re.compile(r"""<a\s[^>]*href\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
EXPLICIT_ID = re.compile(r"""\bid\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
INCLUDE = re.compile(r"\{\{#(include|rustdoc_include)\s+([^}\s]+)\s*\}\}")
INCLUDE_STR = re.compile(r'include_str!\(\s*"([^"]+)"\s*\)')
CODE_SPAN = re.compile(r"(`+)((?:(?!\n[ \t]*\n).)+?)\1", re.DOTALL)


@dataclass
class Report:
    root: Path
    errors: list[str] = field(default_factory=list)
    external: list[str] = field(default_factory=list)

    def error(self, path: Path, line: int, reason: str) -> None:
        self.errors.append(f"{self.rel(path)}:{line}: {reason}")

    def rel(self, path: Path) -> str:
        try:
            return str(path.resolve().relative_to(self.root.resolve()))
        except ValueError:
            return str(path)


def slug(text: str) -> str:
    """A heading's anchor as GitHub and mdBook make it: markup dropped, lower case, letters, digits, `-` and `_`
    kept, spaces as `-`, everything else dropped."""
    text = CODE_SPAN.sub(lambda m: m.group(2), text)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = html.unescape(text).replace("*", "")
    out = []
    for ch in text.strip().lower():
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


@dataclass
class Line:
    number: int
    text: str


@dataclass
class CodeBlock:
    start: int
    info: str
    body: list[str]


@dataclass
class Markdown:
    """A file split into prose lines (code blocks removed) and its code blocks."""

    prose: list[Line]
    blocks: list[CodeBlock]

    @staticmethod
    def parse(text: str) -> Markdown:
        prose: list[Line] = []
        blocks: list[CodeBlock] = []
        fence: str | None = None
        for number, line in enumerate(text.splitlines(), start=1):
            match = FENCE.match(line)
            if fence is None:
                if match:
                    fence = match.group(2)
                    blocks.append(CodeBlock(number, match.group(3).strip(), []))
                else:
                    prose.append(Line(number, line))
            elif match and match.group(2).startswith(fence) and not match.group(3).strip():
                fence = None
            else:
                blocks[-1].body.append(line)
        return Markdown(prose, blocks)

    def anchors(self) -> set[str]:
        """The heading slugs (duplicates numbered -1, -2, as GitHub and mdBook do) and explicit ids."""
        seen: dict[str, int] = {}
        anchors: set[str] = set()
        for line in self.prose:
            heading = HEADING.match(line.text)
            if heading:
                base = slug(heading.group(2))
                count = seen.get(base, 0)
                seen[base] = count + 1
                anchors.add(base if count == 0 else f"{base}-{count}")
            anchors.update(EXPLICIT_ID.findall(line.text))
        return anchors


def language(info: str) -> str:
    return re.split(r"[,\s{]", info, maxsplit=1)[0].strip().lower() if info else ""


def links_of(prose: list[Line]) -> list[tuple[int, str]]:
    """(line, target) of every link in the prose; a link's text may run over several lines."""
    if not prose:
        return []
    numbered = [""] * prose[-1].number
    for line in prose:
        numbered[line.number - 1] = line.text
    # Code spans are blanked (their newlines kept, so that line numbers stay true): nothing in them is a link.
    text = CODE_SPAN.sub(lambda m: "\n" * m.group(0).count("\n"), "\n".join(numbered))
    found = [(text.count("\n", 0, m.start(3)) + 1, m.group(3)) for m in INLINE_LINK.finditer(text)]
    found += [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in HREF.finditer(text)]
    for number, line in enumerate(text.split("\n"), start=1):
        definition = REFERENCE_DEF.match(line)
        if definition:
            found.append((number, definition.group(1)))
    return sorted(found)


class Checker:
    def __init__(self, root: Path, html_dir: Path | None = None):
        self.root = root.resolve()
        self.book_src = self.root / "book" / "src"
        self.html_dir = html_dir
        self.report = Report(self.root)
        self._parsed: dict[Path, Markdown] = {}

    def markdown(self, path: Path) -> Markdown:
        path = path.resolve()
        if path not in self._parsed:
            self._parsed[path] = Markdown.parse(path.read_text(encoding="utf-8"))
        return self._parsed[path]

    def files(self) -> list[Path]:
        files = [self.root / "README.md"] if (self.root / "README.md").is_file() else []
        if self.book_src.is_dir():
            files += sorted(self.book_src.rglob("*.md"))
        return files

    def run(self) -> Report:
        compiled = self.doctest_files()
        for path in self.files():
            self.check_links(path)
            self.check_includes(path)
            self.check_rust(path, compiled)
        self.check_summary()
        return self.report

    # -- links ---------------------------------------------------------------------------------------------------

    def check_links(self, path: Path) -> None:
        if path.resolve() == (self.book_src / "SUMMARY.md").resolve():
            return  # its entries are chapters: check_summary
        for number, target in links_of(self.markdown(path).prose):
            self.check_link(path, number, target)

    def check_link(self, path: Path, number: int, target: str) -> None:
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
            if target.lower().startswith(("http://", "https://")):
                self.report.external.append(f"{self.report.rel(path)}:{number}: {target}")
            return
        if target.startswith("/"):
            self.report.error(path, number, f"absolute link {target!r}: use a path relative to this file")
            return
        file_part, _, anchor = target.partition("#")
        file_part = file_part.split("?", 1)[0]
        resolved = (path.parent / file_part).resolve() if file_part else path.resolve()
        try:
            resolved.relative_to(self.root)
        except ValueError:
            self.report.error(path, number, f"link {target!r} leaves the repository")
            return
        if not resolved.exists():
            self.report.error(path, number, f"broken link {target!r}: {self.report.rel(resolved)} does not exist")
            return
        if self.in_book(path) and resolved.suffix == ".md" and not self.in_book(resolved):
            self.report.error(
                path,
                number,
                f"link {target!r}: mdBook turns a link to a .md file into one to .html, which exists only for the "
                f"book's own chapters: link the folder instead (the forge shows its README)",
            )
            return
        if not anchor:
            return
        if resolved.is_file() and resolved.suffix == ".md":
            if anchor not in self.markdown(resolved).anchors():
                self.report.error(
                    path,
                    number,
                    f"broken anchor {target!r}: no heading of {self.report.rel(resolved)} has the slug {anchor!r}",
                )
            elif self.html_dir is not None:
                self.check_built_anchor(path, number, target, resolved, anchor)

    def check_built_anchor(self, path: Path, number: int, target: str, resolved: Path, anchor: str) -> None:
        """Within the book: the anchor must be an id of the page mdBook built for the target chapter."""
        try:
            chapter = resolved.relative_to(self.book_src.resolve())
        except ValueError:
            return
        if chapter.name == "SUMMARY.md":
            return
        page = self.html_dir / chapter.with_suffix(".html")
        if not page.is_file():
            self.report.error(path, number, f"{target!r}: mdBook built no page {self.report.rel(page)}")
            return
        ids = set(EXPLICIT_ID.findall(page.read_text(encoding="utf-8")))
        if anchor not in ids:
            self.report.error(path, number, f"broken anchor {target!r}: the built page {page.name} has no id {anchor!r}")

    def in_book(self, path: Path) -> bool:
        return path.resolve().is_relative_to(self.book_src.resolve())

    # -- includes ------------------------------------------------------------------------------------------------

    def check_includes(self, path: Path) -> None:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for _, spec in INCLUDE.findall(line):
                self.check_include(path, number, spec)

    def check_include(self, path: Path, number: int, spec: str) -> None:
        file_part, _, anchor = spec.partition(":")
        included = (path.parent / file_part).resolve()
        if not included.is_file():
            self.report.error(path, number, f"{{{{#include {spec}}}}}: {self.report.rel(included)} does not exist")
            return
        if anchor and not re.fullmatch(r"\d*(:\d*)?", anchor):
            text = included.read_text(encoding="utf-8")
            if not re.search(rf"ANCHOR:\s*{re.escape(anchor)}\b", text) or not re.search(
                rf"ANCHOR_END:\s*{re.escape(anchor)}\b", text
            ):
                self.report.error(
                    path,
                    number,
                    f"{{{{#include {spec}}}}}: {self.report.rel(included)} has no ANCHOR / ANCHOR_END {anchor!r}",
                )

    # -- SUMMARY.md ----------------------------------------------------------------------------------------------

    def check_summary(self) -> None:
        summary = self.book_src / "SUMMARY.md"
        if not self.book_src.is_dir():
            return
        if not summary.is_file():
            self.report.error(summary, 1, "book/src/SUMMARY.md is missing")
            return
        listed: set[Path] = set()
        for line in self.markdown(summary).prose:
            for match in INLINE_LINK.finditer(line.text):
                target = match.group(3)
                if not target:
                    self.report.error(summary, line.number, f"entry {match.group(2)!r} has no file (a draft chapter)")
                    continue
                chapter = (self.book_src / target.partition("#")[0]).resolve()
                listed.add(chapter)
                if not chapter.is_file():
                    self.report.error(summary, line.number, f"chapter {target!r} is listed but does not exist")
        for chapter in sorted(self.book_src.rglob("*.md")):
            if chapter.name != "SUMMARY.md" and chapter.resolve() not in listed:
                self.report.error(chapter, 1, "chapter not listed in book/src/SUMMARY.md (mdBook would not build it)")

    # -- Rust blocks ---------------------------------------------------------------------------------------------

    def doctest_files(self) -> set[Path]:
        host = self.root / DOCTEST_HOST
        if not host.is_file():
            return set()
        return {(host.parent / name).resolve() for name in INCLUDE_STR.findall(host.read_text(encoding="utf-8"))}

    def check_rust(self, path: Path, compiled: set[Path]) -> None:
        doc_included = path.resolve() in compiled
        for block in self.markdown(path).blocks:
            lang = language(block.info)
            if lang == "rust":
                code = [line for line in block.body if line.strip()]
                from_file = bool(code) and all(INCLUDE.fullmatch(line.strip()) for line in code)
                if not from_file and not doc_included:
                    self.report.error(
                        path,
                        block.start,
                        f"a rust block that nothing compiles: name {self.report.rel(path)} in an include_str! of "
                        f"{DOCTEST_HOST} (a doctest) or include its code from a tested file ({{{{#include ...}}}})",
                    )
            elif lang == "" and doc_included:
                self.report.error(
                    path,
                    block.start,
                    "a code block without a language in a file compiled as doctests: rustdoc would compile it as "
                    "Rust (write ```text, ```sh, ...)",
                )


def print_report(report: Report) -> int:
    if report.external:
        print(f"external links, not fetched ({len(report.external)}):")
        for line in report.external:
            print(f"  {line}")
    for line in report.errors:
        print(line, file=sys.stderr)
    if report.errors:
        print(f"book-check: {len(report.errors)} broken", file=sys.stderr)
        return 1
    print("book-check: every relative link, anchor, include, SUMMARY entry and Rust block is in order")
    return 0


# -- self-test ---------------------------------------------------------------------------------------------------

SELF_TEST_FILES = {
    "README.md": "# Project\n\nSee [the guide](book/src/guide.md#getting-started) and [gone](docs/gone.md).\n",
    "crates/sqsafe/src/lib.rs": '#[cfg(doctest)]\n#[doc = include_str!("../../../book/src/guide.md")]\nstruct Guide;\n',
    "src/example.rs": "// ANCHOR: main\nfn main() {}\n// ANCHOR_END: main\n",
    "book/src/SUMMARY.md": "# Summary\n\n- [Guide](guide.md)\n- [Extra](extra.md)\n- [Gone](gone-chapter.md)\n",
    "book/src/guide.md": (
        "# Guide\n\n## Getting started\n\n```rust\nfn compiled_by_the_doctest() {}\n```\n\n"
        "Good: [extra](extra.md#the-extra-part), [code](../../src/example.rs), [web](https://example.com).\n"
        "Broken anchor: [extra](extra.md#no-such-heading). Same file: [here](#getting-started), [not](#nowhere).\n"
        "A link over [two\nlines](extra.md#the-extra-part-2), [the second](extra.md#the-extra-part-1), `[code](nowhere.md)`.\n"
    ),
    "book/src/extra.md": (
        "# Extra\n\n## The extra part\n\n```rust\nfn nothing_compiles_this() {}\n```\n\n"
        "```rust\n{{#include ../../src/example.rs:main}}\n```\n\n"
        "```rust\n{{#include ../../src/example.rs:missing}}\n```\n\n"
        "Broken link: [file](../../src/nothing.rs).\n\n## The extra part\n\n"
        "The [project README](../../README.md) by its file; [by its folder](../../) is fine.\n"
    ),
    "book/src/orphan.md": "# Orphan\n\nIn no SUMMARY.\n",
}

SELF_TEST_EXPECTED = [
    ("README.md:3", "broken link 'docs/gone.md'"),
    ("book/src/guide.md:10", "broken anchor 'extra.md#no-such-heading'"),
    ("book/src/guide.md:10", "broken anchor '#nowhere'"),
    ("book/src/guide.md:12", "broken anchor 'extra.md#the-extra-part-2'"),
    ("book/src/extra.md:5", "a rust block that nothing compiles"),
    ("book/src/extra.md:14", "has no ANCHOR / ANCHOR_END 'missing'"),
    ("book/src/extra.md:17", "broken link '../../src/nothing.rs'"),
    ("book/src/extra.md:21", "mdBook turns a link to a .md file into one to .html"),
    ("book/src/orphan.md:1", "chapter not listed in book/src/SUMMARY.md"),
    ("book/src/SUMMARY.md:5", "chapter 'gone-chapter.md' is listed but does not exist"),
]


def self_test() -> int:
    with tempfile.TemporaryDirectory(prefix="book-check-") as tmp:
        root = Path(tmp)
        for name, text in SELF_TEST_FILES.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, encoding="utf-8")
        report = Checker(root).run()
    print("self-test: a book with broken links, broken anchors (one in a link over two lines), a missing chapter, a")
    print("chapter not in SUMMARY.md, an uncompiled rust block, a broken include anchor and a chapter's link to a .md")
    print("file outside the book; book-check reports:")
    for line in report.errors:
        print(f"  {line}")
    failures = []
    for location, reason in SELF_TEST_EXPECTED:
        if not any(line.startswith(location + ":") and reason in line for line in report.errors):
            failures.append(f"not reported: {location}: {reason}")
    expected_count = len(SELF_TEST_EXPECTED)
    if len(report.errors) != expected_count:
        failures.append(f"{len(report.errors)} reports, expected {expected_count} (the good links must pass)")
    if report.external != ["book/src/guide.md:9: https://example.com"]:
        failures.append(f"external links listed: {report.external}")
    for failure in failures:
        print(f"self-test FAILED: {failure}", file=sys.stderr)
    if failures:
        return 1
    print(f"self-test passed: each of the {expected_count} breaks reported, the good links and blocks accepted")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--self-test", action="store_true", help="check that every kind of break is reported")
    parser.add_argument("--html", type=Path, help="the folder mdBook built (book/book): check anchors against it")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    return print_report(Checker(args.root, args.html.resolve() if args.html else None).run())


if __name__ == "__main__":
    sys.exit(main())
