"""The layout holds: no import circles, imports only point down (scripts/import_graph.py), and
every module says on its first line what it is."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "import_graph.py"


def import_graph() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_circles_and_every_import_points_down() -> None:
    graph = import_graph()
    edges = graph.graph()
    assert len(edges) > 40
    assert graph.problems(edges) == []


def test_the_check_finds_a_circle_and_an_upward_import() -> None:
    graph = import_graph()
    edges = graph.graph()
    edges["detemplate.engine.table"] = {*edges["detemplate.engine.table"], "detemplate.engine.pipeline"}
    edges["detemplate.engine.keys"] = {"detemplate.tools.bench"}
    found = "\n".join(graph.problems(edges))
    assert "import circle" in found and "detemplate.engine.table" in found
    assert "detemplate.engine.keys imports detemplate.tools.bench" in found


def test_the_script_prints_the_graph_and_passes() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "engine.pipeline" in out.stdout and "every import points down" in out.stdout


def test_every_module_says_what_it_is() -> None:
    for path in sorted((ROOT / "worker").rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        assert doc and doc.strip(), f"{path.relative_to(ROOT)} has no docstring"


def test_every_package_is_installed() -> None:
    """setup.py lists the packages from the folder: every folder of modules is one."""
    for folder in (ROOT / "worker").rglob("*"):
        if folder.is_dir() and any(folder.glob("*.py")) and folder.name != "__pycache__":
            assert (folder / "__init__.py").is_file(), folder
