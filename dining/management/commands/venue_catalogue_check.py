"""``manage.py venue_catalogue_check PATH``: is this venue catalogue (and its city) usable?"""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dining.loading import CatalogueInvalid, catalogue_load


class Command(BaseCommand):
    help = "Validate a venue catalogue file and the city file it names; print each problem."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="Path of a venue catalogue JSON file.")

    def handle(self, *args: Any, **options: Any) -> None:
        path: str = options["path"]
        try:
            catalogue = catalogue_load(path)
        except CatalogueInvalid as invalid:
            for problem in invalid.problems:
                self.stderr.write(str(problem))
            count = len(invalid.problems)
            raise CommandError(
                f"{path} is not usable: {count} problem{'s' if count != 1 else ''}.",
                returncode=1,
            ) from None
        cuisines = Counter(v.cuisine for v in catalogue.venues)
        places = Counter(v.neighbourhood for v in catalogue.venues)
        self.stdout.write(
            f"{catalogue.name} ({catalogue.id}) is valid: {len(catalogue.venues)} venues, "
            f"{len(cuisines)} cuisines, {len(catalogue.city.neighbourhoods)} neighbourhoods of "
            f"{catalogue.city.name} ({catalogue.city.time_zone})."
        )
        self.stdout.write("Cuisines: " + ", ".join(f"{c} {n}" for c, n in sorted(cuisines.items())))
        names = {n.id: n.name for n in catalogue.city.neighbourhoods}
        self.stdout.write(
            "Venues per neighbourhood: "
            + ", ".join(f"{names[p]} {places.get(p, 0)}" for p in names)
        )
