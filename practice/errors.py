"""Why a practice-room request could not be honoured (clear messages for the operator)."""

from __future__ import annotations


class PracticeError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotADemoOwner(PracticeError):
    """The user is not a seeded demo owner: no server-held key, no one-time login."""


class DemoKeyUnavailable(PracticeError):
    """The demo owner's server-held key cannot be used (its sealed seed does not open or does
    not match the enrolled public key): nothing is signed."""


class LoginLinkUnusable(PracticeError):
    """A one-time login link that signs nobody in: unknown or malformed (404), used or
    expired (410)."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status
