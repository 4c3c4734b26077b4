"""Packaging as a user meets it (issue 16): `python -m build` makes an sdist that holds the
compiled walk's source and a wheel built from it; on a machine without a C compiler the
install falls back to the Python walk, as README says; a command whose extra is missing
names the extra to install.

Slow: builds in an isolated environment and installs from the package index (PyPI), as
`pip install detemplate` does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.factories import make_site, write_jsonl

ROOT = Path(__file__).resolve().parent.parent
# What a build may need from PATH besides Python (called by absolute path): a shell and the
# few tools deploy/build.sh uses. No compiler.
TOOLS = ("sh", "mktemp", "rm", "dirname")
# What a fresh clone does not have: build products, caches, and the top-level run folders.
TOP_LEVEL_ONLY = {".git", ".venv", "build", "dist", "demo", "state", "out"}
ANYWHERE = shutil.ignore_patterns("*.egg-info", "*.so", "_walk.c", "__pycache__", ".mypy_cache", ".ruff_cache",
                                  ".pytest_cache")


def ignore(folder: str, names: list[str]) -> set[str]:
    skipped = set(ANYWHERE(folder, names))
    if Path(folder) == ROOT:
        skipped |= TOP_LEVEL_ONLY & set(names)
    return skipped


def no_compiler_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH holds no C compiler, and whose CC names a missing program."""
    bin_dir = tmp_path / "bin-without-compilers"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "CC", "CXX", "LDSHARED")}
    env.update(PATH=str(bin_dir), CC=str(tmp_path / "no-such-cc"), CXX=str(tmp_path / "no-such-cxx"))
    for compiler in ("cc", "gcc", "clang", "c++"):
        assert shutil.which(compiler, path=env["PATH"]) is None
    return env


@pytest.mark.slow
def test_build_without_a_compiler_gives_an_sdist_with_the_pyx_and_a_wheel_that_runs_the_python_walk(
    tmp_path: Path,
) -> None:
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=ignore)  # a clean source tree, as a fresh clone has
    env = no_compiler_env(tmp_path)
    dist = tmp_path / "dist"
    build = subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(src)],
                           capture_output=True, text=True, env=env, timeout=900, check=False)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    assert "the compiled page walk (detemplate.engine.page._walk) was not built" in build.stdout + build.stderr
    (sdist,) = dist.glob("detemplate-*.tar.gz")
    (wheel,) = dist.glob("detemplate-*.whl")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    assert any(n.endswith("worker/engine/page/_walk.pyx") for n in names)  # the wheel was built from it
    assert not any(n.endswith((".so", "_walk.c")) for n in names)
    with zipfile.ZipFile(wheel) as whl:
        assert not [n for n in whl.namelist() if n.endswith(".so")]
        assert "detemplate/engine/detectors/data/pagelevel.json" in whl.namelist()  # the model's weights
    # The package layout and its metadata as setuptools wants them: no warning that it would
    # leave the weights' folder out, nor that the license field is of a deprecated form.
    assert "is absent from the `packages` configuration" not in build.stdout + build.stderr
    assert "`project.license` as a TOML table is deprecated" not in build.stdout + build.stderr

    # `pip install` of that wheel, without the stream extra: `run` works with the Python walk.
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, env=env, timeout=120)
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
                          "--constraint", str(ROOT / "deploy" / "constraints.txt"), str(wheel)],
                         capture_output=True, text=True, env=env, timeout=900, check=False)
    assert pip.returncode == 0, pip.stderr[-3000:]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=300, check=False)

    walk = run("python", "-c", "from detemplate.engine.page import compiled; print(compiled.status())")
    assert walk.returncode == 0 and walk.stdout.startswith("python"), walk.stdout + walk.stderr
    pages = write_jsonl(make_site("nocc.example", 8, seed=3), tmp_path / "in.jsonl")
    done = run("detemplate", "run", str(pages), "--output", str(tmp_path / "out.jsonl"))
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(records) == 8 and records[-1]["counts"]["template_blocks"] > 0

    # The stream commands name the extra they need instead of a ModuleNotFoundError.
    for command in ("worker", "produce", "consume"):
        args = {"worker": [], "produce": [str(pages)], "consume": ["--topic", "pages.clean"]}[command]
        out = run("detemplate", command, *args)
        assert out.returncode == 2, out.stderr
        assert "Traceback" not in out.stderr
        assert f"detemplate {command}: needs the `stream` extra" in out.stderr
        assert "pip install 'detemplate[stream]'" in out.stderr
