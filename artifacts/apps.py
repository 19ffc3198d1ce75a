from __future__ import annotations

from django.apps import AppConfig


class ArtifactsConfig(AppConfig):
    name = "artifacts"
    verbose_name = "Shared artifacts"

    def ready(self) -> None:
        # The artifacts row of the retention schedule purges here, and a deleted room's
        # artifacts go with it (rooms.retention, rooms.deletion). The share decision joins
        # the Gatekeeper's decide() (a module import registers it).
        import gatekeeper.sharing  # noqa: F401
        from artifacts.retention import artifacts_delete_for_room, artifacts_purge_expired
        from rooms.deletion import room_content_deleter_register
        from rooms.retention import retention_purge_register

        retention_purge_register("artifacts", artifacts_purge_expired)
        room_content_deleter_register("artifacts", "artifacts", artifacts_delete_for_room)
