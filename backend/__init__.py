"""specwatch backend: domain math, data layer, Prometheus adapter, services and the HTTP API."""

import os

# One BLAS thread per process unless the operator says otherwise: the API, workers and dashboard serve
# requests in parallel, and small matrix products (the latency verdict's bootstrap) spent more time in
# OpenBLAS's thread hand-off than in arithmetic on a 2-core host (fleet 24 h: 4.0 s -> 1.7 s).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
