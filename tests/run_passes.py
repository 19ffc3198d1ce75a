"""Run ``make test``'s two passes side by side and fail if either fails.

The embedded pass (SQLite, in-memory layer, eager tasks) and the services pass (PostgreSQL +
Redis) share nothing but the collected static files, and much of each is spent waiting on real
Daphnes, sockets and browsers; run one after the other they left a core idle most of the time.
The embedded pass prints live; the services pass writes ``var/test-services.log``, which is
printed as soon as the embedded pass is done (and followed until it ends).

Usage: ``python tests/run_passes.py -- ENV=VALUE ...`` where the words after ``--`` are the
services pass's environment (the Makefile's ``SERVICES_ENV``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "var" / "test-services.log"
NO_TESTS = 5  # pytest's exit code when it collected nothing: a broken suite, never a pass


def _verdict(name: str, code: int) -> bool:
    if code == NO_TESTS:
        print(f"==> {name}: pytest collected no tests: failing", flush=True)
        return False
    print(f"==> {name}: {'passed' if code == 0 else f'FAILED (exit {code})'}", flush=True)
    return code == 0


def _follow(log: Path, process: subprocess.Popen[bytes], offset: int) -> int:
    """Print ``log`` from ``offset`` until ``process`` ends; the new offset."""
    with log.open("rb") as stream:
        stream.seek(offset)
        while True:
            chunk = stream.read()
            if chunk:
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
            elif process.poll() is not None:
                return stream.tell()
            else:
                time.sleep(0.5)


def main(argv: list[str]) -> int:
    services_env = dict(os.environ)
    for word in argv[argv.index("--") + 1 :] if "--" in argv else []:
        key, _, value = word.partition("=")
        services_env[key] = value
    pytest = [sys.executable, "-m", "pytest"]
    LOG.parent.mkdir(parents=True, exist_ok=True)
    print(
        "==> pass 2/2 (production profile: PostgreSQL + Redis; skips if they are absent) "
        f"runs alongside, into {LOG.relative_to(ROOT)}",
        flush=True,
    )
    with LOG.open("wb") as log:
        services = subprocess.Popen(
            pytest, cwd=ROOT, env=services_env, stdout=log, stderr=subprocess.STDOUT
        )
    print("==> pass 1/2: embedded profile (SQLite, in-memory channel layer, eager tasks)")
    sys.stdout.flush()
    try:
        embedded = subprocess.run(pytest, cwd=ROOT, check=False).returncode
    except KeyboardInterrupt:
        services.terminate()
        raise
    embedded_ok = _verdict("pass 1/2 (embedded)", embedded)
    print("==> pass 2/2 (production profile), from its log:", flush=True)
    _follow(LOG, services, 0)
    services_ok = _verdict("pass 2/2 (production profile)", services.wait())
    return 0 if embedded_ok and services_ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
