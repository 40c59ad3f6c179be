"""SPECWATCH_CURRENCY: read from the environment, normalised, a bad value refused with a clear error."""

import pytest
from pydantic import ValidationError

from backend.config import Settings


def test_the_currency_defaults_to_usd_and_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv("SPECWATCH_CURRENCY", raising=False)
    assert Settings(_env_file=None).currency == "USD"
    monkeypatch.setenv("SPECWATCH_CURRENCY", "chf")
    assert Settings(_env_file=None).currency == "CHF"
    monkeypatch.setenv("SPECWATCH_CURRENCY", "€")
    assert Settings(_env_file=None).currency == "€"


@pytest.mark.parametrize("bad", ["dollars", "12", ""])
def test_a_bad_currency_refuses_to_start(monkeypatch, bad):
    monkeypatch.setenv("SPECWATCH_CURRENCY", bad)
    with pytest.raises(ValidationError, match="currency .*expected a 3-letter ISO 4217 code"):
        Settings(_env_file=None)
