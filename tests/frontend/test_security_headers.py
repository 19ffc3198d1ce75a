"""Every response carries the strict Content-Security-Policy; the templates need nothing it
refuses; Django's debug pages (which list every route) appear only when DEBUG is turned on."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from synapsia.serving import ROOT

EXPECTED = {
    "default-src": ["'none'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "font-src": ["'self'"],
    "connect-src": ["'self'", "ws://testserver"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
    "base-uri": ["'none'"],
    "object-src": ["'none'"],
}


def policy_of(response: object) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]  # type: ignore[index]
    directives = [part.split() for part in header.split(";") if part.strip()]
    return {d[0]: d[1:] for d in directives}


def page_paths(module: str, prefix: str, room_id: uuid.UUID) -> dict[str, str]:
    """Every URL pattern of ``module``, by name, with its parameters filled in (a real room,
    a made-up agent, invite or reset token: those pages answer 404/405, and must still carry
    the policy)."""
    resolver = get_resolver(module)
    paths: dict[str, str] = {}
    for pattern in resolver.url_patterns:
        assert isinstance(pattern, URLPattern | URLResolver)
        route = str(pattern.pattern)
        filled = re.sub(r"<uuid:room_id>", str(room_id), route)
        filled = re.sub(r"<uuid:[a-z_]+>", str(uuid.uuid4()), filled)
        filled = re.sub(r"<(str:)?[a-z_0-9]+>", "made-up", filled)
        paths[pattern.name or route] = prefix + filled
    return paths


@pytest.mark.django_db
def test_every_page_of_the_app_carries_the_strict_policy(make_open_room) -> None:
    setup = make_open_room()
    owner = Client()
    owner.force_login(setup.a.owner)
    anonymous = Client()
    pages = page_paths("frontend.urls", "/", setup.room.id) | page_paths(
        "practice.urls", "/practice/", setup.room.id
    )
    # The owner's places are all there (a page added later is covered without editing this).
    assert {"dashboard", "vault", "keys", "settings", "room", "room-slip", "password_reset"} <= set(
        pages
    )
    seen_ok = 0
    for name, path in pages.items():
        for client in (owner, anonymous):
            response = client.get(path)
            assert policy_of(response) == EXPECTED, (name, path, response.status_code)
            assert "unsafe-inline" not in response["Content-Security-Policy"]
            seen_ok += response.status_code == 200
    assert seen_ok >= 10  # real pages rendered, not only refusals


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    [
        "/no-such-page/",
        "/rooms/00000000-0000-0000-0000-000000000000/",
        "/static/frontend/synapsia.css",
        "/static/frontend/copy.js",
        "/api/notifications",
        "/healthz",
        "/admin/login/",
        "/favicon.ico",
    ],
)
def test_error_pages_static_files_the_api_and_the_admin_carry_it_too(path: str) -> None:
    response = Client().get(path)
    assert policy_of(response) == EXPECTED, response.status_code


@pytest.mark.django_db
def test_an_unknown_address_gets_our_page_in_words_with_a_way_home() -> None:
    response = Client().get("/no-such-page/")
    body = response.content.decode()
    assert response.status_code == 404
    assert "There is no page here" in body and 'href="/"' in body
    assert "URLconf" not in body and "admin/" not in body  # not Django's list of routes


@pytest.mark.django_db
def test_a_server_error_gets_our_500_page_with_the_policy(make_owner, monkeypatch) -> None:
    from frontend import settings_views

    def broken(**_: object) -> None:
        raise RuntimeError("the settings store is down")

    monkeypatch.setattr(settings_views.notifications, "preferences_of", broken)
    client = Client(raise_request_exception=False)
    client.force_login(make_owner("alice"))
    response = client.get("/settings/")
    body = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong on our side" in body and 'href="/"' in body
    assert "RuntimeError" not in body and "Traceback" not in body
    assert policy_of(response) == EXPECTED


def test_the_500_page_renders_without_a_request_or_a_database() -> None:
    from django.template import loader

    html = loader.get_template("500.html").render()
    assert "Something went wrong on our side" in html and "synapsia.css" in html


@pytest.mark.django_db(transaction=True)
@pytest.mark.e2e
def test_the_embedded_default_serves_no_debug_page_and_its_static_files(live_daphne) -> None:
    """A real Daphne started as `make serve` starts it (settings read afresh, no DEBUG in
    the environment): an unknown URL is our 404, never the debug list of routes; static files
    are served without collectstatic."""
    assert os.environ.get("SYNAPSIA_DEBUG") in (None, "", "0", "false")
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{live_daphne}/no-such-page/", timeout=10)  # noqa: S310
    body = missing.value.read().decode()
    assert missing.value.code == 404
    assert "There is no page here" in body and "URLconf" not in body
    assert "default-src 'none'" in missing.value.headers["Content-Security-Policy"]
    with urllib.request.urlopen(f"{live_daphne}/static/frontend/synapsia.css", timeout=10) as css:  # noqa: S310
        assert css.status == 200 and b"--color-text" in css.read()


def _debug_setting(env: dict[str, str]) -> str:
    """The settings of a fresh process on the embedded default (whichever pass this is)."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SYNAPSIA_") and k not in ("DATABASE_URL", "REDIS_URL")
    }
    clean["SYNAPSIA_SQLITE_PATH"] = str(ROOT / "var" / "debug-check.sqlite3")
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", "from django.conf import settings; "
         "print(settings.DEBUG, settings.SERVESTATIC_USE_FINDERS, settings.EMAIL_BACKEND)"],
        cwd=ROOT, env=clean | env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return result.stdout.strip().splitlines()[-1]


def test_debug_is_off_unless_the_owner_turns_it_on() -> None:
    console = "django.core.mail.backends.console.EmailBackend"
    assert _debug_setting({}) == f"False True {console}"
    assert _debug_setting({"SYNAPSIA_DEBUG": "1"}) == f"True True {console}"


# --- the templates need nothing the policy refuses -------------------------------------------

TEMPLATES = sorted(
    p
    for p in ROOT.glob("*/templates/**/*.html")
    if not p.is_relative_to(ROOT / ".venv") and not p.is_relative_to(ROOT / "var")
)
REFUSED = {
    "a style attribute": re.compile(r"""\sstyle\s*=""", re.I),
    "a <style> block": re.compile(r"<style[\s>]", re.I),
    "an inline <script> (no src)": re.compile(r"<script(?![^>]*\ssrc\s*=)[^>]*>", re.I),
    "an on* event handler attribute": re.compile(r"""\son[a-z]+\s*=\s*["'{]""", re.I),
    "a javascript: URL": re.compile(r"javascript:", re.I),
    # Links to other sites are fine (the policy governs what a page loads, not where it links).
    "a script, style or image from another origin": re.compile(
        r"""(\ssrc\s*=\s*["']?(https?:)?//)|(<link[^>]*\shref\s*=\s*["']?(https?:)?//)""", re.I
    ),
}


def test_the_templates_are_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in TEMPLATES}
    assert "frontend/templates/frontend/base.html" in names
    assert "practice/templates/practice/login.html" in names


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_template_has_inline_script_style_or_handlers(template: Path) -> None:
    text = template.read_text()
    found = [
        f"{what} on line {text[: match.start()].count(chr(10)) + 1}: {match.group(0)!r}"
        for what, pattern in REFUSED.items()
        for match in pattern.finditer(text)
    ]
    assert not found, f"{template.relative_to(ROOT)} has what the CSP refuses: {found}"


def test_the_checks_above_catch_what_they_look_for() -> None:
    bad = (
        '<style>p{}</style><p style="color:red"><script>alert(1)</script><button onclick="x()">'
        '<a href="javascript:void(0)"><script src="https://cdn.example/x.js"></script>'
    )
    assert [what for what, pattern in REFUSED.items() if not pattern.search(bad)] == []
    good = '<script src="/static/x.js" defer></script>{{ data|json_script:"d" }}<p class="on">'
    assert not any(pattern.search(good) for pattern in REFUSED.values())


# --- in a real browser: the room page's socket connects under the policy ---------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.e2e
def test_the_room_page_socket_connects_under_the_policy(
    live_daphne, browser_page, make_open_room
) -> None:
    setup = make_open_room()
    page, base = browser_page, live_daphne
    refusals: list[str] = []
    page.on(
        "console",
        lambda m: refusals.append(m.text) if "Content Security Policy" in m.text else None,
    )
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    page.goto(f"{base}/login/")
    page.fill("#id_username", setup.a.owner.get_username())
    page.fill("#id_password", "correct horse 42")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    response = page.goto(f"{base}/rooms/{setup.room.id}/")
    assert "connect-src 'self' ws://" in response.headers["content-security-policy"]
    page.wait_for_selector("#connection:has-text('live')", timeout=15_000)
    assert any(url.startswith("ws://") and "/ws/rooms/" in url for url in sockets), sockets
    # The header's own parts work under the policy: styles applied, the copy script loaded.
    header_bg = page.evaluate(
        "getComputedStyle(document.querySelector('.site-header')).backgroundColor"
    )
    assert header_bg == "rgb(28, 43, 60)"
    assert page.evaluate("document.body.dataset.timeZone") == "UTC"
    assert not refusals, refusals
