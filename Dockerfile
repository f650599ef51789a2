# syntax=docker/dockerfile:1
# predictive-headroom daemon image.
#   docker build -t predictive-headroom:dev .
# Stage 1 builds wheels for the app and all its dependencies; stage 2 installs them into a
# virtualenv on a clean python:3.11-slim (glibc, so Prophet's and cmdstan's manylinux wheels
# work) with no compilers, no pip cache and no build context left behind.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY predictive_headroom ./predictive_headroom
RUN python -m pip wheel --wheel-dir /wheels .

FROM ${PYTHON_IMAGE} AS runtime
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    TMPDIR=/tmp \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib \
    PH_REPORT_DIR=/tmp/predictive-headroom/reports
# The wheels are bind-mounted from the build stage, so they never become a layer of this image.
# Bytecode is compiled now: at run time the root filesystem is read-only.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-index --find-links=/wheels --compile predictive-headroom \
 && /opt/venv/bin/pip uninstall --yes pip \
 && groupadd --gid 10001 predictive-headroom \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin predictive-headroom
# Numeric, so Kubernetes can verify runAsNonRoot without reading /etc/passwd.
USER 10001:10001
# /tmp must be writable (an emptyDir in Kubernetes): Prophet/cmdstan, matplotlib and reports use it.
VOLUME ["/tmp"]
EXPOSE 8443 8081
ENTRYPOINT ["predictive-headroom"]
CMD ["run", "--config", "/etc/predictive-headroom/config.yaml"]
