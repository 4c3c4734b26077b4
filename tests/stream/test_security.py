"""Security: broker authentication settings, and an engine that runs nothing from the pages.

- Broker security settings (detemplate.settings) -> Faust's `broker_credentials` and the
  aiokafka client arguments of `produce`/`consume`, checked against what Faust itself
  derives for its clients, and against aiokafka's own constructors; incomplete or
  contradictory settings fail at start with the variable to fix.
- The engine executes nothing, fetches nothing and follows no link: pages full of
  scripts, remote images, frames, stylesheets, refreshes, a <base href> and an external
  DTD are decided (offline command, stream decoding, cleaned HTML) while every way of
  opening a connection, resolving a name or starting a process is blocked and recorded;
  none may be attempted. The guard's own test shows it catches each of those.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from detemplate.engine.errors import ConfigError
from detemplate.engine.model import RawPage
from detemplate.engine.params import EngineParams
from detemplate.engine.pipeline import decide
from detemplate.engine.table import HostTable
from detemplate.io.codec import encode_clean
from detemplate.settings import StreamSettings, load

from tests.factories import make_site, write_jsonl, write_warc

ROOT = Path(__file__).resolve().parents[2]

# -- test certificates -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CA, a client certificate signed by it with its key, and an unrelated key (openssl CLI)."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make test certificates")
    d = tmp_path_factory.mktemp("pki")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=detemplate-test-ca")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "client.key", "-out", "client.csr",
        "-subj", "/CN=detemplate-worker")
    run("x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "client.pem", "-days", "2")
    run("genpkey", "-algorithm", "RSA", "-out", "other.key")
    (d / "password").write_text("s3cret-from-file\n")
    (d / "empty").write_text("")
    (d / "not-a-cert.pem").write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    names = {"ca": "ca.pem", "client": "client.pem", "client_key": "client.key", "other_key": "other.key",
             "password": "password", "empty": "empty", "not-a-cert": "not-a-cert.pem"}
    return {k: d / v for k, v in names.items()}


# -- settings -> credentials and client arguments ------------------------------------------------


def test_plaintext_is_the_default_and_has_no_credentials() -> None:
    s = load({})
    assert s.security_protocol == "PLAINTEXT"
    assert s.broker_credentials() is None
    assert s.kafka_client_kwargs() == {"security_protocol": "PLAINTEXT"}
    assert s.ssl_context() is None


def test_sasl_plaintext_scram_from_the_environment() -> None:
    import faust
    from faust.types.auth import AuthProtocol, SASLMechanism

    s = load({
        "DETEMPLATE_SECURITY_PROTOCOL": "sasl_plaintext",  # case does not matter
        "DETEMPLATE_SASL_MECHANISM": "scram-sha-512",
        "DETEMPLATE_SASL_USERNAME": "worker",
        "DETEMPLATE_SASL_PASSWORD": "pw",
    })
    assert (s.security_protocol, s.sasl_mechanism) == ("SASL_PLAINTEXT", "SCRAM-SHA-512")
    creds = s.broker_credentials()
    assert isinstance(creds, faust.SASLCredentials)
    assert creds.protocol is AuthProtocol.SASL_PLAINTEXT
    assert creds.mechanism is SASLMechanism.SCRAM_SHA_512
    assert (creds.username, creds.password, creds.ssl_context) == ("worker", "pw", None)
    assert s.kafka_client_kwargs() == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "worker",
        "sasl_plain_password": "pw",
    }


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_ssl_with_password_file_ca_and_client_certificate(pki: dict[str, Path], mechanism: str) -> None:
    import faust
    from faust.types.auth import AuthProtocol

    s = load({
        "DETEMPLATE_SECURITY_PROTOCOL": "SASL_SSL",
        "DETEMPLATE_SASL_MECHANISM": mechanism,
        "DETEMPLATE_SASL_USERNAME": "worker",
        "DETEMPLATE_SASL_PASSWORD_FILE": str(pki["password"]),
        "DETEMPLATE_SSL_CAFILE": str(pki["ca"]),
        "DETEMPLATE_SSL_CERTFILE": str(pki["client"]),
        "DETEMPLATE_SSL_KEYFILE": str(pki["client_key"]),
    })
    assert s.sasl_secret() == "s3cret-from-file"  # the file's trailing newline is not part of it
    creds = s.broker_credentials()
    assert isinstance(creds, faust.SASLCredentials)
    assert creds.protocol is AuthProtocol.SASL_SSL
    assert creds.mechanism.value == mechanism
    assert creds.password == "s3cret-from-file"
    ctx = creds.ssl_context
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    # The CA file was loaded (one CA, and nothing from the system store was asked for).
    assert [c["subject"] for c in ctx.get_ca_certs()] == [((("commonName", "detemplate-test-ca"),),)]
    kw = s.kafka_client_kwargs()
    assert kw["security_protocol"] == "SASL_SSL" and kw["sasl_mechanism"] == mechanism
    assert isinstance(kw["ssl_context"], ssl.SSLContext)


def test_ssl_only_and_hostname_check_off(pki: dict[str, Path]) -> None:
    import faust

    s = StreamSettings(security_protocol="SSL", ssl_cafile=str(pki["ca"]), ssl_check_hostname=False)
    creds = s.broker_credentials()
    assert isinstance(creds, faust.SSLCredentials)
    assert creds.protocol.value == "SSL"
    assert not creds.context.check_hostname
    assert creds.context.verify_mode == ssl.CERT_REQUIRED  # the chain is still verified
    kw = s.kafka_client_kwargs()
    assert set(kw) == {"security_protocol", "ssl_context"} and kw["security_protocol"] == "SSL"


def _settings_cases(pki: dict[str, Path]) -> list[StreamSettings]:
    return [
        StreamSettings(),
        StreamSettings(security_protocol="SSL", ssl_cafile=str(pki["ca"])),
        StreamSettings(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256", sasl_username="u",
                       sasl_password="p"),
        StreamSettings(security_protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_username="u",
                       sasl_password_file=str(pki["password"]), ssl_cafile=str(pki["ca"]),
                       ssl_certfile=str(pki["client"]), ssl_keyfile=str(pki["client_key"])),
    ]


def _comparable(kw: Any) -> dict[str, Any]:
    out = dict(kw)
    ctx = out.pop("ssl_context", None)
    if ctx is not None:
        out["ssl"] = (ctx.verify_mode, ctx.check_hostname, [c["subject"] for c in ctx.get_ca_certs()])
    return out


def test_faust_derives_the_same_client_arguments_as_produce_and_consume(pki: dict[str, Path]) -> None:
    """The worker's Faust clients and the commands' plain aiokafka clients authenticate alike."""
    from detemplate.stream.app import build_app
    from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

    for s in _settings_cases(pki):
        expected = _comparable(s.kafka_client_kwargs())
        if s.security_protocol == "PLAINTEXT":
            assert s.broker_credentials() is None
            continue
        assert _comparable(credentials_to_aiokafka_auth(s.broker_credentials())) == expected, s.security_protocol
        # And build_app hands them to the app the worker runs.
        app, _ = build_app(s.with_overrides(metrics_port=-1))
        assert _comparable(credentials_to_aiokafka_auth(app.conf.broker_credentials)) == expected


def test_aiokafka_accepts_the_client_arguments(pki: dict[str, Path]) -> None:
    """aiokafka's constructors validate SASL and SSL arguments: ours must pass, for both clients."""
    import asyncio

    from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped]  # no stubs
    from detemplate.stream.kafka_io import producer

    async def build(s: StreamSettings) -> None:
        kw = s.kafka_client_kwargs()
        prod = producer("127.0.0.1:1", security=kw)  # nothing connects before start()
        assert prod.client._security_protocol == s.security_protocol
        cons = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1", **kw)
        assert cons._client._sasl_mechanism == kw.get("sasl_mechanism", "PLAIN")
        await prod.stop()  # never started: closes the client objects without a connection
        await cons.stop()

    for s in _settings_cases(pki):
        asyncio.run(build(s))


def test_the_password_is_never_shown() -> None:
    s = StreamSettings(security_protocol="SASL_SSL", sasl_username="worker", sasl_password="hunter2-secret")
    assert "hunter2-secret" not in repr(s)
    assert "hunter2-secret" not in repr(s.broker_credentials())


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DETEMPLATE_SECURITY_PROTOCOL": "SASL_SSL", "DETEMPLATE_SASL_USERNAME": "u"}, "needs a password"),
        ({"DETEMPLATE_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "DETEMPLATE_SASL_PASSWORD": "p"},
         "DETEMPLATE_SASL_USERNAME"),
        ({"DETEMPLATE_SECURITY_PROTOCOL": "SASL_SSL", "DETEMPLATE_SASL_USERNAME": "u",
          "DETEMPLATE_SASL_PASSWORD": "p", "DETEMPLATE_SASL_PASSWORD_FILE": "/x"}, "not both"),
        ({"DETEMPLATE_SECURITY_PROTOCOL": "SASL_SSL", "DETEMPLATE_SASL_USERNAME": "u",
          "DETEMPLATE_SASL_PASSWORD_FILE": "/nonexistent/detemplate/password"}, "cannot read"),
        ({"DETEMPLATE_SECURITY_PROTOCOL": "SASL_SSL", "DETEMPLATE_SASL_USERNAME": "u",
          "DETEMPLATE_SASL_PASSWORD": "p", "DETEMPLATE_SASL_MECHANISM": "GSSAPI"}, "DETEMPLATE_SASL_MECHANISM"),
        ({"DETEMPLATE_SECURITY_PROTOCOL": "SSL", "DETEMPLATE_SSL_CAFILE": "/nonexistent/detemplate/ca.pem"},
         "DETEMPLATE_SSL_CAFILE: no such file"),
        ({"DETEMPLATE_SECURITY_PROTOCOL": "TLS"}, "DETEMPLATE_SECURITY_PROTOCOL must be one of"),
        ({"DETEMPLATE_SSL_CAFILE": "/etc/ssl/ca.pem"}, "SECURITY_PROTOCOL is PLAINTEXT"),
        ({"DETEMPLATE_SASL_USERNAME": "u", "DETEMPLATE_SASL_PASSWORD": "p"}, "use SASL_SSL or SASL_PLAINTEXT"),
        ({"DETEMPLATE_SECURITY_PROTOCOL": "SSL", "DETEMPLATE_SASL_USERNAME": "u"}, "SECURITY_PROTOCOL is SSL"),
    ],
)
def test_incomplete_or_contradictory_settings_are_refused(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(env)


def test_bad_certificate_files_are_refused(pki: dict[str, Path]) -> None:
    base = {"security_protocol": "SSL", "ssl_cafile": str(pki["ca"])}
    with pytest.raises(ConfigError, match="both DETEMPLATE_SSL_CERTFILE and DETEMPLATE_SSL_KEYFILE"):
        StreamSettings(**base, ssl_certfile=str(pki["client"]))
    with pytest.raises(ConfigError, match="cannot load the client certificate"):
        StreamSettings(**base, ssl_certfile=str(pki["client"]), ssl_keyfile=str(pki["other_key"]))  # wrong key
    with pytest.raises(ConfigError, match="DETEMPLATE_SSL_CAFILE: cannot load"):
        StreamSettings(security_protocol="SSL", ssl_cafile=str(pki["not-a-cert"]))
    with pytest.raises(ConfigError, match="is empty"):
        StreamSettings(security_protocol="SASL_SSL", sasl_username="u", sasl_password_file=str(pki["empty"]))


def test_command_flags_override_the_environment(pki: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from detemplate.cli import build_parser
    from detemplate.stream.commands import _settings

    monkeypatch.setenv("DETEMPLATE_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("DETEMPLATE_SASL_USERNAME", "from-env")
    monkeypatch.setenv("DETEMPLATE_SASL_PASSWORD", "env-pw")
    args = build_parser().parse_args([
        "consume", "--topic", "pages.clean", "--security-protocol", "sasl_ssl", "--sasl-mechanism",
        "scram-sha-256", "--sasl-username", "from-flag", "--ssl-cafile", str(pki["ca"]), "--no-ssl-check-hostname",
    ])
    s = _settings(args)
    assert (s.security_protocol, s.sasl_mechanism, s.sasl_username) == ("SASL_SSL", "SCRAM-SHA-256", "from-flag")
    assert s.sasl_secret() == "env-pw" and s.ssl_cafile == str(pki["ca"]) and not s.ssl_check_hostname
    # Every stream command that talks to a broker has the flags.
    for cmd in (["worker"], ["produce", "x.jsonl"], ["consume", "--topic", "t"]):
        parsed = build_parser().parse_args([*cmd, "--sasl-password-file", "/run/pw"])
        assert parsed.sasl_password_file == "/run/pw"


def test_a_bad_setting_is_a_clean_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from detemplate.cli import main

    code = main(["consume", "--topic", "t", "--security-protocol", "SSL", "--ssl-cafile", "/nonexistent/ca.pem"])
    assert code == 2
    assert "DETEMPLATE_SSL_CAFILE: no such file" in capsys.readouterr().err


def test_the_k8s_secret_example_turns_into_working_settings(tmp_path: Path, pki: dict[str, Path]) -> None:
    """deploy/k8s: the ConfigMap's security lines, switched to SASL_SSL as the comments say, with the
    Secret's keys as files where the StatefulSet mounts them, give valid settings and credentials."""
    yaml = pytest.importorskip("yaml")
    k8s = ROOT / "deploy" / "k8s"
    cm = yaml.safe_load((k8s / "configmap.yaml").read_text())
    secret = yaml.safe_load((k8s / "secret.example.yaml").read_text())
    sts = yaml.safe_load((k8s / "statefulset.yaml").read_text())
    pod = sts["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    vol = next(v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == secret["metadata"]["name"])
    assert vol["secret"].get("optional") is True  # a PLAINTEXT cluster needs no Secret
    mount = next(m for m in container["volumeMounts"] if m["name"] == vol["name"])
    assert mount["readOnly"] is True
    data = cm["data"]
    assert load({k: str(v) for k, v in data.items()}).security_protocol == "PLAINTEXT"  # shipped as is
    # The commented SASL_SSL lines, as an operator would uncomment them.
    lines = (k8s / "configmap.yaml").read_text().splitlines()
    enabled = dict(data)
    for line in lines:
        stripped = line.strip().removeprefix("# ").strip()
        if stripped.startswith("DETEMPLATE_") and ":" in stripped and line.strip().startswith("#"):
            key, _, value = stripped.partition(":")
            enabled[key.strip()] = value.strip().strip('"')
    assert enabled["DETEMPLATE_SECURITY_PROTOCOL"] == "SASL_SSL"
    # Files of the Secret, under a stand-in for the mount path.
    root = tmp_path / "secret"
    root.mkdir()
    keys = set(secret.get("stringData", {})) | set(secret.get("data", {}))
    assert {"sasl-password", "ca.crt"} <= keys
    (root / "sasl-password").write_text("pw\n")
    shutil.copy(pki["ca"], root / "ca.crt")
    shutil.copy(pki["client"], root / "tls.crt")  # the client-certificate lines are uncommented too
    shutil.copy(pki["client_key"], root / "tls.key")
    env = {}
    for k, v in enabled.items():
        v = str(v)
        if v.startswith(mount["mountPath"] + "/"):
            v = str(root / v.removeprefix(mount["mountPath"] + "/"))
        env[k] = v
    s = load(env)
    assert s.security_protocol == "SASL_SSL" and s.sasl_secret() == "pw"
    assert s.broker_credentials().ssl_context is not None


# -- the engine runs nothing from a page --------------------------------------------------------

EVIL = "evil.invalid"

HOSTILE_HEAD = f"""
<!DOCTYPE html SYSTEM "http://{EVIL}/x.dtd" [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<base href="http://{EVIL}/base/">
<meta http-equiv="refresh" content="0; url=http://{EVIL}/refresh">
<meta http-equiv="set-cookie" content="a=b">
<link rel="stylesheet" href="http://{EVIL}/style.css">
<link rel="preload" as="script" href="http://{EVIL}/preload.js">
<link rel="prefetch" href="http://{EVIL}/prefetch.html">
<link rel="dns-prefetch" href="//dns.{EVIL}">
<link rel="import" href="http://{EVIL}/import.html">
<link rel="manifest" href="http://{EVIL}/manifest.json">
<script src="http://{EVIL}/a.js"></script>
<script>fetch("http://{EVIL}/fetch"); document.write("<p>WRITTEN BY SCRIPT</p>"); new Image().src = "http://{EVIL}/b";</script>
<script type="module">import "http://{EVIL}/m.js";</script>
<style>@import url(http://{EVIL}/i.css); body {{ background: url(http://{EVIL}/bg.png) }}</style>
"""

HOSTILE_BODY = f"""
<div onload="fetch('http://{EVIL}/onload')" onmouseover="alert(1)">
<img src="http://{EVIL}/pixel.gif" srcset="http://{EVIL}/2x.gif 2x" onerror="fetch('http://{EVIL}/err')">
<iframe src="http://{EVIL}/frame.html"></iframe>
<iframe srcdoc="&lt;script&gt;fetch('http://{EVIL}/srcdoc')&lt;/script&gt;"></iframe>
<object data="http://{EVIL}/o.swf"></object><embed src="http://{EVIL}/e.swf">
<video src="http://{EVIL}/v.mp4" poster="http://{EVIL}/p.jpg"><track src="http://{EVIL}/t.vtt"></video>
<audio src="http://{EVIL}/a.mp3"></audio>
<svg><image href="http://{EVIL}/svg.png"/><script>fetch('http://{EVIL}/svg')</script></svg>
<form action="http://{EVIL}/post" method="post"><input type="image" src="http://{EVIL}/in.png"></form>
<a href="javascript:fetch('http://{EVIL}/js')">run me</a> <a href="http://{EVIL}/next.html">next page</a>
<a href="//{EVIL}/protocol-relative">relative</a> <a href="next.html">base-relative</a>
<noscript><img src="http://{EVIL}/noscript.gif"></noscript>
<template><img src="http://{EVIL}/template.gif"></template>
<!--[if IE]><script src="http://{EVIL}/ie.js"></script><![endif]-->
<?xml-stylesheet href="http://{EVIL}/x.xsl"?>
<p>&xxe; entity text</p>
</div>
"""

# Events of Python's audit hooks (PEP 578) that mean: a name lookup, a connection, a
# program started, a URL opened. Raised by the C code too, so no path escapes them.
WATCHED_EVENTS = (
    "socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
    "socket.sendto", "socket.sendmsg", "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
    "os.spawn", "os.fork", "os.forkpty", "os.startfile", "urllib.Request", "webbrowser.open",
)
_watch: list[list[str]] = []  # the attempts list of the guard in force, if any


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _watch and event in WATCHED_EVENTS:
        _watch[-1].append(f"{event}{args!r}"[:200])


sys.addaudithook(_audit)  # hooks cannot be removed; it does nothing outside a guard


@pytest.fixture
def no_network_no_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Block and record every connection, name lookup and process start while the test runs."""
    attempts: list[str] = []

    def refuse(what: str) -> Callable[..., Any]:
        def blocked(*args: Any, **kwargs: Any) -> Any:
            attempts.append(f"{what}{args[1:3]!r}")
            raise AssertionError(f"the engine tried {what}")

        return blocked

    for name in ("connect", "connect_ex", "sendto"):
        monkeypatch.setattr(socket.socket, name, refuse(f"socket.socket.{name}"))
    for name in ("create_connection", "getaddrinfo", "gethostbyname", "gethostbyname_ex", "socketpair"):
        monkeypatch.setattr(socket, name, refuse(f"socket.{name}"))
    monkeypatch.setattr(subprocess, "Popen", refuse("subprocess.Popen"))
    for name in ("system", "popen", "fork", "execv", "execve", "execvp", "posix_spawn", "posix_spawnp", "spawnv"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refuse(f"os.{name}"))
    _watch.append(attempts)
    try:
        yield attempts
    finally:
        _watch.remove(attempts)


def test_the_guard_sees_connections_lookups_and_processes(no_network_no_processes: list[str]) -> None:
    """The guard itself: each blocked path is recorded (else the tests below would prove nothing)."""
    def connect() -> None:
        with socket.socket() as s:
            s.connect(("127.0.0.1", 9))

    tries: list[Callable[[], Any]] = [
        lambda: socket.create_connection(("127.0.0.1", 9), timeout=0.1),
        connect,
        lambda: socket.getaddrinfo(EVIL, 80),
        lambda: subprocess.run(["true"], check=False),
        lambda: os.system("true"),
    ]
    for n, attempt in enumerate(tries, start=1):
        with pytest.raises(AssertionError, match="the engine tried"):
            attempt()
        assert len(no_network_no_processes) >= n
    # The audit hook sees what bypasses the Python-level functions (the C socket type).
    import _socket

    s = _socket.socket()
    try:
        with pytest.raises(OSError):
            s.connect(("127.0.0.1", 9))  # nothing listens there; refused, but attempted
    finally:
        s.close()
    assert any(a.startswith("socket.connect(") for a in no_network_no_processes)


def _hostile_site(n: int) -> list[RawPage]:
    """A generated site whose every page carries the hostile head and body (template and content alike)."""
    pages = []
    for sp in make_site("hostile.example", n, seed=3, layout="news"):
        html = sp.page.html.replace("</head>", HOSTILE_HEAD + "</head>", 1)
        html = html.replace("<main>", "<main>" + HOSTILE_BODY, 1)
        pages.append(RawPage(sp.page.url, html, sp.page.host, sp.page.source))
    return pages


def _check_clean_text(text: str) -> None:
    assert "WRITTEN BY SCRIPT" not in text  # no script ran
    assert "fetch(" not in text and "import " not in text  # script and style text is not content
    assert "root:" not in text  # the external entity was not resolved


def test_deciding_hostile_pages_executes_and_fetches_nothing(no_network_no_processes: list[str]) -> None:
    params = EngineParams()
    table = HostTable(params.table)
    pages = _hostile_site(12)
    for page in pages:
        outcome = decide(page, table, params, with_html=True)
        assert outcome.clean is not None, outcome.dead
        clean = outcome.clean
        _check_clean_text(clean.text)
        record = json.loads(encode_clean(clean))
        # Links are reported as data, resolved as text (the <base href> applies), never requested.
        assert all(isinstance(u, str) for group in record["links"].values() for u in group)
    assert table.pages == 12
    assert record["counts"]["template_blocks"] > 0  # the template path ran too
    assert no_network_no_processes == []


def test_offline_run_and_stream_decoding_execute_and_fetch_nothing(
    tmp_path: Path, no_network_no_processes: list[str]
) -> None:
    from detemplate.cli import main
    from detemplate.stream.app import decode_message
    from detemplate.stream.kafka_io import encode_raw

    pages = _hostile_site(8)
    # Inputs are written before the guard matters (writing files is allowed; it only records).
    write_warc(pages, tmp_path / "crawl.warc.gz")
    write_jsonl(pages, tmp_path / "pages.jsonl")
    out = tmp_path / "clean.jsonl"
    # One job: the guard watches this process (`--jobs` N starts N processes of its own, which
    # decide with the same code).
    code = main(["run", str(tmp_path / "crawl.warc.gz"), str(tmp_path / "pages.jsonl"), "--html",
                 "--output", str(out), "--state", str(tmp_path / "state"), "--jobs", "1"])
    assert code == 0
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 16 and all("error" not in r for r in records)
    for r in records:
        _check_clean_text(r["text"])  # (r["html"] is the page's own markup less template text: scripts stay)
    for n, page in enumerate(pages):
        decoded = decode_message(page.host.encode(), encode_raw(page), f"pages.raw/0/{n}")
        assert isinstance(decoded, RawPage) and decoded.html == page.html
    assert no_network_no_processes == []
