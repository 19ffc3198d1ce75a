"""``python -m bench.eval``: see ``bench.eval.run``."""

from __future__ import annotations

import sys

from bench.eval.run import main

sys.exit(main())
