"""Admin: the operator sees that artifacts exist (when, which media type, how large), never
what they say. The sealed title and body, the room (whose name is its purpose, room content)
and the publisher are not shown; nothing can be added, changed or deleted here (an artifact
goes with its room or at the end of its retention window)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from artifacts.models import Artifact


@admin.register(Artifact)
class ArtifactAdmin(admin.ModelAdmin):
    list_display = ("created_at", "media_type", "size_bytes", "shared_with_peer")
    list_filter = ("media_type", "shared_with_peer")
    fields = ("created_at", "media_type", "size_bytes", "shared_with_peer")
    readonly_fields = fields
    date_hierarchy = None
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
