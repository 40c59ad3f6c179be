"""Where the tests' own fixtures live: inside the repository (tests/fixtures), never beside the clone."""

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
