from tests.api.conftest import client  # noqa: F401  (the app on the rollback-per-test session)
