"""The public API: every name in detemplate.__all__ resolves, and importing it stays cheap."""

from __future__ import annotations

import subprocess
import sys

import detemplate
from detemplate import EngineParams, MemoryStore, RawPage, encode_clean, process_page

from tests.factories import make_site


def test_every_public_name_resolves() -> None:
    assert detemplate.__all__ == sorted(detemplate.__all__)
    for name in detemplate.__all__:
        assert getattr(detemplate, name) is not None, name
    assert detemplate.__version__ == "0.1.0"


def test_the_public_api_cleans_a_site() -> None:
    store = MemoryStore()
    params = EngineParams()
    outcomes = [process_page(sp.page, store, params) for sp in make_site("api.example", 6, seed=5)]
    last = outcomes[-1].clean
    assert last is not None and last.page_no == 6 and last.template_chars > 0
    assert encode_clean(last).startswith(b'{"v":1,"url":')
    dead = process_page(RawPage("https://api.example/x", "", "api.example"), store, params)
    assert dead.clean is None and dead.dead is not None and dead.dead.reason == "empty"


def test_importing_detemplate_loads_no_faust_nor_matplotlib() -> None:
    code = (
        "import sys, detemplate; heavy = sorted(m for m in ('faust', 'matplotlib', 'aiokafka', 'prometheus_client') "
        "if m in sys.modules); print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_python_m_detemplate_is_the_command_line() -> None:
    out = subprocess.run([sys.executable, "-m", "detemplate", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"detemplate {detemplate.__version__}"
