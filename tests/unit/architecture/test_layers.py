"""Layers that only look down: the import graph of sago's own modules has no cycle and no upward edge.

Every module of ``sago_engine/``, ``precompute/``, ``dashboard/``, ``pages/`` and ``app.py`` is
parsed with ``ast`` (nothing is imported); every ``import`` / ``from … import`` counts, at the top
of a module, inside a function or under ``if TYPE_CHECKING``. ``LAYERS`` is the table of
docs/ARCHITECTURE.md ("Layers"): a module may import modules of its own layer or of a lower one.
An import under ``if TYPE_CHECKING`` (a name for an annotation, never executed) counts for the
layers and for cycles alike: a module that needs another's type for an annotation depends on it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("sago_engine", "precompute", "dashboard", "pages")

#: Layers from the bottom up: (name, module prefixes). A prefix names a module or a package
#: and everything below it (``name$``: that module alone); the longest matching prefix decides.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("runtime", ("sago_engine.runtime",)),
    ("core records", (
        "sago_engine$", "sago_engine.registry", "sago_engine.seeds", "sago_engine.axis_spec", "sago_engine.types",
        "sago_engine.pricing", "sago_engine.filters", "sago_engine.datasets", "sago_engine.runrecord",
        "sago_engine.replytext", "sago_engine.textsafe", "sago_engine.untrusted_files", "sago_engine.envcheck",
        "sago_engine.sources")),
    ("zoo", ("sago_engine.models",)),
    ("math", ("sago_engine.scoring",)),
    ("axes, variants", ("sago_engine.axes", "sago_engine.variants")),
    ("store", ("sago_engine.store",)),
    ("backends", ("sago_engine.backends",)),
    ("measurement", ("sago_engine.measure",)),
    ("external results", ("sago_engine.external",)),
    ("views, verifier", ("sago_engine.views", "sago_engine.verify", "sago_engine.correctness")),
    ("live", ("sago_engine.live",)),
    ("front ends", ("precompute", "dashboard")),
    ("pages", ("pages", "app")),
)

#: Edges the layer table would allow that a module must still not have: (importer prefix,
#: imported prefix, why).
FORBIDDEN: tuple[tuple[str, str, str], ...] = (
    ("sago_engine.backends.caching", "sago_engine.store",
     "the reply-cache wrapper gets a ReplyCache object; it never opens the store's table itself"),
)


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted module name → (file, is a package's __init__)."""
    mods: dict[str, tuple[Path, bool]] = {"app": (ROOT / "app.py", False)}
    for top in PACKAGES:
        for p in sorted((ROOT / top).rglob("*.py")):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            mods[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return mods


def _targets(mod: str, is_pkg: bool, node: ast.Import | ast.ImportFrom, mods) -> list[str]:
    """The sago modules an import statement loads: ``from P import name`` is the module ``P.name``
    when that is a module, else ``P``; a name outside sago is dropped."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = mod.split(".") if is_pkg else mod.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            pkg = ".".join(base + ([node.module] if node.module else []))
        else:
            pkg = node.module or ""
        names = [f"{pkg}.{a.name}" if f"{pkg}.{a.name}" in mods else pkg for a in node.names]
    out = []
    for t in names:
        while t and t not in mods:  # ``import a.b.c`` of a sago module, or a name defined in a module
            t = t.rpartition(".")[0]
        if t and t != mod:
            out.append(t)
    return out


def _is_type_checking(node: ast.AST) -> bool:
    t = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING")
        or (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST, runtime_only: bool):
    """Every import node of ``tree``; with ``runtime_only``, none under ``if TYPE_CHECKING``."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        if runtime_only and _is_type_checking(node):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def import_graph(runtime_only: bool = False) -> dict[str, dict[str, int]]:
    """Importer → {imported module: line of the first such import}, over every sago module;
    ``runtime_only`` leaves out imports under ``if TYPE_CHECKING``."""
    mods = _modules()
    graph: dict[str, dict[str, int]] = {m: {} for m in mods}
    for m, (path, is_pkg) in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _imports(tree, runtime_only):
            for t in _targets(m, is_pkg, node, mods):
                graph[m].setdefault(t, node.lineno)
    return graph


def layer_of(module: str) -> int | None:
    """Index in ``LAYERS`` of the longest prefix matching ``module``; None when no prefix does."""
    best, idx = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            exact = p.endswith("$")
            p = p.rstrip("$")
            if (module == p or (not exact and module.startswith(p + "."))) and len(p) > best:
                best, idx = len(p), i
    return idx


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph[w])))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


GRAPH = import_graph()
RUNTIME_GRAPH = import_graph(runtime_only=True)


def test_the_graph_sees_imports_at_the_top_and_inside_functions():
    """The parser finds what the modules import, top-level and lazy, relative and absolute."""
    assert "sago_engine.scoring.scores" in GRAPH["sago_engine.store.suffstats"]  # absolute, top of module
    assert "sago_engine.store.sidecar.reply_cache" in GRAPH["sago_engine.backends.base"]  # relative, inside a function
    assert "sago_engine.models.bertscore" in GRAPH["sago_engine.variants.semantic_filter"]  # ``from .. import bertscore``
    assert "sago_engine.store" in GRAPH["pages.profiles"]
    assert len(GRAPH) > 100 and sum(map(len, GRAPH.values())) > 300


def test_every_module_has_a_layer():
    """A new module is placed in ``LAYERS`` (and docs/ARCHITECTURE.md "Layers") deliberately."""
    missing = sorted(m for m in GRAPH if layer_of(m) is None)
    assert not missing, f"modules without a layer in tests/unit/architecture/test_layers.py LAYERS: {missing}"


def test_every_layer_prefix_names_a_module():
    """A prefix of ``LAYERS`` that names no module (one renamed or removed) would place nothing."""
    stale = [p for _, prefixes in LAYERS for p in prefixes
             if not any(m == p.rstrip("$") or m.startswith(p.rstrip("$") + ".") for m in GRAPH)]
    assert not stale, f"LAYERS prefixes that name no module: {stale}"


def test_the_graph_sees_type_only_imports():
    """An import under ``if TYPE_CHECKING`` is in the graph (and so in the cycle check), not in the runtime graph."""
    assert "sago_engine.filters" in GRAPH["sago_engine.store.reads.where"]  # under ``if TYPE_CHECKING``
    assert "sago_engine.filters" not in RUNTIME_GRAPH["sago_engine.store.reads.where"]


def test_no_import_cycle():
    """No cycle, counting imports under ``if TYPE_CHECKING`` too."""
    cycles = _cycles(GRAPH)
    assert not cycles, "import cycles (each a set of modules that import each other): " + "; ".join(
        " ↔ ".join(c) for c in cycles)


def test_no_import_from_a_lower_layer_to_a_higher_one():
    up = [f"{m} ({LAYERS[layer_of(m)][0]}) imports {t} ({LAYERS[layer_of(t)][0]}) at line {line}"
          for m, deps in GRAPH.items() for t, line in deps.items()
          if layer_of(m) is not None and layer_of(t) is not None and layer_of(t) > layer_of(m)]
    assert not up, "imports that look up:\n" + "\n".join(sorted(up))


@pytest.mark.parametrize("importer, imported, why", FORBIDDEN)
def test_forbidden_edges(importer, imported, why):
    bad = [f"{m} imports {t} at line {line}" for m, deps in GRAPH.items() for t, line in deps.items()
           if (m == importer or m.startswith(importer + ".")) and (t == imported or t.startswith(imported + "."))]
    assert not bad, f"{why}: " + "; ".join(bad)


def test_the_checks_catch_a_cycle_and_an_upward_import():
    """The same functions on a made-up graph: a cycle and an edge from the store up to the backends."""
    g = {"sago_engine.store.a": {"sago_engine.store.b": 1}, "sago_engine.store.b": {"sago_engine.store.a": 2},
         "sago_engine.store.c": {"sago_engine.backends.x": 3}, "sago_engine.backends.x": {}}
    assert _cycles(g) == [["sago_engine.store.a", "sago_engine.store.b"]]
    assert layer_of("sago_engine.store.c") < layer_of("sago_engine.backends.x")
    assert layer_of("sago_engine.backends.hf_local.generation") == layer_of("sago_engine.backends")
    assert layer_of("sago_engine.seeds") < layer_of("sago_engine.store.suffstats") < layer_of("sago_engine.measure.storerows")
    assert layer_of("somewhere.else") is None and layer_of("sago_engine.new_module") is None


#: The most lines a module of sago may have (one concept per module).
MAX_MODULE_LINES = 500


def test_no_module_is_over_the_line_limit():
    long = {m: n for m, (path, _) in _modules().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by concept): {long}"


#: The most modules (``__init__.py`` not counted) a folder of sago_engine may hold at its root.
MAX_PACKAGE_MODULES = 12


def test_no_package_root_is_crowded():
    """The folders are the layers: a folder past ``MAX_PACKAGE_MODULES`` modules is split by concept
    into sub-packages (each placed in ``LAYERS``); the root keeps only the core records."""
    engine = ROOT / "sago_engine"
    crowded = {d.relative_to(ROOT).as_posix(): n for d in [engine, *engine.rglob("*")]
               if d.is_dir() and d.name != "__pycache__"
               and (n := sum(p.name != "__init__.py" for p in d.glob("*.py"))) > MAX_PACKAGE_MODULES}
    assert not crowded, f"folders with more than {MAX_PACKAGE_MODULES} modules (split them by concept): {crowded}"
