"""docker-compose.yml (and its HTTP-only override) and the Procfile describe one topology.

The compose files are validated against the Compose specification's JSON schema (vendored in
compose-spec/, see its README); the rest asserts what an operator relies on: migrations before
web, two Daphnes behind a TLS proxy with WebSocket upgrade, readiness on /readyz, one worker,
exactly one beat, and honcho's Procfile running the same processes with the same flags.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from cryptography import x509
from honcho.environ import parse_procfile

from tests.deploy import dockerfile
from tests.deploy.dockerfile import ROOT

DEPLOY = ROOT / "deploy"
SCHEMA = json.loads((Path(__file__).parent / "compose-spec" / "compose-spec.json").read_text())
COMPOSE = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
HTTP_ONLY = yaml.safe_load((DEPLOY / "docker-compose.http-only.yml").read_text())
APP_SERVICES = ("migrate", "web-1", "web-2", "worker", "beat")


def _image_cmd() -> list[str]:
    _args, stages = dockerfile.parse(dockerfile.DOCKERFILE.read_text())
    cmd = next(s for s in stages[-1].instructions if s.keyword == "CMD")
    return dockerfile.cmd_argv(cmd.args)


@pytest.mark.parametrize("name", ["docker-compose.yml", "docker-compose.http-only.yml"])
def test_compose_files_follow_the_compose_specification(name: str) -> None:
    document = yaml.safe_load((DEPLOY / name).read_text())
    jsonschema.Draft201909Validator(SCHEMA).validate(document)


def test_a_broken_compose_file_is_refused_by_the_schema() -> None:
    broken = {"services": {"web": {"depends_on": {"migrate": {"condition": "finished"}}}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft201909Validator(SCHEMA).validate(broken)


def test_migrations_finish_before_any_app_process_starts() -> None:
    services: dict[str, Any] = COMPOSE["services"]
    assert services["migrate"]["command"] == ["python", "manage.py", "migrate", "--no-input"]
    assert services["migrate"]["restart"] == "no"
    for name in ("web-1", "web-2", "worker", "beat"):
        condition = services[name]["depends_on"]["migrate"]["condition"]
        assert condition == "service_completed_successfully", name


def test_two_daphnes_ready_on_readyz_behind_a_tls_proxy() -> None:
    services: dict[str, Any] = COMPOSE["services"]
    for name in ("web-1", "web-2"):
        assert "command" not in services[name]  # the image's CMD: Daphne with its flags
        assert "/readyz" in " ".join(services[name]["healthcheck"]["test"])
    nginx = services["nginx"]
    assert nginx["depends_on"]["web-1"]["condition"] == "service_healthy"
    assert "443:443" in nginx["ports"]
    conf = (DEPLOY / "nginx" / "synapsia.conf").read_text()
    assert "listen 443 ssl" in conf and "ssl_certificate /etc/nginx/tls/cert.pem" in conf
    assert "return 301 https://" in conf
    for conf_name in ("synapsia.conf", "synapsia.http-only.conf"):
        conf = (DEPLOY / "nginx" / conf_name).read_text()
        assert "server web-1:8000" in conf and "server web-2:8000" in conf
        websocket = conf[conf.index("location /ws/") :]
        websocket = websocket[: websocket.index("}")]
        assert "proxy_set_header Upgrade $http_upgrade" in websocket
        assert "proxy_set_header Connection $connection_upgrade" in websocket
        timeout = re.search(r"proxy_read_timeout (\d+)s", websocket)
        assert timeout and int(timeout.group(1)) >= 3600
    assert (
        re.search(r"(?m)^\s*listen 443", (DEPLOY / "nginx" / "synapsia.http-only.conf").read_text())
        is None
    )


def test_each_daphne_runs_on_a_cpu_of_its_own_and_nothing_else_is_pinned() -> None:
    services: dict[str, Any] = COMPOSE["services"]
    cpus = {name: services[name]["environment"].get("SYNAPSIA_SERVER_CPU") for name in APP_SERVICES}
    assert cpus == {"migrate": None, "web-1": "0", "web-2": "1", "worker": None, "beat": None}
    for name in ("web-1", "web-2"):  # the app's environment kept, not replaced
        assert (
            services[name]["environment"]["DATABASE_URL"]
            == services["worker"]["environment"]["DATABASE_URL"]
        )


def test_exactly_one_worker_service_and_one_beat() -> None:
    services: dict[str, Any] = COMPOSE["services"]
    beats = [n for n, s in services.items() if "beat" in s.get("command", [])]
    workers = [n for n, s in services.items() if "worker" in s.get("command", [])]
    assert beats == ["beat"] and workers == ["worker"]
    assert "deploy" not in services["beat"]  # no replicas setting that could make it two


def test_http_only_turns_the_https_redirect_off_everywhere_the_app_runs() -> None:
    services: dict[str, Any] = HTTP_ONLY["services"]
    for name in APP_SERVICES:
        assert services[name]["environment"]["SYNAPSIA_SECURE_SSL_REDIRECT"] == "false", name
    mounts = services["nginx"]["volumes"]
    assert mounts == ["./nginx/synapsia.http-only.conf:/etc/nginx/conf.d/default.conf:ro"]
    # The same target as the TLS configuration, so compose replaces it instead of adding one.
    assert any(
        m.endswith(":/etc/nginx/conf.d/default.conf:ro")
        for m in COMPOSE["services"]["nginx"]["volumes"]
    )


def test_the_self_signed_certificate_names_the_allowed_hosts(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("selfsigned", DEPLOY / "tls" / "selfsigned.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.write_certificate(tmp_path, ["synapsia.example.org"]) is True
    assert module.write_certificate(tmp_path, ["other.example.org"]) is False  # kept
    certificate = x509.load_pem_x509_certificate((tmp_path / "cert.pem").read_bytes())
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "synapsia.example.org" in names.get_values_for_type(x509.DNSName)
    assert (tmp_path / "key.pem").stat().st_mode & 0o077 == 0


def test_the_procfile_runs_the_same_topology_with_the_images_flags() -> None:
    procfile = parse_procfile((ROOT / "Procfile").read_text())
    commands = {name: shlex.split(command) for name, command in procfile.processes.items()}
    assert sorted(commands) == ["beat", "web1", "web2", "worker"]
    image_flags = _image_cmd()[5:]  # after "daphne -b 0.0.0.0 -p 8000"
    for cpu, name in enumerate(("web1", "web2")):
        # Each on a CPU of its own, as in compose (the shell honcho runs a line with sets it).
        assert commands[name][0] == f"SYNAPSIA_SERVER_CPU={cpu}"
        assert commands[name][1] == "daphne" and commands[name][6:] == image_flags
    assert commands["worker"][:4] == ["celery", "-A", "synapsia", "worker"]
    assert [n for n, c in commands.items() if "beat" in c] == ["beat"]


def test_every_app_process_shares_the_deletion_journal_volume() -> None:
    services: dict[str, Any] = COMPOSE["services"]
    for name in APP_SERVICES:
        assert "journal:/var/lib/synapsia" in services[name]["volumes"], name
    assert "journal" in COMPOSE["volumes"]


def test_every_app_process_opens_the_key_store_on_the_shared_volume() -> None:
    """migrate seals vault items too: it must write the data keys where web will read them."""
    services: dict[str, Any] = COMPOSE["services"]
    for name in APP_SERVICES:
        path = services[name]["environment"]["SYNAPSIA_KEY_STORE_PATH"]
        assert path.startswith("/var/lib/synapsia/"), name
        assert "journal:/var/lib/synapsia" in services[name]["volumes"], name
