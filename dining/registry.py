"""The catalogues a deployment offers (``settings.SYNAPSIA["VENUE_CATALOGUES"]``).

A room names one by id in its terms. Files are re-checked when they change (see
``dining.loading``); a registered file that does not validate raises ``CatalogueInvalid``, which
callers treat as "no catalogue" (a booking against it is refused, never waved through).
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from dining.formats import Neighbourhood
from dining.loading import Catalogue, catalogue_load

SHIPPED_CATALOGUE = Path(__file__).resolve().parent / "data" / "berlin.venues.json"


class CatalogueUnknown(LookupError):
    """No registered catalogue has this id."""


def catalogue_paths() -> tuple[Path, ...]:
    """The registered catalogue files, in the order the setting lists them."""
    configured = settings.SYNAPSIA.get("VENUE_CATALOGUES") or [str(SHIPPED_CATALOGUE)]
    return tuple(Path(p) for p in configured)


def catalogues_registered() -> tuple[Catalogue, ...]:
    """Every registered catalogue, loaded and checked. Raises ``CatalogueInvalid``."""
    return tuple(catalogue_load(path) for path in catalogue_paths())


def catalogue_get(catalogue_id: str) -> Catalogue:
    """The registered catalogue called ``catalogue_id``. Raises ``CatalogueUnknown`` (or
    ``CatalogueInvalid`` when a registered file no longer validates)."""
    for catalogue in catalogues_registered():
        if catalogue.id == catalogue_id:
            return catalogue
    raise CatalogueUnknown(f"No venue catalogue called {catalogue_id[:64]!r} is offered here.")


def catalogue_default() -> Catalogue:
    """The first registered catalogue: what a new dinner room uses unless told otherwise."""
    return catalogue_load(catalogue_paths()[0])


def neighbourhoods_registered() -> tuple[Neighbourhood, ...]:
    """Every neighbourhood of every registered catalogue's city (the vault's home
    neighbourhood must be one of these), each once, in catalogue order."""
    seen: dict[tuple[str, str], Neighbourhood] = {}
    for catalogue in catalogues_registered():
        for place in catalogue.city.neighbourhoods:
            seen.setdefault((catalogue.city.id, place.id), place)
    return tuple(seen.values())
