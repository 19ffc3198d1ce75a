"""What-if: tool descriptors built once per tool instead of once per connect.

``python -m bench --cells idle --settings bench.whatif_tool_schemas``. Every agent socket's
``welcome`` lists its tools as MCP definitions; building each one runs pydantic's
``model_json_schema`` for the tool's input and output models, about half of a connect's
server time here. The schemas are a pure function of the tool's code, so this module memoises
the descriptor per tool (a deep copy each call, as callers may keep and change it). Which
tools an agent gets is still decided live per connect. Only for measuring the effect; the
change itself belongs in ``gatekeeper/tools/spec.py``.
"""

from __future__ import annotations

import copy
from typing import Any

from gatekeeper.tools.spec import ToolSpec
from synapsia.settings import *  # noqa: F403

_built: dict[str, dict[str, Any]] = {}
_unmemoised = ToolSpec._descriptor_unversioned


def _descriptor_unversioned(self: ToolSpec) -> dict[str, Any]:
    if self.name not in _built:
        _built[self.name] = _unmemoised(self)
    return copy.deepcopy(_built[self.name])


ToolSpec._descriptor_unversioned = _descriptor_unversioned  # type: ignore[method-assign]
