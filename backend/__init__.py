"""specwatch backend: domain math, data layer, Prometheus adapter, services and the HTTP API."""
