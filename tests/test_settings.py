"""detemplate.settings: defaults, DETEMPLATE_* parsing, flags over variables, the round trip to a child,
the garbage collector's threshold."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from detemplate import blas, cli, settings
from detemplate.engine.errors import ConfigError
from detemplate.settings import ENV_PREFIX, GC_FIRST_THRESHOLD, StreamSettings, env_for, load


def test_defaults_and_environment_parsing() -> None:
    assert load({}) == StreamSettings()
    s = load({
        "DETEMPLATE_PARTITIONS": "16",
        "DETEMPLATE_TANSU": "yes",
        "DETEMPLATE_SSL_CHECK_HOSTNAME": "off",
        "DETEMPLATE_COMMIT_INTERVAL_S": "2.5",
        "DETEMPLATE_BROKER": "a:9092, kafka://b:9092",
        "UNRELATED": "x",
    })
    assert (s.partitions, s.tansu, s.ssl_check_hostname, s.commit_interval_s) == (16, True, False, 2.5)
    assert s.bootstrap == "a:9092,b:9092"
    assert s.faust_broker == "kafka://a:9092,kafka://b:9092"


@pytest.mark.parametrize(("name", "value"), [("PARTITIONS", "many"), ("TANSU", "maybe"), ("HEARTBEAT_S", "1s")])
def test_bad_values_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=ENV_PREFIX + name):
        load({ENV_PREFIX + name: value})


def test_overrides_beat_the_environment_and_none_is_unset() -> None:
    env = {"DETEMPLATE_PARTITIONS": "16", "DETEMPLATE_APP_ID": "from-env"}
    s = load(env, partitions=4, app_id=None)
    assert (s.partitions, s.app_id) == (4, "from-env")


def test_env_for_reproduces_the_settings_in_a_child(tmp_path: Path) -> None:
    pw = tmp_path / "pw"
    pw.write_text("secret\n")
    for s in (
        StreamSettings(partitions=3, out_partitions=5, tansu=True, params="table.tb=10", compression="lz4"),
        StreamSettings(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256", sasl_username="u",
                       sasl_password_file=str(pw), ssl_check_hostname=False),
        StreamSettings(security_protocol="SASL_PLAINTEXT", sasl_username="u", sasl_password="p"),
    ):
        env = env_for(s)
        assert set(env) == {ENV_PREFIX + f.name.upper() for f in fields(StreamSettings)}
        assert load(env) == s


def test_walk_settings_come_from_the_environment() -> None:
    from detemplate.settings import WalkSettings, load_walk

    assert load_walk({}) == WalkSettings()
    assert load_walk({"DETEMPLATE_PURE_PYTHON": "1", "DETEMPLATE_REQUIRE_COMPILED": "yes"}) == WalkSettings(True, True)
    with pytest.raises(ConfigError):
        load_walk({"DETEMPLATE_REQUIRE_COMPILED": "maybe"})


def test_a_command_refuses_to_start_without_the_compiled_walk_when_it_is_required() -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "DETEMPLATE_PURE_PYTHON": "1", "DETEMPLATE_REQUIRE_COMPILED": "1"}
    out = subprocess.run([sys.executable, "-m", "detemplate", "worker", "--broker", "kafka://127.0.0.1:1"],
                         env=env, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 2
    said = "DETEMPLATE_REQUIRE_COMPILED is set, but the page walk is python (DETEMPLATE_PURE_PYTHON is set)"
    assert said in out.stderr


def test_the_worker_and_run_bound_tables_alike() -> None:
    from detemplate.settings import StreamSettings
    from detemplate.state.expiry import DEFAULT_MAX_TABLE_ENTRIES

    # settings.py may not import the state layer: the default is written twice, and held equal here.
    assert StreamSettings().max_table_entries == DEFAULT_MAX_TABLE_ENTRIES


def test_a_command_raises_the_collectors_first_threshold_and_keeps_the_others(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<html><body><p>A page of one paragraph, decided.</p></body></html>")
    saved = gc.get_threshold()
    gc.set_threshold(700, 9, 11)
    try:
        assert cli.main(["run", str(site), "-o", str(tmp_path / "out.jsonl"), "--jobs", "1"]) == 0
        assert gc.get_threshold() == (GC_FIRST_THRESHOLD, 9, 11)
    finally:
        gc.set_threshold(*saved)
    assert (tmp_path / "out.jsonl").read_text().count("\n") == 1


OPENBLAS = blas.threads() is not None
needs_openblas = pytest.mark.skipif(not OPENBLAS, reason="numpy's BLAS here is not an OpenBLAS this process can see")


@needs_openblas
def test_every_command_runs_one_blas_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # numpy's OpenBLAS starts a thread a core; the page-level model's products are small and
    # the second thread only spins. The command line sets one, and the variable for its children.
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<html><body><p>A page of one paragraph, decided.</p></body></html>")
    assert blas.set_threads(2) == 2
    assert cli.main(["run", str(site), "-o", str(tmp_path / "out.jsonl"), "--jobs", "1"]) == 0
    assert blas.threads() == 1
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"


@needs_openblas
def test_a_blas_thread_count_the_user_set_is_the_one_used() -> None:
    environ = {"OPENBLAS_NUM_THREADS": "2"}
    blas.set_threads(1)
    assert settings.tune_blas(environ) == 2
    assert blas.threads() == 2 and environ == {"OPENBLAS_NUM_THREADS": "2"}
    assert settings.tune_blas({"OPENBLAS_NUM_THREADS": "many"}) is None and blas.threads() == 2
    environ = {}
    assert settings.tune_blas(environ) == 1
    assert blas.threads() == 1 and environ == {"OPENBLAS_NUM_THREADS": "1"}


# In a fresh interpreter (OpenBLAS starts its threads when numpy loads): the process' threads
# after one BLAS thread is set, then in a forked child that sets it again, as a job of
# `run --jobs` does, and runs a product.
BLAS_THREADS_PROBE = """
import os, numpy
from detemplate import blas
def threads():
    return len(os.listdir("/proc/self/task"))
loaded = threads()
blas.set_threads(1)
one = threads()
pid = os.fork()
if pid == 0:
    blas.set_threads(1)
    product = numpy.ones((300, 300)) @ numpy.ones((300, 300))
    print(loaded, one, threads(), int(product[0, 0]), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"""


@needs_openblas
@pytest.mark.skipif((os.cpu_count() or 1) < 2 or not os.path.isdir("/proc/self/task"),
                    reason="OpenBLAS starts no thread of its own on one core; Linux's /proc counts them")
def test_one_blas_thread_stops_the_librarys_idle_threads_in_the_process_and_its_forked_jobs() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", BLAS_THREADS_PROBE], capture_output=True, text=True, env=env,
                         check=True)
    loaded, one, child, product = map(int, out.stdout.split())
    assert loaded > 1  # numpy's load started OpenBLAS's threads (they spin before they sleep)
    # Set to one thread they are stopped; a forked job setting it again starts none, and its
    # products still run (on the calling thread).
    assert (one, child, product) == (1, 1, 300)
