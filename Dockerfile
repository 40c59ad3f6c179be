# specwatch: one image for migrate, worker, beat, api, dashboard and the simulator (the command picks).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SPECWATCH_DATA_DIR=/data

WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY backend ./backend
COPY workers ./workers
COPY dashboard ./dashboard
COPY migrations ./migrations
# the alert rules in force unless you mount your own here (SPECWATCH_ALERT_RULES_FILE in docker-compose.yml)
COPY alerts.example.yaml /etc/specwatch/alerts.yaml
# editable: alembic.ini and migrations/ are found next to the sources (backend/cli/serve.py)
RUN pip install -e . \
 && useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin specwatch \
 && mkdir -p /data && chown specwatch:specwatch /data

USER specwatch
VOLUME ["/data"]
EXPOSE 8000 8050
ENTRYPOINT ["specwatch"]
CMD ["--help"]
