"""Real inference engines specwatch can start locally (tests, demo)."""
