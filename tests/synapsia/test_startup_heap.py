"""``synapsia.asgi`` freezes what start-up built out of the cycle collector's reach
(``synapsia.heap.start_up_heap_freeze``), so a full collection in a serving process walks
only what the server made since (the pause it spared is measured by the benchmark, not
here). Imported in a child process: this test process has its own heap and must keep it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from synapsia.serving import ROOT
from tests.e2e.daphne import server_env

_CHILD = textwrap.dedent(
    """
    import gc, json, weakref
    gc.disable()  # no automatic collection: only start-up's own can free the cycle below
    class Cycle:
        pass
    garbage = Cycle()
    garbage.me = garbage  # a cycle made before start-up and dropped: collected, not frozen
    gone = weakref.ref(garbage)
    del garbage
    import synapsia.asgi  # noqa: F401
    print(json.dumps({
        "frozen": gc.get_freeze_count(),
        "young": sum(gc.get_count()),
        "cycle_kept": gone() is not None,
    }))
    """
)


def test_the_start_up_heap_is_frozen_after_a_collection() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD],
        cwd=ROOT,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # Django, the apps and their modules: far more than a handful of objects.
    assert result["frozen"] > 50_000, result
    assert result["young"] < 1_000, result  # nothing much built after the freeze
    assert result["cycle_kept"] is False, result  # garbage was collected before the freeze
