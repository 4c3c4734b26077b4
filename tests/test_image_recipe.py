"""The image's recipe and the deployment files, tested without a Docker engine or a cluster.

- The Dockerfile's build stage runs deploy/build.sh; here the same script builds a fresh
  virtualenv, and the installed command runs on a generated page (slow: it installs from
  the package index, pinned by deploy/constraints.txt).
- The Dockerfile's shape: multi-stage, non-root, exec-form entrypoint, the state volume,
  a healthcheck on the liveness endpoint.
- The Kubernetes manifests and the compose file parse, and every DETEMPLATE_* variable they
  set is a worker setting whose value the worker accepts.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from detemplate import settings as settings_mod

from tests.factories import make_site, write_jsonl

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
SETTING_NAMES = {
    settings_mod.ENV_PREFIX + f.name.upper()
    for kind in (settings_mod.StreamSettings, settings_mod.WalkSettings)
    for f in fields(kind)
}
METRICS_PORT = 8780


# -- the Dockerfile ----------------------------------------------------------------------------


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile as stages of (INSTRUCTION, arguments), continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    joined = re.sub(r"\\\n", " ", text)
    stages: list[list[tuple[str, str]]] = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instr, _, rest = line.partition(" ")
        instr = instr.upper()
        if instr == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((instr, rest.strip()))
        else:
            assert instr == "ARG", f"only ARG may come before the first FROM, not {instr}"
    return stages


def only(stage: list[tuple[str, str]], instr: str) -> list[str]:
    return [rest for i, rest in stage if i == instr]


def test_dockerfile_is_multi_stage_slim_and_non_root() -> None:
    stages = dockerfile_stages()
    assert len(stages) >= 2
    build, runtime = stages[0], stages[-1]
    assert all("-slim" in only(s, "FROM")[0] for s in stages)
    assert only(build, "FROM")[0].endswith("AS build")
    # The build stage runs the tested recipe, and the runtime takes only its virtualenv.
    assert any("deploy/build.sh /opt/venv" in run for run in only(build, "RUN"))
    # A build whose compiled page walk does not load fails, and the worker refuses to start without it.
    assert any("REQUIRE_COMPILED=1 deploy/build.sh" in run for run in only(build, "RUN"))
    assert only(runtime, "COPY") == ["--from=build /opt/venv /opt/venv"]
    user = only(runtime, "USER")
    assert user and user[-1].split(":")[0] not in ("root", "0")
    args = dict(a.split("=", 1) for a in only(runtime, "ARG") if "=" in a)
    assert args.get("UID", "0") != "0"
    # Exec form (a JSON array), so SIGTERM goes to detemplate itself, not to a shell.
    entry = json.loads(only(runtime, "ENTRYPOINT")[-1])
    assert entry == ["detemplate"]
    assert json.loads(only(runtime, "CMD")[-1]) == ["worker"]
    env = " ".join(only(runtime, "ENV"))
    assert "DETEMPLATE_REQUIRE_COMPILED=1" in env
    assert "OPENBLAS_NUM_THREADS=1" in env  # numpy's BLAS with one thread from its start
    data_dir = re.search(r"DETEMPLATE_DATA_DIR=(\S+)", env)
    assert data_dir is not None
    assert json.loads(only(runtime, "VOLUME")[-1]) == [data_dir.group(1)]
    assert only(runtime, "EXPOSE") == [str(METRICS_PORT)]
    health = only(runtime, "HEALTHCHECK")[-1]
    cmd = json.loads(health.split(" CMD ", 1)[1])
    assert cmd[0] == "python"  # the slim image has no curl
    assert "http://127.0.0.1:{port}/healthz" in cmd[-1] and f"'{METRICS_PORT}'" in cmd[-1]
    # The check itself: it asks a real liveness endpoint and exits 0 only on 200.
    from detemplate.stream.metrics import Metrics

    metrics = Metrics()
    server = metrics.start_server("127.0.0.1", 0)
    try:
        env = {**os.environ, "DETEMPLATE_METRICS_PORT": str(server.port)}
        assert subprocess.run([sys.executable, *cmd[1:]], env=env, timeout=30, check=False).returncode == 0
        metrics.beat()
        metrics.liveness_timeout_s = -1.0  # the loop stopped beating
        assert subprocess.run([sys.executable, *cmd[1:]], env=env, timeout=30, check=False).returncode != 0
    finally:
        server.stop()
    # Every file the build copies exists.
    for stage in stages:
        for copy in only(stage, "COPY"):
            parts = [p for p in shlex.split(copy) if not p.startswith("--")]
            if "--from=" in copy:
                continue
            for src in parts[:-1]:
                assert (ROOT / src).exists(), src


def test_recipe_pins_every_runtime_package() -> None:
    lines = [x for x in (DEPLOY / "constraints.txt").read_text().splitlines() if x and not x.startswith("#")]
    pins = dict(x.split("==") for x in lines)
    for name in ("faust-streaming", "aiokafka", "selectolax", "rocksdict", "xxhash", "prometheus-client"):
        assert name in pins, name
    assert "pytest" not in pins and "matplotlib" not in pins  # dev and report extras stay out


@pytest.mark.slow
def test_recipe_builds_a_venv_that_runs(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHON"] = base
    if shutil.which("cc") or shutil.which("gcc"):
        env["REQUIRE_COMPILED"] = "1"  # as the image builds it
    build = subprocess.run(
        ["sh", str(DEPLOY / "build.sh"), str(venv), str(ROOT)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=900,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    assert "detemplate 0.1.0" in build.stdout

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(venv / "bin" / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=300,
            check=False,
        )

    # The package comes from the wheel in the venv, not from this checkout.
    where = run("python", "-c", "import detemplate, faust, prometheus_client; print(detemplate.__file__)")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(venv)
    helped = run("detemplate", "--help")
    assert helped.returncode == 0 and "run" in helped.stdout and "worker" in helped.stdout
    assert run("detemplate", "worker", "--help").returncode == 0  # the stream extra is installed
    metrics = run("python", "-c", "from detemplate.stream.metrics import Metrics; print(Metrics().scrape().decode())")
    assert "detemplate_pages_in_total 0.0" in metrics.stdout, metrics.stderr

    src = write_jsonl(make_site("img.example", 8, seed=7), tmp_path / "in.jsonl")
    out = tmp_path / "out.jsonl"
    done = run("detemplate", "run", str(src), "--output", str(out))
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 8 and all("error" not in r for r in records)
    assert records[-1]["counts"]["template_blocks"] > 0  # the template was learned in the venv, too


# -- Kubernetes and compose ------------------------------------------------------------------


def yaml_module() -> Any:
    return pytest.importorskip("yaml", reason="PyYAML is needed to parse the manifests (pip install pyyaml)")


def load_k8s() -> dict[str, dict[str, Any]]:
    """Every manifest of deploy/k8s by kind."""
    yaml = yaml_module()
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc:
                assert doc["kind"] not in out, f"two {doc['kind']} manifests"
                out[doc["kind"]] = doc
    return out


def check_settings(env: dict[str, Any], where: str) -> settings_mod.StreamSettings:
    names = {k for k in env if k.startswith("DETEMPLATE_")}
    unknown = names - SETTING_NAMES
    assert not unknown, f"{where}: not worker settings: {sorted(unknown)}"
    return settings_mod.load({k: str(v) for k, v in env.items()})  # raises ConfigError on a bad value


def test_k8s_manifests() -> None:
    docs = load_k8s()
    assert {"Kustomization", "Namespace", "ConfigMap", "Service", "StatefulSet", "PodDisruptionBudget", "Job"} <= set(
        docs
    )
    kust = docs["Kustomization"]
    for res in kust["resources"]:
        assert (K8S / res).is_file(), res
    for gen in kust["configMapGenerator"]:
        for f in gen["files"]:
            assert (K8S / f).is_file(), f

    cm = docs["ConfigMap"]
    settings = check_settings(cm["data"], "configmap.yaml")
    assert not settings.tansu
    sts = docs["StatefulSet"]
    spec = sts["spec"]
    assert 1 <= spec["replicas"] <= settings.partitions  # a replica beyond the partitions idles
    pod = spec["template"]
    labels = pod["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert docs["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert docs["Service"]["spec"]["selector"].items() <= labels.items()
    assert spec["serviceName"] == docs["Service"]["metadata"]["name"]
    pspec = pod["spec"]
    assert pspec["terminationGracePeriodSeconds"] >= 30
    assert pspec["securityContext"]["runAsNonRoot"] is True
    (container,) = pspec["containers"]
    assert container["envFrom"] == [{"configMapRef": {"name": cm["metadata"]["name"]}}]
    check_settings({e["name"]: e.get("value", "") for e in container.get("env", [])}, "statefulset.yaml")
    # The volume claim per replica is mounted where the worker keeps its RocksDB state.
    (claim,) = spec["volumeClaimTemplates"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == settings.data_dir
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    # Probes and scraping on the metrics server's port and paths (worker/stream/metrics.py).
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == METRICS_PORT
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    for annotated in (pod["metadata"]["annotations"], docs["Service"]["metadata"]["annotations"]):
        assert annotated["prometheus.io/scrape"] == "true"
        assert annotated["prometheus.io/port"] == str(METRICS_PORT)
        assert annotated["prometheus.io/path"] == "/metrics"
    res = container["resources"]
    assert {"cpu", "memory"} <= res["requests"].keys() and "memory" in res["limits"]
    # The topics Job creates as many input partitions as the workers expect.
    job_env = {e["name"]: e["value"] for e in docs["Job"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert int(job_env["PARTITIONS"]) == settings.partitions


def test_compose_runs_kraft_kafka_topics_and_two_workers() -> None:
    compose = yaml_module().safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    services = compose["services"]
    kafka = services["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    assert "controller" in kafka["environment"]["KAFKA_PROCESS_ROLES"]  # KRaft: no ZooKeeper
    assert not any("zookeeper" in name for name in services)
    topics = services["topics"]
    assert topics["depends_on"]["kafka"]["condition"] == "service_healthy"
    script = topics["volumes"][0].split(":")[0]
    assert (DEPLOY / script).resolve() == (K8S / "create-topics.sh").resolve()
    workers = [name for name, svc in services.items() if svc.get("image") == "detemplate:local"]
    assert len(workers) == 2
    data_volumes = set()
    for name in workers:
        svc = services[name]
        settings = check_settings(svc["environment"], f"compose.yaml {name}")
        assert settings.broker == "kafka://kafka:9092"
        assert settings.partitions == int(topics["environment"]["PARTITIONS"])
        assert svc["depends_on"]["topics"]["condition"] == "service_completed_successfully"
        assert (DEPLOY / svc["build"]["context"] / svc["build"]["dockerfile"]).resolve() == ROOT / "Dockerfile"
        (volume,) = svc["volumes"]
        vol_name, path = volume.split(":")
        assert path == settings.data_dir
        data_volumes.add(vol_name)
    assert len(data_volumes) == 2  # each worker has its own state


def test_create_topics_script_is_valid_sh() -> None:
    script = K8S / "create-topics.sh"
    assert subprocess.run(["sh", "-n", str(script)], check=False).returncode == 0
    text = script.read_text(encoding="utf-8")
    # The state changelog is compacted; the input is not.
    assert re.search(r'create "\$TOPIC_STATE" "\$PARTITIONS" cleanup\.policy=compact', text)
    assert re.search(r'create "\$TOPIC_RAW" "\$PARTITIONS" cleanup\.policy=delete', text)
