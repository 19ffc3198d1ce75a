"""The test run's settings: production's own, with a fast password hasher listed first and
static files listed once per process (``tests.static_files``).

Every owner a test makes has a password, and PBKDF2 at Django's million iterations costs
0.2-0.4 s a hash on a CI machine: minutes of each pass of ``make test``, spent on nothing the
tests check (Django's testing documentation recommends a fast hasher for this reason). A stored
hash names the hasher that made it, and every process a test starts (Daphne, manage.py, a
Celery worker) inherits ``DJANGO_SETTINGS_MODULE`` and so reads this module too: a login through
a real server verifies these hashes. Production's hashers stay listed after it, so a hash made
by production's default still verifies here. Apart from these two, the settings are production's.
"""

from django.conf import global_settings

from synapsia.settings import *  # noqa: F403 (the production settings, unchanged but for this)

PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    *global_settings.PASSWORD_HASHERS,
]

MIDDLEWARE = [
    "tests.static_files.ServeStaticListedOnce"
    if entry == "servestatic.middleware.ServeStaticMiddleware"
    else entry
    for entry in MIDDLEWARE  # noqa: F405
]
