"""Claims of docs/threat-model.md that named no test of their own (ASVS V3 and V13; the
trust assumption that the login lockout does not depend on Redis):

- a password change signs out every other session of the owner (the one that changed it
  stays signed in);
- the login lockout is counted in the database: with the cache (Redis) unreachable, wrong
  passwords still lock the owner out;
- an API path asked with a method it does not support answers 405, never runs a handler or
  fails with a 500.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

OLD = "correct horse 42"  # make_owner's password
NEW = "a new horse 4242"
# (", or reset your password." follows where email is set up: not in the services profile)
LOCKED_WORDS = "Too many attempts: try again in 15 minutes"


def test_a_password_change_signs_out_the_owner_s_other_sessions(make_owner: Any) -> None:
    make_owner("alice")
    laptop, phone, stolen = Client(), Client(), Client()
    for client in (laptop, phone, stolen):
        assert client.login(username="alice", password=OLD)
        assert client.get("/settings/").status_code == 200
    changed = laptop.post(
        "/settings/password/",
        {"old_password": OLD, "new_password1": NEW, "new_password2": NEW},
    )
    assert changed.status_code == 302
    assert laptop.get("/settings/").status_code == 200  # the session that changed it stays
    for other in (phone, stolen):
        answer = other.get("/settings/")
        assert answer.status_code == 302 and answer["Location"].startswith("/login/"), answer
        assert other.get("/api/agents").status_code in (401, 403)


def test_the_login_lockout_holds_with_the_cache_down(settings: Any, make_owner: Any) -> None:
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1
        }
    }
    make_owner("alice")
    attacker = "203.0.113.9"
    answers = [
        Client(REMOTE_ADDR=attacker).post("/login/", {"username": "alice", "password": f"g{n}"})
        for n in range(settings.AXES_FAILURE_LIMIT + 3)
    ]
    limit = settings.AXES_FAILURE_LIMIT
    assert all(a.status_code == 200 for a in answers[: limit - 1])
    assert all(a.status_code == 429 for a in answers[limit:]), [a.status_code for a in answers]
    right = Client(REMOTE_ADDR="198.51.100.9").post(
        "/login/", {"username": "alice", "password": OLD}
    )
    assert right.status_code == 429 and LOCKED_WORDS in right.content.decode()


METHODS = {"get", "post", "put", "patch", "delete"}


def test_every_api_path_answers_405_to_a_method_it_does_not_support(make_owner: Any) -> None:
    owner = make_owner("alice")
    client = Client()
    client.force_login(owner)
    schema = client.get("/api/openapi.json").json()
    tried = 0
    for path, operations in schema["paths"].items():
        url = "/".join(  # any id: the method is refused before the object is looked up
            "00000000-0000-4000-8000-000000000000" if part.startswith("{") else part
            for part in path.split("/")
        )
        for method in sorted(METHODS - set(operations)):
            answer = getattr(client, method)(url, content_type="application/json", data={})
            assert answer.status_code == 405, (method, path, answer.status_code)
            tried += 1
    print(f"{tried} unsupported (path, method) pairs, all 405")
    assert tried >= 40, tried  # every path, every method it lacks
