"""The dinner domain as data: cities, venue catalogues and a room's dinner terms.

Public API (import from ``dining``): the formats (``City``, ``Venue``, ``VenueCatalogueFile``,
``ALLERGENS``), loading (``catalogue_load``, ``city_load``, ``CatalogueInvalid``), the
deployment's catalogues (``catalogue_get``, ``catalogue_default``, ``catalogues_registered``),
terms (``DinnerTerms``, ``terms_default``, ``terms_parse``, ``dinner_starts``) and the checks
(``travel_minutes``, ``venue_open_for``, ``venue_table_fits``, ``booking_check``,
``venues_search``). Nothing here touches the database.
"""

from __future__ import annotations

from dining.booking import (
    BookingProblem,
    booking_check,
    money_words,
    travel_minutes,
    venue_cost_minor,
    venue_open_for,
    venue_table_fits,
)
from dining.formats import (
    ALLERGENS,
    WEEKDAYS,
    City,
    Neighbourhood,
    OpeningInterval,
    Price,
    TravelEntry,
    Venue,
    VenueCatalogueFile,
    WeeklyHours,
)
from dining.loading import Catalogue, CatalogueInvalid, CatalogueProblem, catalogue_load, city_load
from dining.registry import (
    CatalogueUnknown,
    catalogue_default,
    catalogue_get,
    catalogue_paths,
    catalogues_registered,
    neighbourhoods_registered,
)
from dining.search import VenuePage, venues_search
from dining.terms import DinnerTerms, TermsInvalid, dinner_starts, terms_default, terms_parse

__all__ = [
    "ALLERGENS",
    "WEEKDAYS",
    "BookingProblem",
    "Catalogue",
    "CatalogueInvalid",
    "CatalogueProblem",
    "CatalogueUnknown",
    "City",
    "DinnerTerms",
    "Neighbourhood",
    "OpeningInterval",
    "Price",
    "TermsInvalid",
    "TravelEntry",
    "Venue",
    "VenueCatalogueFile",
    "VenuePage",
    "WeeklyHours",
    "booking_check",
    "catalogue_default",
    "catalogue_get",
    "catalogue_load",
    "catalogue_paths",
    "catalogues_registered",
    "city_load",
    "dinner_starts",
    "money_words",
    "neighbourhoods_registered",
    "terms_default",
    "terms_parse",
    "travel_minutes",
    "venue_cost_minor",
    "venue_open_for",
    "venue_table_fits",
    "venues_search",
]
