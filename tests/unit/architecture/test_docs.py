"""The reference docs match the code: docs/ARCHITECTURE.md's module map names every module file,
and docs/CONFIG.md documents every config key (nothing is imported but the config classes).
"""

from __future__ import annotations

import re
from pathlib import Path

from precompute.config import LLM_LOCAL_KEYS, LLM_OWN_KEYS, SECTION_KEYS, SECTIONS
from precompute.model_config import ModelConfig
from sago_engine.types import AXES

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("sago_engine", "precompute", "dashboard", "pages")

#: Column where a map line's description starts; a name sits left of it, a continuation right of it.
DESCRIPTION_COLUMN = 16


def _code_blocks_by_heading(text: str) -> list[tuple[str, list[str]]]:
    """``(the heading above it, its lines)`` for every fenced code block of a markdown text."""
    out, heading, block = [], "", None
    for line in text.splitlines():
        if line.startswith("```"):
            if block is None:
                block = []
            else:
                out.append((heading, block))
                block = None
        elif block is not None:
            block.append(line)
        elif line.startswith("#"):
            heading = line
    return out


def map_entries(lines: list[str], root: str = "") -> set[str]:
    """Paths a module map names: one entry per line (a file, or a folder ending in ``/``) at an
    indentation of two spaces per folder level; lines indented past ``DESCRIPTION_COLUMN`` continue
    the description above. ``root``: the folder the map's top level sits in."""
    stack: list[str] = []
    out = set()
    for line in lines:
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent >= DESCRIPTION_COLUMN:
            continue
        name = line.split()[0]
        depth = indent // 2
        stack = stack[:depth]
        path = root + "".join(stack) + name
        out.add(path)
        if name.endswith("/"):
            stack.append(name)
    return out


def architecture_map() -> set[str]:
    """Every path docs/ARCHITECTURE.md's maps name: "Modules" from the repository root, the
    store package's map from ``sago_engine/store/``."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named: set[str] = set()
    for heading, lines in _code_blocks_by_heading(text):
        m = re.search(r"`([\w/]+/)`", heading)
        named |= map_entries(lines, m.group(1) if m else "")
    return named


def module_files() -> set[str]:
    """``app.py`` and every ``.py`` file of the four packages, relative to the repository root."""
    files = {"app.py"}
    for top in PACKAGES:
        files |= {p.relative_to(ROOT).as_posix() for p in (ROOT / top).rglob("*.py")}
    return files


def test_map_parser_reads_nesting_and_continuations():
    lines = ["a/                  the a package",
             "  b.py              one module",
             "                    its description, continued",
             "  c/                a sub-package",
             "    d.py            deeper",
             "  e.py              back one level",
             "f.py                top"]
    assert map_entries(lines) == {"a/", "a/b.py", "a/c/", "a/c/d.py", "a/e.py", "f.py"}
    assert map_entries(["x.py   a module"], "pkg/") == {"pkg/x.py"}


def test_every_module_is_in_the_architecture_map():
    """A package's ``__init__.py`` counts as described by its folder's line (the map's rule)."""
    named = architecture_map()
    missing = sorted(f for f in module_files() if f not in named
                     and not (f.endswith("/__init__.py") and f.removesuffix("__init__.py") in named))
    assert not missing, f"modules missing from docs/ARCHITECTURE.md's module map: {missing}"


def test_the_architecture_map_names_only_files_that_exist():
    gone = sorted(p for p in architecture_map() if not (ROOT / p).exists())
    assert not gone, f"docs/ARCHITECTURE.md's module map names files that do not exist: {gone}"


# ---------------------------------------------------------------------------- docs/CONFIG.md


def config_doc_keys(text: str) -> dict[str, set[str]]:
    """Section → the keys CONFIG.md's tables document under its heading (``## `[run]```; one
    heading may name two sections). A key is a backticked name in a row's first cell; a backticked
    section reference (```[[models]]```) is not a key."""
    out: dict[str, set[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("## "):
            current = [n.strip("[]") for n in re.findall(r"`(\[\[?\w+\]\]?)`", line)]
            for n in current:
                out.setdefault(n, set())
        elif current and line.startswith("|") and not re.match(r"\|\s*(key|-+)\s*\|", line):
            first = line.split("|")[1]
            for name in re.findall(r"`([^`]+)`", first):
                if not name.startswith("["):
                    for n in current:
                        out[n].add(name)
    return out


def config_keys() -> dict[str, set[str]]:
    """Section → the keys the config classes accept."""
    keys = {name: set(SECTION_KEYS.get(name, ())) for name in SECTIONS}
    keys["normalizers"] = set(AXES)
    keys["models"] = set(ModelConfig.__dataclass_fields__)
    keys["judge"] = keys["rewriter"] = set(LLM_OWN_KEYS) | set(LLM_LOCAL_KEYS)
    return keys


def test_config_doc_parser():
    text = ("## `[a]`\n| key | type |\n|---|---|\n| `x` | int |\n| `y`, `z` | str |\n"
            "## `[b]` and `[[c]]`\n| key | t |\n|---|---|\n| the keys of `[[a]]` | |\n| `w` | |\n## Other\n| `v` | |\n")
    assert config_doc_keys(text) == {"a": {"x", "y", "z"}, "b": {"w"}, "c": {"w"}}


def test_config_md_documents_every_config_key_and_no_other():
    """Every section and key ``load_config`` accepts is in docs/CONFIG.md, and it documents no other."""
    doc = config_doc_keys((ROOT / "docs" / "CONFIG.md").read_text(encoding="utf-8"))
    code = config_keys()
    assert set(doc) == set(code), f"sections: documented {sorted(doc)}, accepted {sorted(code)}"
    missing = {s: sorted(code[s] - doc[s]) for s in code if code[s] - doc[s]}
    extra = {s: sorted(doc[s] - code[s]) for s in code if doc[s] - code[s]}
    assert not missing, f"config keys missing from docs/CONFIG.md: {missing}"
    assert not extra, f"docs/CONFIG.md documents keys the config does not accept: {extra}"
