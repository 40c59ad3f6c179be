"""Service errors the API maps to HTTP statuses (see backend/api/errors.py). Each carries a stable `code`
(sent beside the message) so that a client can tell one refusal from another without parsing the text."""

from __future__ import annotations

from collections.abc import Sequence


class InvalidParameter(ValueError):
    """A parameter the request cannot be answered with (422)."""

    code = "invalid_parameter"
    known: list[str] | None = None


class SpecModeRequired(InvalidParameter):
    """The model runs several spec modes and the request names none (422); `known` lists them."""

    code = "spec_mode_required"

    def __init__(self, model_name: str, modes: Sequence[str]) -> None:
        super().__init__(f"model {model_name!r} runs several spec modes ({', '.join(modes)}): "
                         f"pass spec_mode as one of them")
        self.known = list(modes)


class NotFound(LookupError):
    """A named thing that does not exist (404); `known` lists what does."""

    def __init__(self, message: str, known: Sequence[str], *, code: str = "not_found") -> None:
        super().__init__(message)
        self.message = message
        self.known = list(known)
        self.code = code


class UnknownModel(NotFound):
    def __init__(self, model_name: str, known: Sequence[str]) -> None:
        super().__init__(f"unknown model {model_name!r}", known, code="unknown_model")
