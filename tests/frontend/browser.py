"""What every owner page must show a person, checked in a real browser (Playwright, sync API).

The page tests (``test_axe_pages.py``) and the two-owner journey (``test_journey.py``) call
these on every page they visit:

* ``axe_check``: the pinned axe-core (``vendor/``) finds 0 critical and 0 serious violations;
* ``no_horizontal_scroll``: at a phone's 390 px the page does not scroll sideways;
* ``screenshot`` / ``screenshots``: the page at desktop and phone sizes, saved under
  ``var/test-artifacts/screens/`` (gitignored with ``var/``);
* ``PageWatch``: every HTML document the browser loaded carried a strict
  Content-Security-Policy (no ``unsafe-inline``), and the browser refused nothing under it;
* ``visible_text_has_no_codes``: what a person reads holds no UUID, epoch, rule id, raw JSON
  or protocol line.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import ViewportSize

from synapsia.serving import ROOT

VENDOR = Path(__file__).resolve().parent / "vendor"
AXE_PATH = VENDOR / "axe.min.js"
AXE_VERSION = "4.14.1"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"
SCREENS = ROOT / "var" / "test-artifacts" / "screens"
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
BLOCKING_IMPACTS = ("critical", "serious")
SCREENSHOT_TIMEOUT_MS = 30_000

# Text inside these is shown as a literal (a command, a token, a hash) and may hold codes.
LITERAL_SELECTOR = "code, pre, kbd, samp, .mono, script, style, noscript, template, textarea"


@cache
def axe_source() -> str:
    """The vendored axe-core, refused if it is not the pinned file."""
    data = AXE_PATH.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != AXE_SHA256:
        raise AssertionError(f"{AXE_PATH} is not axe-core {AXE_VERSION} (sha256 {digest})")
    return data.decode()


def axe_violations(page: Any) -> list[dict[str, Any]]:
    """axe-core's violations on the page as it is now (every impact).

    The source is evaluated through the DevTools protocol (``page.evaluate``), which a
    page's Content-Security-Policy does not govern: ``add_script_tag`` would insert an
    inline ``<script>`` that the strict ``script-src 'self'`` rightly refuses.
    """
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(axe_source() + "\n;void 0")
    result: list[dict[str, Any]] = page.evaluate(
        """async () => {
            const r = await window.axe.run(document, {resultTypes: ["violations"]});
            return r.violations.map(v => ({
                id: v.id, impact: v.impact, help: v.help,
                targets: v.nodes.slice(0, 3).map(n => n.target.join(" ")),
                count: v.nodes.length,
            }));
        }"""
    )
    return result


def axe_check(page: Any, *, name: str) -> None:
    """Fail listing each critical or serious axe-core violation on ``page`` (called ``name``)."""
    blocking = [v for v in axe_violations(page) if v["impact"] in BLOCKING_IMPACTS]
    if blocking:
        lines = [
            f"- {v['impact']} {v['id']}: {v['help']} ({v['count']} element(s), e.g. "
            f"{'; '.join(v['targets'])})"
            for v in blocking
        ]
        raise AssertionError(
            f"axe-core {AXE_VERSION} on the {name} page ({page.url}):\n" + "\n".join(lines)
        )


def no_horizontal_scroll(page: Any, *, name: str = "") -> None:
    """At a phone's width (390x844) the page is no wider than the screen."""
    page.set_viewport_size(PHONE)
    widths = page.evaluate(
        "() => [document.documentElement.scrollWidth, window.innerWidth,"
        " [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right"
        " > window.innerWidth + 1).slice(0, 3).map(e => e.tagName.toLowerCase() +"
        " (e.id ? '#' + e.id : '') + (e.className && typeof e.className === 'string' ?"
        " '.' + e.className.trim().split(/\\s+/).join('.') : ''))]"
    )
    scroll, inner, wide = widths
    assert scroll <= inner, (
        f"the {name or page.url} page scrolls sideways on a phone: {scroll} px wide in a "
        f"{inner} px screen (too wide: {', '.join(wide) or 'unknown'})"
    )


def _file_name(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "page"


def screenshot(page: Any, name: str, *, size: str = "desktop") -> None:
    """Save the whole page at ``size`` ("desktop" 1280x800 or "phone" 390x844).

    A screenshot is evidence for a reviewer, not a property of the page: it gets its own
    generous time (a full-page capture of a live page on a loaded two-core CI machine once
    took over the 10 s a context's actions get), and a capture that still does not finish is
    reported and skipped rather than failing the test that was checking the page."""
    page.set_viewport_size(DESKTOP if size == "desktop" else PHONE)
    SCREENS.mkdir(parents=True, exist_ok=True)
    path = SCREENS / f"{_file_name(name)}-{size}.png"
    try:
        page.screenshot(path=str(path), full_page=True, timeout=SCREENSHOT_TIMEOUT_MS)
    except PlaywrightTimeoutError:
        print(f"no {size} screenshot of {name}: the capture took over {SCREENSHOT_TIMEOUT_MS} ms")


def screenshots(page: Any, name: str) -> None:
    """The page at both sizes; the viewport is left at desktop size."""
    screenshot(page, name, size="phone")
    screenshot(page, name, size="desktop")


@contextlib.contextmanager
def screenshots_on_failure(name: str, *pages: Any) -> Iterator[None]:
    """Run a step; if it fails, save every given page as it was (desktop size), then re-raise."""
    try:
        yield
    except BaseException:
        for index, page in enumerate(pages):
            with contextlib.suppress(Exception):
                SCREENS.mkdir(parents=True, exist_ok=True)
                page.screenshot(
                    path=str(SCREENS / f"FAILED-{_file_name(name)}-{index}.png"),
                    full_page=True,
                    timeout=SCREENSHOT_TIMEOUT_MS,
                )
        raise


def keyboard_focus_is_visible(page: Any, *, name: str = "", tabs: int = 8) -> None:
    """Pressing Tab moves focus through the page's controls, and each focused one shows a
    visible outline (or ring), as a keyboard user needs to see where they are."""
    page.evaluate("() => { document.activeElement && document.activeElement.blur(); }")
    page.locator("body").focus()
    unseen: list[str] = []
    reached = 0
    for _ in range(tabs):
        page.keyboard.press("Tab")
        focused = page.evaluate(
            """() => {
                const e = document.activeElement;
                if (!e || e === document.body) return null;
                const s = getComputedStyle(e);
                const ring = (s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 2)
                    || (s.boxShadow && s.boxShadow !== "none");
                const label = (e.getAttribute("aria-label") || e.textContent || e.id || "")
                    .trim().slice(0, 40);
                return {ring, what: e.tagName.toLowerCase() + (label ? ` "${label}"` : "")};
            }"""
        )
        if focused is None:
            continue
        reached += 1
        if not focused["ring"]:
            unseen.append(focused["what"])
    assert reached, f"Tab reaches nothing on the {name or page.url} page"
    assert not unseen, f"on the {name or page.url} page focus is invisible on: " + ", ".join(
        dict.fromkeys(unseen)
    )


# --- the Content-Security-Policy, as the browser received and applied it ---------------------


@dataclass
class Document:
    url: str
    status: int
    csp: str | None


@dataclass
class PageWatch:
    """Every HTML response a page received (documents and fetched parts), and every CSP
    refusal the browser logged."""

    documents: list[Document] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def _on_response(self, response: Any) -> None:
        # Pages, and the HTML parts a page fetches to redraw itself (``?part=status``).
        if response.request.resource_type not in ("document", "fetch", "xhr"):
            return
        if 300 <= response.status < 400:
            return  # a redirect has no page to protect; its target is checked
        headers = response.headers  # lower-cased names
        if "text/html" not in headers.get("content-type", ""):
            return
        self.documents.append(
            Document(response.url, response.status, headers.get("content-security-policy"))
        )

    def _on_console(self, message: Any) -> None:
        text = message.text
        if "Content Security Policy" in text or "Content-Security-Policy" in text:
            self.refusals.append(text)

    def _on_page_error(self, error: Any) -> None:
        self.errors.append(str(error))

    def check_csp(self) -> None:
        """Every HTML response so far carried a strict CSP, and the browser refused nothing."""
        assert self.documents, "no HTML document was loaded"
        for doc in self.documents:
            assert doc.csp, f"{doc.url} ({doc.status}) has no Content-Security-Policy header"
            assert "unsafe-inline" not in doc.csp, f"{doc.url} allows unsafe-inline: {doc.csp}"
            assert "unsafe-eval" not in doc.csp, f"{doc.url} allows unsafe-eval: {doc.csp}"
        assert not self.refusals, "the browser refused content under the CSP:\n" + "\n".join(
            self.refusals
        )

    def check_no_script_errors(self) -> None:
        """No page script threw an uncaught error."""
        assert not self.errors, "page scripts failed:\n" + "\n".join(self.errors)


def watch(page: Any) -> PageWatch:
    """Start recording ``page``'s documents and CSP refusals (call before navigating)."""
    watcher = PageWatch()
    page.on("response", watcher._on_response)
    page.on("console", watcher._on_console)
    page.on("pageerror", watcher._on_page_error)
    return watcher


# --- what a person reads ---------------------------------------------------------------------

UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
EPOCH = re.compile(r"(?<![\d.,])1[5-9]\d{8}(?![\d.,])")  # seconds since 1970: 2017 to 2033
# A dotted rule id (``beyond_slip.not_in_slip``) or a snake_case code (``approval_per_use``,
# ``free_busy_24h``): ordinary prose has neither outside code blocks.
RULE_ID = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)*\.[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
SNAKE_CODE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
RAW_JSON = re.compile(r"[{\[]\s*\"")
PROTOCOL_LINE = re.compile(r"\b[a-z_]+=[^\s=]+")  # "round=1 venue=osteria-kanal cost=5200"

CODE_PATTERNS = {
    "a UUID": UUID,
    "an epoch timestamp": EPOCH,
    "a rule id": RULE_ID,
    "a code": SNAKE_CODE,
    "raw JSON": RAW_JSON,
    "a protocol line": PROTOCOL_LINE,
}


def visible_text(page: Any) -> str:
    """The text a person sees (and a screen reader reads), without literals shown as code."""
    text: str = page.evaluate(
        """(literal) => {
            const out = [];
            const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                const parent = node.parentElement;
                if (!parent || parent.closest(literal)) continue;
                if (parent.checkVisibility && !parent.checkVisibility()) continue;
                out.push(node.textContent);
            }
            const buttons = "input[type=submit], input[type=button]";
            for (const input of document.querySelectorAll(buttons)) out.push(input.value);
            return out.join(" ");
        }""",
        LITERAL_SELECTOR,
    )
    return text


def codes_in(text: str, *, quoted: tuple[str, ...] = ()) -> list[str]:
    """Each code-like thing in ``text``, as "what: the match". ``quoted`` are exact passages
    shown on purpose as someone wrote them (a peer's message), left out of the search."""
    for passage in quoted:
        text = text.replace(passage, " ")
    found = []
    for what, pattern in CODE_PATTERNS.items():
        for match in pattern.finditer(text):
            found.append(f"{what}: {match.group(0)!r}")
    return found


def visible_text_has_no_codes(page: Any, *, name: str = "", quoted: tuple[str, ...] = ()) -> None:
    """A person reading the page sees no UUID, epoch, rule id, raw JSON or protocol line
    (literals in ``code``/``pre``/``.mono`` excepted, and the ``quoted`` passages)."""
    found = codes_in(visible_text(page), quoted=quoted)
    assert not found, f"the {name or page.url} page shows codes to a person:\n" + "\n".join(
        dict.fromkeys(found)
    )


def page_checks(
    page: Any,
    watcher: PageWatch,
    *,
    name: str,
    codes: bool = True,
    quoted: tuple[str, ...] = (),
) -> None:
    """All of the above on the page as it is now: CSP, axe, phone width, screenshots, and
    (unless ``codes`` is False) no codes in the text outside the ``quoted`` passages."""
    watcher.check_csp()
    screenshots(page, name)
    no_horizontal_scroll(page, name=name)  # leaves the phone's viewport
    axe_check(page, name=f"{name} (phone)")  # a phone's layout can hide or crowd things
    page.set_viewport_size(DESKTOP)
    axe_check(page, name=name)
    if codes:
        visible_text_has_no_codes(page, name=name, quoted=quoted)
