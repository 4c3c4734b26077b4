# syntax=docker/dockerfile:1
# detemplate stream worker image.
#
# Two stages: the build stage runs deploy/build.sh (the wheel of this project, installed with
# the `stream` extra into /opt/venv, the page walk compiled and checked to load, every version
# pinned by deploy/constraints.txt); the
# runtime stage is a slim Python with that virtualenv only: no compiler, no pip cache, no
# sources. CI runs the same deploy/build.sh into a fresh virtualenv (tests/test_image_recipe.py).
#
#   docker build -t detemplate:0.1.0 .
#   docker run --rm -e DETEMPLATE_BROKER=kafka://kafka:9092 -p 8780:8780 detemplate:0.1.0

ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# A C compiler for the compiled page walk (worker/engine/page/_walk.pyx); the runtime stage has none.
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
# Dependencies change less often than the code: the constraints and recipe come first.
COPY deploy/build.sh deploy/constraints.txt ./deploy/
COPY pyproject.toml setup.py README.md ./
COPY worker ./worker
# REQUIRE_COMPILED=1: the build fails, loudly, when the compiled page walk does not load.
RUN PYTHON=python REQUIRE_COMPILED=1 deploy/build.sh /opt/venv /src \
 && find /opt/venv -name '__pycache__' -prune -exec rm -rf {} + \
 && python -m compileall -q /opt/venv/lib

FROM python:${PYTHON_VERSION}-slim AS runtime
ARG UID=10001
RUN groupadd --system --gid ${UID} detemplate \
 && useradd --system --uid ${UID} --gid ${UID} --home-dir /var/lib/detemplate --no-create-home \
        --shell /usr/sbin/nologin detemplate \
 && install -d -o ${UID} -g ${UID} -m 0750 /var/lib/detemplate
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DETEMPLATE_DATA_DIR=/var/lib/detemplate \
    DETEMPLATE_REQUIRE_COMPILED=1 \
    OPENBLAS_NUM_THREADS=1
# The worker refuses to start without the compiled walk (a mismatched selectolax would
# otherwise fall back to the Python walk, 1.8x slower, without a word). numpy's BLAS runs one
# thread: the engine's matrix products are small, and BLAS's other threads (one a core the
# container sees) would only spin after each (worker/blas.py, settings.tune_blas).
USER ${UID}:${UID}
WORKDIR /var/lib/detemplate
# The worker's RocksDB state: on a volume (a PersistentVolumeClaim per replica in
# Kubernetes), so a restarted worker replays only the changelog records written since.
VOLUME ["/var/lib/detemplate"]
# /metrics (Prometheus), /healthz (liveness), /readyz (readiness): worker/stream/metrics.py.
EXPOSE 8780
# The slim image has no curl: Python asks the liveness endpoint. It fails when the
# worker's event loop has stopped beating (see docs/deploy.md).
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('DETEMPLATE_METRICS_PORT', '8780'); sys.exit(urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=4).status != 200)"]
# Exec form: detemplate is PID 1 itself (no shell in between), so the SIGTERM of `docker
# stop` or Kubernetes reaches the worker, which leaves the consumer group and commits.
ENTRYPOINT ["detemplate"]
CMD ["worker"]
