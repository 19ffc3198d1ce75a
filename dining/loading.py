"""Reading city and catalogue files, with problems reported in words.

A problem names the file, the JSON path inside it (``venues[3].hours.tue[0].closes``) and
what is wrong. Loaded catalogues are cached by path and modification time (of both files),
so an edited file is read again and an unchanged one is not re-validated on every decision.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from dining.formats import ALLERGENS, City, Venue, VenueCatalogueFile

MAX_FILE_BYTES = 8 * 1024 * 1024
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class CatalogueProblem:
    file: str
    path: str  # JSON path inside the file; "" for the whole document
    message: str

    def __str__(self) -> str:
        where = f"{self.file}, at {self.path}" if self.path else self.file
        return f"{where}: {self.message}"


class CatalogueInvalid(Exception):
    """A city or catalogue file that cannot be used; ``problems`` says each thing wrong."""

    def __init__(self, problems: tuple[CatalogueProblem, ...]) -> None:
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems


@dataclass(frozen=True)
class Catalogue:
    """A loaded, checked venue catalogue with its city."""

    id: str
    name: str
    path: Path
    city: City
    venues: tuple[Venue, ...]
    _by_id: dict[str, Venue] = field(repr=False, compare=False, default_factory=dict)

    def venue(self, venue_id: str) -> Venue | None:
        """The venue called ``venue_id``, or None."""
        return self._by_id.get(venue_id)

    @property
    def cuisines(self) -> tuple[str, ...]:
        return tuple(sorted({v.cuisine for v in self.venues}))


def _json_path(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif not text:
            text = str(part)
        else:
            text += f".{part}"
    return text


# Pydantic's messages, said for people editing a file by hand.
def _words(error: Any) -> str:
    kind = error["type"]
    if kind == "missing":
        return "this field is required"
    if kind == "extra_forbidden":
        return "this field is not part of the format (check its spelling)"
    if kind == "literal_error" and error["loc"] and "safe_for" in error["loc"]:
        return f"not an allergen of the vocabulary ({', '.join(ALLERGENS)})"
    if kind == "string_pattern_mismatch":
        last = error["loc"][-1] if error["loc"] else ""
        if last in ("opens", "closes"):
            return 'a time must be "HH:MM" (24-hour clock, "24:00" only as a closing time)'
        if last in ("id", "cuisine", "neighbourhood", "from", "to"):
            return (
                "must be a slug: lowercase letters, digits and hyphens, "
                "starting with a letter or digit"
            )
    message: str = error["msg"]
    return message.removeprefix("Value error, ")


def _problems(file: str, exc: ValidationError) -> tuple[CatalogueProblem, ...]:
    return tuple(
        CatalogueProblem(file=file, path=_json_path(tuple(e["loc"])), message=_words(e))
        for e in exc.errors(include_url=False)[:50]
    )


def _read_json(path: Path) -> bytes:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CatalogueInvalid(
            (CatalogueProblem(str(path), "", f"cannot be read ({exc.strerror})"),)
        ) from None
    if len(raw) > MAX_FILE_BYTES:
        raise CatalogueInvalid((CatalogueProblem(str(path), "", "is larger than 8 MiB"),))
    try:
        json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = (
            f"line {exc.lineno}, column {exc.colno}"
            if isinstance(exc, json.JSONDecodeError)
            else ""
        )
        raise CatalogueInvalid(
            (CatalogueProblem(str(path), "", f"is not JSON ({where or 'not UTF-8'})"),)
        ) from None
    return raw


def _validated(model: type[M], path: Path) -> M:
    raw = _read_json(path)
    try:
        return model.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        raise CatalogueInvalid(_problems(str(path), exc)) from None


def city_load(path: str | Path) -> City:
    """Read and check a city file. Raises ``CatalogueInvalid``."""
    return _validated(City, Path(path))


def _cross_check(file: str, catalogue: VenueCatalogueFile, city: City) -> list[CatalogueProblem]:
    known = {n.id for n in city.neighbourhoods}
    return [
        CatalogueProblem(
            file,
            f"venues[{index}].neighbourhood",
            f"{venue.neighbourhood!r} is not a neighbourhood of {city.name} "
            f"(known: {', '.join(sorted(known))})",
        )
        for index, venue in enumerate(catalogue.venues)
        if venue.neighbourhood not in known
    ]


def _load_uncached(path: Path) -> Catalogue:
    stored = _validated(VenueCatalogueFile, path)
    city_path = (path.parent / stored.city).resolve()
    try:
        city = city_load(city_path)
    except CatalogueInvalid as invalid:
        raise CatalogueInvalid(
            (
                CatalogueProblem(str(path), "city", f"the city file {stored.city} is unusable"),
                *invalid.problems,
            )
        ) from None
    problems = _cross_check(str(path), stored, city)
    if problems:
        raise CatalogueInvalid(tuple(problems))
    venues = tuple(stored.venues)
    return Catalogue(
        id=stored.id,
        name=stored.name,
        path=path,
        city=city,
        venues=venues,
        _by_id={v.id: v for v in venues},
    )


_cache: dict[Path, tuple[tuple[int, int], Catalogue]] = {}
_cache_lock = threading.Lock()


def _stamp(path: Path) -> tuple[int, int]:
    """Modification times (ns) of the catalogue and of the city file it names."""
    mtime = path.stat().st_mtime_ns
    try:
        city_name = json.loads(path.read_bytes()).get("city")
        city_mtime = (path.parent / str(city_name)).stat().st_mtime_ns
    except (OSError, ValueError, AttributeError):
        city_mtime = 0
    return mtime, city_mtime


def catalogue_load(path: str | Path) -> Catalogue:
    """Read and check a venue catalogue and its city file (cached by path and mtimes).

    Raises ``CatalogueInvalid`` naming each problem: file shape, unknown neighbourhoods,
    incomplete travel tables, an unknown time zone, repeated ids, allergens outside
    ``ALLERGENS``.
    """
    resolved = Path(path).resolve()
    try:
        stamp = _stamp(resolved)
    except OSError as exc:
        raise CatalogueInvalid(
            (CatalogueProblem(str(path), "", f"cannot be read ({exc.strerror})"),)
        ) from None
    with _cache_lock:
        cached = _cache.get(resolved)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    catalogue = _load_uncached(resolved)
    with _cache_lock:
        _cache[resolved] = (stamp, catalogue)
    return catalogue
