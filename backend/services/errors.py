"""Service errors the API maps to HTTP statuses (see backend/api/errors.py)."""

from __future__ import annotations

from collections.abc import Sequence


class InvalidParameter(ValueError):
    """A parameter the request cannot be answered with (422)."""


class NotFound(LookupError):
    """A named thing that does not exist (404); `known` lists what does."""

    def __init__(self, message: str, known: Sequence[str]) -> None:
        super().__init__(message)
        self.message = message
        self.known = list(known)


class UnknownModel(NotFound):
    def __init__(self, model_name: str, known: Sequence[str]) -> None:
        super().__init__(f"unknown model {model_name!r}", known)
