"""The admin's user pages, without the ways into an owner's account.

Django's stock UserAdmin lets any superuser set another user's password (and so log in as
them and read their rooms, vault and whispers). Here no one sets a password through the admin:
the password page is gone and the password field is not on the form; another user's email
(where a password reset would be sent) and username cannot be edited. There is no "log in as".
New accounts are created by people signing up, not by the operator: adding a user is off too,
since an account the operator made would be one whose password the operator knows. Nor is a
user deleted here (the confirmation page would list their rooms and content); the operator
deactivates an account instead.

Exit notes and abuse reports are not registered: notes are room content, and reports are read
on the operator's own pages (stewards.views), where only staff reach them.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse

admin.site.unregister(User)


@admin.register(User)
class OwnerAdmin(UserAdmin):
    fieldsets = (
        (None, {"fields": ("username",)}),
        ("Personal info", {"fields": ("first_name", "last_name", "email")}),
        (
            "Permissions",
            {"fields": ("is_active", "is_staff", "is_superuser", "groups", "user_permissions")},
        ),
        ("Important dates", {"fields": ("last_login", "date_joined")}),
    )
    readonly_fields = ("last_login", "date_joined")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        fields = tuple(super().get_readonly_fields(request, obj))
        if obj is not None and obj.pk != request.user.pk:
            # Another owner's login and reset address are theirs alone.
            fields += ("username", "email", "first_name", "last_name")
        return fields

    def user_change_password(
        self, request: HttpRequest, id: str, form_url: str = ""
    ) -> HttpResponse:
        # The page stays routed (a catch-all would otherwise redirect it to the change form)
        # but answers 404 for everyone: owners change theirs on their settings page.
        raise Http404("No password is set through the admin.")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Django's delete page lists everything that would go with an owner (their rooms by
        # purpose, vault items, whispers...): room content. Deleting an account is the owner's
        # own act, which deletes their rooms for both sides and tells the partner; the
        # operator can only deactivate (is_active).
        return False
