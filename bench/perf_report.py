"""Reads `perf report --stdio` files (written by crates/sqsafe-bench's profile runs) for bench/render.py."""

import re
from pathlib import Path


def profile_groups(profile):
    groups = {}
    for pct, fields in parse_perf(profile["reports"]["by_symbol"]):
        key = crate_of(fields[0], fields[1] if len(fields) > 1 else "")
        groups[key] = groups.get(key, 0.0) + pct
    return groups


STD_SEGMENTS = {
    "core", "alloc", "std", "ptr", "mem", "fmt", "str", "slice", "vec", "string", "collections", "hash", "iter",
    "sync", "ops", "option", "result", "num", "cell", "rc", "boxed", "raw_vec", "any", "future", "task", "pin",
    "time", "io", "os", "sys", "thread", "panicking", "char", "array", "cmp", "clone", "default", "convert",
    "marker", "impl", "drop_in_place",
}


def crate_of(dso, symbol):
    """The group of a sampled symbol: the kernel, a shared library, or the first crate of its Rust path."""
    if dso.startswith("[kernel"):
        return "kernel"
    if ".so" in dso:
        return dso.split(".so")[0]
    name = symbol.split("] ", 1)[-1]
    for segment in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)::", name):
        if segment not in STD_SEGMENTS and not segment[0].isupper():
            return segment
    if name.startswith("ring_core") or "ring_" in name[:12]:
        return "ring"
    for segment in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)::", name):
        return f"std ({segment})"
    return "other (no Rust path)"


def parse_perf(path):
    """`perf report --stdio` lines: (percent, [column, ...]) in the report's order."""
    rows = []
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return rows
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or "%" not in stripped.split()[0]:
            continue
        pct_text, _, rest = stripped.partition("%")
        try:
            pct = float(pct_text)
        except ValueError:
            continue
        rows.append((pct, [c.strip() for c in re.split(r"\s{2,}", rest.strip()) if c.strip()]))
    return rows
