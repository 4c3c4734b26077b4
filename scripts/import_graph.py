"""The import graph of the detemplate package (the folder worker/): print it, fail on a cycle or a forbidden edge.

    python scripts/import_graph.py          # the graph between the package's parts, then the verdict

Every import of every module counts, those inside functions too. The parts, from the
bottom up; an import may only point down, or stay inside its part:

    engine     pure: page walk, detectors, table, pipeline; imports nothing else of the package
    blas, interrupts   BLAS's threads; how Ctrl-C and SIGTERM stop a command: import nothing
    state, io  the stores and the changelog layout; sources and codecs: import the engine only
    settings   runtime settings, the only reader of the environment: imports the engine (and blas)
    parallel   `run --jobs`: processes over hosts; imports the engine, state, io, blas and
               interrupts (offline's run_pages is handed to it)
    offline, stream   the two shells: import the engine, state and io; offline parallel and
               interrupts, stream settings
    tools      eval, bench, show, samples, training, batch research algorithms, soak, the test broker
    cli, __main__, the package's __init__ (its public API)

Nothing imports tools/ but cli.py and other tools. Inside the engine the page walk
(engine/page) imports none of the table, the detectors or the pipeline, and the
detectors do not import the pipeline. No module imports itself back through others.
tests/test_layout.py runs the same check.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

PACKAGE = "detemplate"
SOURCE = Path(__file__).resolve().parent.parent / "worker"

# What each part may import besides itself (parts are the first component under the package).
ALLOWED: dict[str, set[str]] = {
    "engine": set(),
    "blas": set(),
    "interrupts": set(),
    "state": {"engine"},
    "io": {"engine"},
    "settings": {"engine", "blas"},
    "parallel": {"engine", "state", "io", "blas", "interrupts"},
    "offline": {"engine", "state", "io", "parallel", "interrupts"},
    "stream": {"engine", "state", "io", "settings"},
    "tools": {"engine", "state", "io", "settings", "parallel", "offline", "stream"},
    "cli": {
        "engine", "state", "io", "settings", "parallel", "offline", "stream", "tools", "__init__", "blas", "interrupts",
    },
    "__main__": {"cli"},
    "__init__": {"engine", "state", "io"},
}
# Inside the engine: what each of its parts must not import.
ENGINE_FORBIDDEN: dict[str, set[str]] = {
    "page": {"table", "detectors", "pipeline", "links"},
    "detectors": {"pipeline"},
    "table": {"detectors", "pipeline"},
    "keys": {"page", "table", "detectors", "pipeline"},
    "model": {"page", "table", "detectors", "pipeline", "params"},
    "params": {"page", "table", "detectors", "pipeline"},
    "errors": {"page", "table", "detectors", "pipeline", "model", "params"},
}


def module_name(path: Path) -> str:
    rel = path.relative_to(SOURCE).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join([PACKAGE, *parts])


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def imports(path: Path) -> set[str]:
    """The package's modules (or packages) that one module imports."""
    name = module_name(path)
    here = name.split(".") if is_package(path) else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            elif node.module and node.module.split(".")[0] == PACKAGE:
                target = node.module
            else:
                continue
            for alias in node.names:  # `from . import x` imports the module x when there is one
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in MODULES else target)
    out.discard(name)
    return out


MODULES: dict[str, Path] = {}


def graph() -> dict[str, set[str]]:
    MODULES.clear()
    for path in sorted([*SOURCE.rglob("*.py"), *SOURCE.rglob("*.pyx")]):  # .pyx: the compiled walk
        MODULES[module_name(path)] = path
    return {
        name: {t for t in imports(path) if t in MODULES} if path.suffix == ".py" else set()
        for name, path in MODULES.items()
    }


def part(name: str, depth: int = 1) -> str:
    parts = name.split(".")[1:]
    if not parts:
        return "__init__"
    return ".".join(parts[:depth])


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), i.e. import circles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
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

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def problems(edges: dict[str, set[str]]) -> list[str]:
    """Every cycle and forbidden edge, as sentences (empty: the layout holds)."""
    out = [f"import circle: {' -> '.join(c)}" for c in cycles(edges)]
    for src, targets in sorted(edges.items()):
        a = part(src)
        for dst in sorted(targets):
            b = part(dst)
            # A package's __init__ re-exporting its own modules is inside its part.
            if a == b or (dst == PACKAGE and a == "__init__"):
                if a == "engine":
                    sa, sb = part(src, 2).split(".")[-1], part(dst, 2).split(".")[-1]
                    if sb in ENGINE_FORBIDDEN.get(sa, set()):
                        out.append(f"{src} imports {dst}: engine/{sa} must not import engine/{sb}")
                continue
            if b not in ALLOWED.get(a, set()):
                out.append(f"{src} imports {dst}: {a} may import only {sorted(ALLOWED.get(a, set())) or 'itself'}")
    return out


def main() -> int:
    edges = graph()
    between: Counter[tuple[str, str]] = Counter()
    for src, targets in edges.items():
        for dst in targets:
            a, b = part(src, 2 if part(src) == "engine" else 1), part(dst, 2 if part(dst) == "engine" else 1)
            if a != b:
                between[(a, b)] += 1
    print(f"{len(edges)} modules of {PACKAGE} (worker/), {sum(len(t) for t in edges.values())} imports between them")
    print("imports between the parts (count):")
    for (a, b), n in sorted(between.items()):
        print(f"  {a:<18} -> {b:<18} {n}")
    found = problems(edges)
    for line in found:
        print("FAIL", line)
    print("no import circles; every import points down" if not found else f"{len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
