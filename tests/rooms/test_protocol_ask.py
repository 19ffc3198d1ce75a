"""`context_request`'s optional `ask`: vault kinds only, bounded, nothing else accepted."""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest

from rooms.protocol import ContextRequestFrame, ErrorCode, FrameError, VaultKind, parse_client_frame
from slips.capabilities import VAULT_KINDS


def _frame(body: dict[str, Any]) -> str:
    return json.dumps({"v": 1, "type": "context_request", "id": "c-1", "body": body})


def test_the_published_kinds_are_the_vaults() -> None:
    assert set(get_args(VaultKind)) == VAULT_KINDS


@pytest.mark.parametrize("body", [{}, {"ask": []}, {"ask": ["budget", "note"]}])
def test_an_ask_for_vault_kinds_is_accepted(body: dict[str, Any]) -> None:
    frame = parse_client_frame(_frame(body), max_bytes=65536)
    assert isinstance(frame, ContextRequestFrame)
    assert frame.body.ask == body.get("ask", [])


@pytest.mark.parametrize(
    "body",
    [
        {"ask": ["passwords"]},  # not a vault kind
        {"ask": "budget"},  # not a list
        {"ask": ["budget"] * (len(VAULT_KINDS) + 1)},  # more than there are kinds
        {"ask": ["tool:book_table"]},  # tools are requested with act, never asked for
        {"ask": [], "give_me": True},  # unknown field
    ],
)
def test_anything_else_is_refused_as_an_invalid_body(body: dict[str, Any]) -> None:
    with pytest.raises(FrameError) as refused:
        parse_client_frame(_frame(body), max_bytes=65536)
    assert refused.value.code == ErrorCode.INVALID_BODY
