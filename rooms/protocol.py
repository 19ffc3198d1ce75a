"""The room WebSocket protocol, as the server uses it: the ``synapsia_protocol`` package.

Every frame, body, error and close code lives in ``synapsia_protocol`` (no Django, shared with
the agent SDK, so server and SDK cannot drift); this module only re-exports it for the server's
own imports. ``docs/protocol.md`` explains the protocol; ``docs/schemas/*.json`` and
``docs/asyncapi.yaml`` are generated from the package (``make schemas``) and a test fails when
they are stale.
"""

from __future__ import annotations

# Every public name of the package, under the server's own module path (no second list to keep).
from synapsia_protocol import *  # noqa: F403
from synapsia_protocol import __all__ as __all__
