"""Wire models by resource: import each from its module (backend.schemas.fleet, ...)."""
