"""``python -m bench.sealing``: what sealing room content at rest costs per message
(rooms.sealing), as ratios against ``fence()`` of the same text, which the say path already
runs for every message, measured in alternation in the same process and round (machine noise
hits both alike; medians over rounds).

Cells: ``seal_run`` (a say run: one key look-up for the run, then AES-GCM per message),
``seal_hop`` (each message its own hop: the destroyed-mark read of the key store each time),
``open`` (a cached key, its destroyed mark read per value: reads outside ``one_hop``),
``open_hop`` (inside ``one_hop``: the mark read once for the hop), ``open_cold`` (no cached
key: a key-store read and an unwrap). Uses a key store of its own in a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable


def _per_message_us(fn: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2000, help="per cell and round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "synapsia.settings")
    os.environ["SYNAPSIA_KEY_STORE_PATH"] = os.path.join(tempfile.mkdtemp(), "keys.sqlite3")
    import django

    django.setup()
    from rooms.sealing import (
        MESSAGE_TEXT,
        RoomSealer,
        one_hop,
        room_keys_forget,
        room_text_open,
    )
    from rooms.untrusted import fence

    text = "How about Friday at 19:00 at the Thai place on Rue Oberkampf? " * 3
    room = uuid.uuid4()
    sealed = RoomSealer().text(room_id=room, column=MESSAGE_TEXT, text=text)
    run = RoomSealer()

    def open_hop() -> None:
        with one_hop():
            for _ in range(args.messages):
                room_text_open(sealed, column=MESSAGE_TEXT, room_id=room)

    def open_cold() -> None:
        room_keys_forget()
        room_text_open(sealed, column=MESSAGE_TEXT, room_id=room)

    cells: dict[str, Callable[[], float]] = {
        "fence": lambda: _per_message_us(lambda: fence(text, source="peer"), args.messages),
        "seal_run": lambda: _per_message_us(
            lambda: run.text(room_id=room, column=MESSAGE_TEXT, text=text), args.messages
        ),
        "seal_hop": lambda: _per_message_us(
            lambda: RoomSealer().text(room_id=room, column=MESSAGE_TEXT, text=text), args.messages
        ),
        "open": lambda: _per_message_us(
            lambda: room_text_open(sealed, column=MESSAGE_TEXT, room_id=room), args.messages
        ),
        "open_hop": lambda: _per_message_us(open_hop, 1) / args.messages,
        "open_cold": lambda: _per_message_us(open_cold, max(1, args.messages // 4)),
    }
    samples: dict[str, list[float]] = {name: [] for name in cells}
    ratios: dict[str, list[float]] = {name: [] for name in cells if name != "fence"}
    for _ in range(args.rounds):
        this_round = {name: cell() for name, cell in cells.items()}
        for name, value in this_round.items():
            samples[name].append(value)
            if name != "fence":
                ratios[name].append(value / this_round["fence"])
    result = {
        "text_chars": len(text),
        "sealed_chars": len(sealed),
        "us_per_message": {n: round(statistics.median(v), 2) for n, v in samples.items()},
        "x_fence": {n: round(statistics.median(v), 3) for n, v in ratios.items()},
        "load_average": os.getloadavg()[0],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
