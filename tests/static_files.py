"""ServeStatic as production runs it, with its file listing made once per test process.

Production builds its middleware once per process. Django's test ``Client`` builds a whole
middleware chain for each client, and ServeStatic lists every static file (the apps' and the
admin's, 150-odd, each path resolved) each time: about 0.1 s per client, and the operator
separation matrix alone makes a thousand clients. The listing depends only on the files and on
the settings that shape each response, so it is kept per process under exactly those; what is
served, and how, is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from servestatic.middleware import ServeStaticMiddleware


class ServeStaticListedOnce(ServeStaticMiddleware):
    _listed: ClassVar[dict[tuple[Any, ...], dict[str, Any]]] = {}

    def add_files_from_finders(self) -> None:
        self._list_once(("finders",), super().add_files_from_finders)

    def update_files_dictionary(self, root: str, prefix: str) -> None:
        scan = super().update_files_dictionary
        self._list_once(("root", root, prefix), lambda: scan(root, prefix))

    def _list_once(self, source: tuple[Any, ...], scan: Callable[[], None]) -> None:
        key = (
            *source,
            self.autorefresh,
            self.max_age,
            self.allow_all_origins,
            self.charset,
            self.static_prefix,
        )
        listed = self._listed.get(key)
        if listed is None:
            before = set(self.files)
            scan()
            listed = {url: self.files[url] for url in self.files.keys() - before}
            self._listed[key] = listed
        self.files.update(listed)
