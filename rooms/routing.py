from __future__ import annotations

from django.urls import path

from rooms.consumers import RoomConsumer

websocket_urlpatterns = [
    path("ws/rooms/<str:room_id>/", RoomConsumer.as_asgi()),
]
