from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from frontend import account_views, ledger_views, room_views, slip_views, vault_views, views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("signup/", account_views.signup, name="signup"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("agents/<uuid:agent_id>/rotate/", views.agent_rotate, name="agent-rotate"),
    path("agents/<uuid:agent_id>/revoke/", views.agent_revoke, name="agent-revoke"),
    path("rooms/<uuid:room_id>/", room_views.room, name="room"),
    path("rooms/<uuid:room_id>/ledger/", ledger_views.room_ledger, name="room-ledger"),
    path("invites/<str:token>/", views.invite, name="invite"),
    path("keys/", slip_views.keys, name="keys"),
    path("vault/", vault_views.vault_page, name="vault"),
    path("rooms/<uuid:room_id>/slip/", slip_views.slip, name="room-slip"),
]
