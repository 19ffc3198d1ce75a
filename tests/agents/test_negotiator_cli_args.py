"""``python -m agents.negotiator``'s numbers of seconds: a value that is no number, or not
above none, is refused before anything connects, saying which and why (argparse's exit 2)."""

from __future__ import annotations

import asyncio

import pytest

from agents import negotiator

URL = "ws://127.0.0.1:9/ws/rooms/00000000-0000-0000-0000-000000000000/"


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--grant-poll", "0", "'0': give a number of seconds above 0"),
        ("--grant-poll", "-1", "'-1': give a number of seconds above 0"),
        ("--grant-poll", "nan", "'nan': give a number of seconds above 0"),
        ("--grant-timeout", "inf", "'inf': give a number of seconds above 0"),
        ("--reply-timeout", "soon", "'soon' is not a number of seconds"),
    ],
)
def test_a_bad_number_of_seconds_is_refused_in_words(
    option: str, value: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        asyncio.run(negotiator.main(["--url", URL, "--token", "t", option, value]))
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: {said}" in err and "Traceback" not in err
