"""Domain errors with stable codes. The API maps them to HTTP statuses; pages show the message."""

from __future__ import annotations


class RoomError(Exception):
    code = "room_error"
    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(RoomError):
    """Also used where "exists but not yours" must not be told apart from "does not exist"."""

    code = "not_found"
    status = 404


class InvalidState(RoomError):
    code = "invalid_state"
    status = 409


class InviteUnusable(RoomError):
    code = "invite_unusable"
    status = 410


class Invalid(RoomError):
    code = "invalid"
    status = 422
