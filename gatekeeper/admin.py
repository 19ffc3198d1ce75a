"""Admin: operators edit the server-owned tool policy here, and nothing that holds room content.

Sandbox effects and webhook deliveries carry tool arguments (room content), so they are
deliberately not registered: operators never read private rooms.
"""

from __future__ import annotations

from django.contrib import admin

from gatekeeper.models import ToolPolicyRule


@admin.register(ToolPolicyRule)
class ToolPolicyRuleAdmin(admin.ModelAdmin):
    list_display = ("agent_key", "tool", "effect", "note", "updated_at")
    list_filter = ("effect", "tool")
    search_fields = ("agent_key", "tool", "note")
