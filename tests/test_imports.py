"""Import contracts, read from the source (nothing is imported): the packages keep the order of
docs/architecture.md's layout table (no package imports one in a row below it, no two packages
import each other), the torch-free decoder names neither torch nor the encoder, the library never
names the command line, the batch engine runs without click, and no modules import each other in
a circle.

Imports inside functions count as much as those at the top of a module: deferring an import
hides a circle or a heavy dependency, it does not remove it. Only imports under
``if TYPE_CHECKING:`` (which never run) are left out. Imports by name at run time
(``importlib.import_module``) are not seen; the residual coders loaded that way are decoder
modules themselves (``format/``), so the contract reads them anyway.

Importing ``a.b.c`` first runs the packages ``a/__init__`` and ``a/b/__init__``: the reader
counts that as an import of each package whose ``__init__`` has not run yet, that is each one
that does not contain the importing module (its own packages ran before it).
"""

from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "semcodec"
ARCHITECTURE = SRC.parent / "docs" / "architecture.md"

# What decodes a file without torch (`semcodec.decode`, `decode_map`, `decode` of the CLI on an
# installed release), and everything they import. The entropy coders are added below.
DECODER_ROOTS = (
    "semcodec.decoder.pipeline",
    "semcodec.decoder.parts",
    "semcodec.decoder.maplayer",
    "semcodec.intgrid.generator",
    "semcodec.intgrid.enhancer",
    "semcodec.format.container",
)
# entropy modules only the encoder and training use
ENCODER_ONLY_ENTROPY = {
    "semcodec.models.context_model": "the trainable model the integer table is frozen from",
}
# what no decoder module may import (the module or anything under it)
NOT_FOR_THE_DECODER = ("torch", "semcodec.encoder")
# imports inside a function of the decoder side that lead to torch, each with why they never
# load it (the same import at the top of the module is a violation)
DECODER_EXCEPTIONS = {
    ("semcodec.decoder.pipeline", "semcodec.intgrid.generator_torch"): (
        "auto_generator takes torch's integer generator only when torch is imported already"
    ),
    ("semcodec.decoder.pipeline", "semcodec.intgrid.enhancer_torch"): (
        "auto_enhancer takes torch's band kernel only when torch is imported already"
    ),
}

# The command line: the library below it must not import it.
CLI = ("semcodec.cli",)

# The batch engine: usable without the command line's toolkit (its options stay in ``cli/``).
BATCH = ("semcodec.batch",)
NOT_FOR_THE_BATCH = ("click",)

# Circles known today, allowed until they are broken; each must still exist (else remove it).
KNOWN_CIRCLES: tuple[frozenset[str], ...] = ()


@dataclass(frozen=True)
class Import:
    """One import statement's target as the importing module sees it."""

    source: str  # the importing module
    target: str  # a module of the package, or an outside module's dotted name
    line: int
    deferred: bool  # inside a function: runs when the function does


def module_files(src: Path = SRC) -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name -> (file, whether it is a package's __init__)."""
    out: dict[str, tuple[Path, bool]] = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _is_type_checking(node: ast.AST) -> bool:
    """Whether a node is ``if TYPE_CHECKING:`` (its imports never run)."""
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _statements(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement that can run, with whether it sits inside a function."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, deferred = stack.pop()
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                stack.extend((c, deferred) for c in child.orelse)
                continue
            inner = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, deferred
            stack.append((child, inner))


def _targets(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: Iterable[str]
) -> list[str]:
    """The modules an import statement names (``from a import b`` names a.b if it is one)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        here = module.split(".") if is_package else module.split(".")[:-1]
        here = here[: len(here) - (node.level - 1)]
        base = ".".join(here + ([node.module] if node.module else []))
    names = {f"{base}.{alias.name}" for alias in node.names}
    sub = sorted(n for n in names if n in known)
    return sub + ([base] if len(sub) < len(names) else [])


def _packages_run(target: str, module: str, is_package: bool, known: Iterable[str]) -> list[str]:
    """The packages whose ``__init__`` importing ``target`` runs first: its parents, less those
    that contain the importing module (already run before it)."""
    parts = target.split(".")
    own = module if is_package else module.rsplit(".", 1)[0]
    parents = (".".join(parts[:n]) for n in range(1, len(parts)))
    return [p for p in parents if p in known and not (own == p or own.startswith(p + "."))]


def imports_in(source: str, module: str, is_package: bool, known: Iterable[str]) -> list[Import]:
    """The imports of one module's source that can run, with the packages each one runs."""
    known = set(known)
    out = set()
    for node, deferred in _statements(ast.parse(source)):
        for target in _targets(node, module, is_package, known):
            out.add(Import(module, target, node.lineno, deferred))
            for package in _packages_run(target, module, is_package, known):
                out.add(Import(module, package, node.lineno, deferred))
    return sorted(out, key=lambda i: (i.line, i.target, i.deferred))


@cache
def graph() -> dict[str, tuple[Import, ...]]:
    """Each module of the package -> its imports (top-level and deferred)."""
    files = module_files()
    return {
        name: tuple(imports_in(path.read_text(), name, is_package, files))
        for name, (path, is_package) in files.items()
    }


def _internal(target: str, modules: Iterable[str]) -> str | None:
    """The package module an import target runs (``semcodec.a.B`` -> ``semcodec.a``), if any."""
    modules = set(modules)
    while target not in modules and "." in target:
        target = target.rsplit(".", 1)[0]
    return target if target in modules and target.startswith(PACKAGE) else None


def _under(name: str, prefixes: Iterable[str]) -> bool:
    """Whether a dotted name is one of ``prefixes`` or inside one of them."""
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def reached(
    roots: Iterable[str], skip: Iterable[tuple[str, str]] = ()
) -> dict[str, tuple[str, ...]]:
    """Every package module the roots import, directly or not: module -> the chain to it
    (an import inside a function named in ``skip`` as (importer, imported) is not followed)."""
    g, skip = graph(), set(skip)
    chains = {root: (root,) for root in roots}
    queue = deque(chains)
    while queue:
        here = queue.popleft()
        for imp in g[here]:
            there = _internal(imp.target, g)
            if there is None or there in chains or (imp.deferred and (here, there) in skip):
                continue
            chains[there] = (*chains[here], there)
            queue.append(there)
    return chains


def strongly_connected(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The circles of a graph: its strongly connected groups of more than one node (Tarjan)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        """Tarjan's step: number v, follow its edges, close a group at its root."""
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(frozenset(group))

    for v in sorted(edges):
        if v not in order:
            visit(v)
    return found


def circles() -> list[frozenset[str]]:
    """The package's import circles: strongly connected groups of more than one module."""
    g = graph()
    return strongly_connected(
        {m: {t for i in imps if (t := _internal(i.target, g)) and t != m} for m, imps in g.items()}
    )


# ----- packages: the rows of docs/architecture.md's layout table ---------------------------------


def package_of(module: str) -> str:
    """The unit a module belongs to in the layout table: its package under ``semcodec`` (or the
    top-level module itself; ``semcodec`` for the package's own ``__init__``)."""
    return ".".join(module.split(".")[:2])


def _unit(doc_name: str) -> str:
    """A layout table name as a unit: ``format/`` -> semcodec.format, ``api.py`` -> semcodec.api,
    ``semcodec/__init__.py`` -> semcodec."""
    if doc_name == f"{PACKAGE}/__init__.py":
        return PACKAGE
    return f"{PACKAGE}.{doc_name.removesuffix('/').removesuffix('.py')}"


def layer_rows(text: str) -> list[tuple[str, ...]]:
    """The layout table's rows, lowest first: the units each row names in its first column."""
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return [
        tuple(_unit(name) for name in re.findall(r"`([^`]+)`", line.split("|")[1]))
        for line in section.splitlines()
        if line.startswith("| `")
    ]


def package_edges(g: dict[str, tuple[Import, ...]]) -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> each import that makes the edge, as a reader sees it."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, imps in g.items():
        for imp in imps:
            target = _internal(imp.target, g)
            if target is None or package_of(target) == package_of(module):
                continue
            key = (package_of(module), package_of(target))
            edges.setdefault(key, []).append(_describe((module,), imp))
    return edges


def table_mismatches(rows: list[tuple[str, ...]], units: Iterable[str]) -> list[str]:
    """What the table and the source disagree on: units in neither or in two rows."""
    named = [u for row in rows for u in row]
    units = set(units)
    return [
        *(f"{u} is in no row of the table" for u in sorted(units - set(named))),
        *(f"{u} is in the table but not in the source" for u in sorted(set(named) - units)),
        *(f"{u} is in {named.count(u)} rows" for u in sorted(set(named)) if named.count(u) > 1),
    ]


def upward_imports(
    rows: list[tuple[str, ...]], edges: dict[tuple[str, str], list[str]]
) -> list[str]:
    """Every import of a unit in a row below the importer's (lower rows may not know higher)."""
    level = {unit: n for n, row in enumerate(rows) for unit in row}
    return [
        f"{src} (row {level[src] + 1}) imports {dst} (row {level[dst] + 1}): {how[0]}"
        for (src, dst), how in sorted(edges.items())
        if src in level and dst in level and level[dst] > level[src]
    ]


def package_circles(edges: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """Packages that import each other, directly or not (within a row too), with one import of
    each edge inside the circle."""
    adjacency: dict[str, set[str]] = {}
    for src, dst in edges:
        adjacency.setdefault(src, set()).add(dst)
    out = []
    for group in strongly_connected(adjacency):
        inside = sorted((s, d) for s, d in edges if s in group and d in group)
        out.append([f"{s} -> {d}: {edges[(s, d)][0]}" for s, d in inside])
    return out


def decoder_modules() -> list[str]:
    """The decoder side's roots: the named modules and the entropy coders a decoder uses."""
    entropy = [m for m in graph() if _under(m, ["semcodec.format"])]
    return [*DECODER_ROOTS, *(m for m in entropy if m not in ENCODER_ONLY_ENTROPY)]


def _describe(chain: tuple[str, ...], imp: Import) -> str:
    """One violation as a reader follows it: the chain of modules, then the line."""
    where = "in a function" if imp.deferred else "at the top"
    return f"{' -> '.join(chain)} imports {imp.target} ({where}, line {imp.line})"


def forbidden_reached(
    roots: Iterable[str], forbidden: Iterable[str], skip: Iterable[tuple[str, str]] = ()
) -> list[str]:
    """Every import of ``forbidden`` (or below it) that the roots reach, as a reader follows it."""
    forbidden = tuple(forbidden)
    return [
        _describe(chain, imp)
        for module, chain in reached(roots, skip).items()
        for imp in graph()[module]
        if _under(imp.target, forbidden)
    ]


# ----- the contracts ---------------------------------------------------------------------------


def test_the_layout_table_names_every_package_once() -> None:
    """Each package and top-level module has one row in docs/architecture.md's layout table, so
    the order below covers the whole source (a new package is placed, a gone one removed)."""
    rows = layer_rows(ARCHITECTURE.read_text())
    bad = table_mismatches(rows, {package_of(m) for m in graph()})
    assert not bad, "docs/architecture.md's layout table:\n" + "\n".join(bad)


def test_no_package_imports_a_higher_one() -> None:
    """The layout table lists the packages lowest first; a package imports only its own row and
    the rows above it (deferred imports count)."""
    bad = upward_imports(layer_rows(ARCHITECTURE.read_text()), package_edges(graph()))
    assert not bad, "imports against docs/architecture.md's layout table:\n" + "\n".join(bad)


def test_no_package_level_circles() -> None:
    """No two packages import each other, directly or through others, even within one row."""
    found = package_circles(package_edges(graph()))
    assert not found, "packages in a circle:\n" + "\n\n".join("\n".join(c) for c in found)


def test_the_decoder_imports_neither_torch_nor_the_encoder() -> None:
    """A decode on an installed release must not pay torch's import, nor depend on the encoder."""
    bad = forbidden_reached(decoder_modules(), NOT_FOR_THE_DECODER, skip=DECODER_EXCEPTIONS)
    assert not bad, "the decoder side reaches torch or the encoder:\n" + "\n".join(bad)


def test_the_decoder_exceptions_still_exist() -> None:
    """An exception that no longer matches an import is removed, not kept as a loophole."""
    for source, target in DECODER_EXCEPTIONS:
        assert any(
            i.deferred and _internal(i.target, graph()) == target for i in graph()[source]
        ), f"{source} no longer imports {target} in a function: remove it from DECODER_EXCEPTIONS"


def test_the_library_never_imports_the_command_line() -> None:
    """The library is usable without click's commands; the CLI sits on top, never below."""
    bad = [
        _describe((module,), imp)
        for module, imps in graph().items()
        if not _under(module, CLI)
        for imp in imps
        if _under(imp.target, CLI)
    ]
    assert not bad, "library modules import the command line:\n" + "\n".join(bad)


def test_the_batch_engine_never_imports_click() -> None:
    """The engine (plan, executors, delivery, report) runs under any front end; click's options
    and the terminal belong to ``cli/``. Everything the engine reaches counts."""
    bad = forbidden_reached((m for m in graph() if _under(m, BATCH)), NOT_FOR_THE_BATCH)
    assert not bad, "the batch engine reaches click:\n" + "\n".join(bad)


def test_no_import_circles_but_the_known_ones() -> None:
    """Modules import each other one way only (deferred imports count), so each can be read,
    tested and moved on its own."""
    found = circles()
    new = [sorted(c) for c in found if c not in KNOWN_CIRCLES]
    assert not new, f"import circles: {new}"
    gone = [sorted(c) for c in KNOWN_CIRCLES if c not in found]
    assert not gone, f"no longer circles, remove them from KNOWN_CIRCLES: {gone}"


# ----- the reader itself -----------------------------------------------------------------------


def test_the_reader_counts_deferred_imports_and_skips_type_checking() -> None:
    """The contracts are only as good as the reader: relative, deferred and guarded imports."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import b\n"
        "from ..c import d\n"
        "if TYPE_CHECKING:\n"
        "    import torch\n"
        "def f():\n"
        "    import numpy.linalg\n"
        "    from .e import thing\n"
    )
    known = {"p", "p.q", "p.q.a", "p.q.b", "p.c", "p.c.d", "p.q.e"}
    got = {(i.target, i.deferred) for i in imports_in(source, "p.q.a", False, known)}
    assert got == {
        ("typing", False),
        ("p.q.b", False),
        ("p.c", False),  # p/c/__init__ runs first
        ("p.c.d", False),
        ("numpy.linalg", True),
        ("p.q.e", True),
    }
    assert {i.target for i in imports_in("from . import b\n", "p.q", True, known)} == {"p.q.b"}


def test_the_reader_counts_the_packages_an_import_runs() -> None:
    """``import a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` first, unless the importer is
    inside them: a package whose ``__init__`` imports back is a circle."""
    known = {"a", "a.b", "a.b.c", "a.x", "z", "z.y"}
    got = {i.target for i in imports_in("import a.b.c\n", "z.y", False, known)}
    assert got == {"a", "a.b", "a.b.c"}
    got = {i.target for i in imports_in("from a.b import c\n", "a.x", False, known)}
    assert got == {"a.b", "a.b.c"}  # a/__init__ ran before a.x
    got = {i.target for i in imports_in("from .c import f\n", "a.b", True, known)}
    assert got == {"a.b.c"}  # the package itself is running


def test_the_decoder_side_is_what_a_decode_runs() -> None:
    """The roots reach the modules a torch-free decode loads (tests/test_map.py checks it runs)."""
    chains = reached(decoder_modules(), skip=DECODER_EXCEPTIONS)
    for module in ("semcodec.format.map", "semcodec.decoder.prediction", "semcodec.format.roi"):
        assert module in chains
    assert "semcodec.intgrid.generator_torch" not in chains


def test_the_package_rules_each_catch_their_break() -> None:
    """Each package rule fails on a graph that breaks it, and only that rule."""
    rows = [("p.low",), ("p.mid", "p.side"), ("p.top",)]
    units = {"p.low", "p.mid", "p.side", "p.top"}
    fine = {("p.top", "p.mid"): ["t"], ("p.mid", "p.low"): ["m"], ("p.side", "p.mid"): ["s"]}
    assert not table_mismatches(rows, units)
    assert not upward_imports(rows, fine) and not package_circles(fine)
    # a package missing from the table, or named twice
    assert table_mismatches(rows, units | {"p.new"}) == ["p.new is in no row of the table"]
    assert table_mismatches([*rows, ("p.low",)], units) == ["p.low is in 2 rows"]
    # a lower row importing a higher one (a circle too: the rule names the upward edge)
    upward = {**fine, ("p.low", "p.top"): ["l"]}
    assert upward_imports(rows, upward) == ["p.low (row 1) imports p.top (row 3): l"]
    # two packages of one row importing each other: no upward import, but a circle
    within = {**fine, ("p.mid", "p.side"): ["ms"]}
    assert not upward_imports(rows, within)
    assert package_circles(within) == [["p.mid -> p.side: ms", "p.side -> p.mid: s"]]


def test_the_layout_table_is_read_in_order() -> None:
    """The reader of the table: rows lowest first, several names per row, the package itself."""
    text = (
        "# A\n\n## Layout\n\n| package | what |\n|---|---|\n"
        "| `errors.py`, `defaults.py` | x |\n| `format/` | `not/` a name here |\n"
        "| `semcodec/__init__.py` | y |\n\n## Next\n\n| `cli/` | z |\n"
    )
    assert layer_rows(text) == [
        ("semcodec.errors", "semcodec.defaults"),
        ("semcodec.format",),
        ("semcodec",),
    ]
    assert package_of("semcodec.format.map") == "semcodec.format"
    assert package_of("semcodec.api") == "semcodec.api" and package_of("semcodec") == "semcodec"
