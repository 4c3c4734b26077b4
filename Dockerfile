# syntax=docker/dockerfile:1
# Multi-stage: build a wheel and its dependencies in a builder, install into a slim runtime.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY worker ./worker
COPY schemas ./schemas
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --upgrade pip \
 && /opt/venv/bin/pip install --no-cache-dir '.[stream]'

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 detemplate \
 && mkdir -p /var/lib/detemplate \
 && chown detemplate /var/lib/detemplate
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    DETEMPLATE_DATA_DIR=/var/lib/detemplate
USER detemplate
WORKDIR /var/lib/detemplate
# RocksDB state of the worker's tables: keep it on a volume so a restart replays only
# the changelog delta.
VOLUME ["/var/lib/detemplate"]
# Exec form: the worker is PID 1's direct child-free process and receives SIGTERM.
ENTRYPOINT ["detemplate"]
CMD ["worker"]
