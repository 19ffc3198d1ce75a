"""deploy/Dockerfile builds and the result serves, proven without a Docker engine.

The replay reads the Dockerfile's COPY lines and .dockerignore, lays the build's file set out
under a temporary root (every absolute path in the Dockerfile is mapped below it), runs the
RUN steps as written (a fresh virtual environment, the pinned install, collectstatic with the
build-only placeholders) and starts the CMD (Daphne) on a loopback port.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.deploy import dockerfile
from tests.deploy.dockerfile import ROOT

# One replay is enough: it builds its own environment, whatever the pass's profile
# (PROFILE_FREE in tests/conftest.py: it runs in the embedded pass only).
pytestmark = pytest.mark.e2e

PIP_CACHE = os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
_ARGS, STAGES = dockerfile.parse(dockerfile.DOCKERFILE.read_text())
FINAL = STAGES[-1]


def _absolute_paths() -> list[str]:
    """Every absolute path the Dockerfile writes to or reads from another stage."""
    paths = set()
    for stage in STAGES:
        for step in stage.instructions:
            if step.keyword == "WORKDIR":
                paths.add(step.args)
            if step.keyword == "COPY":
                words = step.args.split()
                if words[-1].startswith("/"):
                    paths.add(words[-1].rstrip("/"))
                if "from" in step.flags:
                    paths.update(w.rstrip("/") for w in words[:-1])
            if step.keyword == "RUN" and "mkdir -p " in step.args:
                created = step.args.split("mkdir -p ", 1)[1].split("&&")[0].split()
                paths.update(w.rstrip("/") for w in created if w.startswith("/"))
    return sorted(paths, key=len, reverse=True)


def _mapper(root: Path):  # type: ignore[no-untyped-def]
    alternatives = "|".join(re.escape(p) for p in _absolute_paths())
    pattern = re.compile(rf"(?<![\w./-])({alternatives})(?=[/\s:;\"']|$)")
    return lambda text: pattern.sub(lambda m: str(root) + m.group(1), text)


def _copy_context(destination: Path) -> None:
    for relative in dockerfile.context_files():
        target = destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / relative, target)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Replay every stage; returns the final stage's root, working directory, env and CMD."""
    tmp = tmp_path_factory.mktemp("image")
    root = tmp / "root"
    root.mkdir()
    shims = tmp / "shims"
    shims.mkdir()
    # The base image's python is the interpreter this suite runs on (same minor version).
    base_python = getattr(sys, "_base_executable", sys.executable)
    (shims / "python").symlink_to(base_python)
    # Users are the one thing a replay cannot create; the steps that need them are no-ops.
    (shims / "useradd").write_text("#!/bin/sh\nexit 0\n")
    (shims / "useradd").chmod(0o755)
    mapped = _mapper(root)
    env: dict[str, str] = {}
    cwd = root
    cmd: list[str] = []
    timings: dict[str, float] = {}
    for stage in STAGES:
        env = {"PATH": f"{shims}:/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp), "LANG": "C.UTF-8"}
        cwd = root
        for step in stage.instructions:
            if step.keyword == "ENV":
                for key, value in dockerfile.env_pairs(step.args):
                    env[key] = mapped(value).replace("$PATH", env.get("PATH", ""))
            elif step.keyword == "WORKDIR":
                cwd = Path(mapped(step.args))
                cwd.mkdir(parents=True, exist_ok=True)
            elif step.keyword == "COPY":
                *sources, dest = step.args.split()
                target = Path(mapped(dest)) if dest.startswith("/") else cwd / dest
                if "from" in step.flags:
                    for source in sources:
                        if Path(mapped(source)) != target:
                            shutil.copytree(mapped(source), target, dirs_exist_ok=True)
                elif sources == ["."]:
                    _copy_context(target)
                else:
                    raise AssertionError(f"the replay copies the whole context only: {step}")
            elif step.keyword == "RUN":
                started = time.monotonic()
                # The one departure from the image: pip may use this machine's cache (the
                # image keeps none), so a replay downloads nothing it already has.
                run_env = {k: v for k, v in env.items() if k != "PIP_NO_CACHE_DIR"}
                run_env["PIP_CACHE_DIR"] = PIP_CACHE
                result = subprocess.run(
                    ["/bin/sh", "-ec", mapped(step.args)],
                    cwd=cwd,
                    env=run_env,
                    capture_output=True,
                    text=True,
                    timeout=400,
                    check=False,
                )
                assert result.returncode == 0, f"{step.args}\n{result.stdout}\n{result.stderr}"
                timings[step.args[:40]] = time.monotonic() - started
            elif step.keyword == "CMD":
                cmd = [mapped(word) for word in dockerfile.cmd_argv(step.args)]
    return {"root": root, "app": cwd, "env": env, "cmd": cmd, "timings": timings}


def test_the_image_holds_every_app_and_no_tests_or_local_state(image: dict[str, object]) -> None:
    app = Path(str(image["app"]))
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    for package in (p.rstrip("*") for p in packages):
        assert (app / package / "__init__.py").is_file(), f"{package}/ is not in the image"
    for local_app in ("practice", "dining", "stewards", "frontend", "rooms", "ledger"):
        assert (app / local_app / "apps.py").is_file() or (app / local_app).is_dir()
    assert (app / "manage.py").is_file()
    for absent in ("tests", ".venv", ".git", "var/synapsia.sqlite3", "deploy"):
        assert not (app / absent).exists(), f"{absent} leaked into the image"
    # collectstatic ran: the design system and the admin's files are gathered.
    static = app / "var" / "static"
    assert (static / "frontend" / "synapsia.css").is_file()
    assert (static / "admin").is_dir()
    # The deletion journal's directory exists for its volume; the image points the app at it.
    journal = dict(image["env"])["SYNAPSIA_DELETION_JOURNAL_PATH"]  # type: ignore[call-overload]
    assert Path(journal).parent.is_dir() and str(Path(journal).parent).startswith(
        str(image["root"])
    )
    print("replayed RUN steps (s):", image["timings"])


def test_placeholders_cannot_serve(image: dict[str, object]) -> None:
    """The build's placeholder keys, without SYNAPSIA_BUILD_ONLY, stop the settings loading."""
    run_step = next(s for s in FINAL.instructions if "collectstatic" in s.args)
    placeholders = dict(re.findall(r"(\w+)=(\S+)", run_step.args))
    assert placeholders.pop("SYNAPSIA_BUILD_ONLY") == "1"
    env = {**dict(image["env"]), **placeholders}  # type: ignore[call-overload]
    result = subprocess.run(
        ["python", "-c", "import django; django.setup()"],
        cwd=str(image["app"]),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "build-only placeholder" in result.stderr
    # In build mode the same values load, and no host is served (every request is a 400).
    built = subprocess.run(
        [
            "python",
            "-c",
            "import django; django.setup(); from django.conf import settings; "
            "print(settings.ALLOWED_HOSTS, settings.PROFILE)",
        ],
        cwd=str(image["app"]),
        env={**env, "SYNAPSIA_BUILD_ONLY": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    assert built.stdout.strip() == "[] production"


def test_the_image_starts_and_answers_healthz(image: dict[str, object], tmp_path: Path) -> None:
    port = _free_port()
    cmd = list(image["cmd"])  # type: ignore[call-overload]
    cmd[cmd.index("-b") + 1] = "127.0.0.1"
    cmd[cmd.index("-p") + 1] = str(port)
    # The production profile, as a deployment runs it, but with nothing listening at the
    # database: liveness answers, readiness says which part is missing.
    env = {
        **dict(image["env"]),  # type: ignore[call-overload]
        "DATABASE_URL": "postgres://synapsia@127.0.0.1:9/synapsia",
        "REDIS_URL": "redis://127.0.0.1:9/0",
        "SYNAPSIA_SECRET_KEY": "image-test-" + "k3y-" * 16,
        "SYNAPSIA_VAULT_KEY": "aW1hZ2UtdGVzdCB2YXVsdCBrZXksIDMyIGJ5dGVzIGxvbmc=",
        "SYNAPSIA_LEDGER_SIGNING_KEY": "aW1hZ2UtdGVzdCBsZWRnZXIgc2VlZCwgMzIgYnl0ZXM=",
        "SYNAPSIA_ALLOWED_HOSTS": "synapsia.test",
        "SYNAPSIA_DELETION_JOURNAL_PATH": str(tmp_path / "deletions.jsonl"),
    }
    with open(tmp_path / "daphne.log", "w") as log:
        server = subprocess.Popen(
            cmd, cwd=str(image["app"]), env=env, stdout=log, stderr=subprocess.STDOUT
        )
    headers = {"Host": "synapsia.test", "X-Forwarded-Proto": "https"}

    def get(path: str) -> tuple[int, bytes]:
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, body = get("/healthz")
                break
            except OSError:
                assert server.poll() is None, (tmp_path / "daphne.log").read_text()
                assert time.monotonic() < deadline, "Daphne did not start within 30 s"
                time.sleep(0.2)
        assert (status, body) == (200, b'{"status": "ok"}')
        # Static files are served from what collectstatic gathered (no finders in production).
        status, body = get("/static/frontend/synapsia.css")
        assert status == 200 and b":root" in body
        status, body = get("/readyz")
        assert status == 503 and b"database" in body
    finally:
        server.terminate()
        server.wait(timeout=10)
