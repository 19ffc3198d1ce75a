from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from frontend import (
    account_views,
    deletion_views,
    ledger_views,
    package_views,
    room_views,
    settings_views,
    slip_views,
    vault_views,
    views,
    webhook_views,
)

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("signup/", account_views.signup, name="signup"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("settings/", settings_views.settings_page, name="settings"),
    path("settings/password/", account_views.PasswordChange.as_view(), name="password_change"),
    path("settings/delete-account/", deletion_views.account_delete_confirm, name="account-delete"),
    path("settings/webhooks/", webhook_views.webhooks_page, name="webhooks"),
    path("password-reset/", account_views.PasswordResetRequest.as_view(), name="password_reset"),
    path(
        "password-reset/sent/",
        account_views.PasswordResetSent.as_view(),
        name="password_reset_done",
    ),
    path(
        "password-reset/<uidb64>/<token>/",
        account_views.PasswordResetNew.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "password-reset/done/",
        account_views.PasswordResetFinished.as_view(),
        name="password_reset_complete",
    ),
    path("agents/", views.agents, name="agents"),
    path("agents/<uuid:agent_id>/rotate/", views.agent_rotate, name="agent-rotate"),
    path("agents/<uuid:agent_id>/revoke/", views.agent_revoke, name="agent-revoke"),
    path("rooms/<uuid:room_id>/", room_views.room, name="room"),
    path("rooms/<uuid:room_id>/ledger/", ledger_views.room_ledger, name="room-ledger"),
    path("rooms/<uuid:room_id>/package/", package_views.room_package, name="room-package"),
    path("rooms/<uuid:room_id>/close/", deletion_views.room_close, name="room-close"),
    path("rooms/<uuid:room_id>/delete/", deletion_views.room_delete_confirm, name="room-delete"),
    path(
        "notices/<int:notice_id>/dismiss/",
        deletion_views.notice_dismiss,
        name="deletion-notice-dismiss",
    ),
    path("invites/<str:token>/", views.invite, name="invite"),
    path("keys/", slip_views.keys, name="keys"),
    path("vault/", vault_views.vault_page, name="vault"),
    path("rooms/<uuid:room_id>/slip/", slip_views.slip, name="room-slip"),
]
