# syntax=docker/dockerfile:1
# predictive-headroom daemon image.
#   docker build -t predictive-headroom:dev .
#   docker build --build-arg PYTHON_DIGEST=sha256:<digest of the tag below> ...   (a release)
# Stage 1 downloads the locked dependencies (requirements/runtime.txt, every file checked against
# its hash) and builds the app's wheel with the locked build tools (requirements/build.txt); stage
# 2 installs them into a virtualenv on a clean python slim image (glibc, so Prophet's and cmdstan's
# manylinux wheels work) from those files only, with no compilers, no pip cache and no build
# context left behind.
#
# The base is named by its exact CPython patch release; PYTHON_DIGEST (empty by default) pins it
# to one build of that tag. deploy/README.md's release steps look the digest up and fill it.
ARG PYTHON_IMAGE=python:3.11.18-slim-bookworm
ARG PYTHON_DIGEST=

FROM ${PYTHON_IMAGE}${PYTHON_DIGEST:+@}${PYTHON_DIGEST} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY requirements/build.txt requirements/runtime.txt ./requirements/
RUN python -m pip install --require-hashes -r requirements/build.txt \
 && python -m pip download --require-hashes --only-binary=:all: --dest /tools -r requirements/build.txt \
 && python -m pip download --require-hashes --only-binary=:all: --dest /wheels -r requirements/runtime.txt
COPY pyproject.toml README.md ./
COPY predictive_headroom ./predictive_headroom
RUN python -m pip wheel --no-deps --no-build-isolation --wheel-dir /app .

FROM ${PYTHON_IMAGE}${PYTHON_DIGEST:+@}${PYTHON_DIGEST} AS runtime
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    TMPDIR=/tmp \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib \
    PH_REPORT_DIR=/tmp/predictive-headroom/reports
# The wheels are bind-mounted from the build stage, so they never become a layer of this image;
# the locked build tools replace those the venv starts with, and pip leaves once it is done.
# Bytecode is compiled now: at run time the root filesystem is read-only.
RUN --mount=type=bind,from=build,source=/src/requirements,target=/requirements \
    --mount=type=bind,from=build,source=/tools,target=/tools \
    --mount=type=bind,from=build,source=/wheels,target=/wheels \
    --mount=type=bind,from=build,source=/app,target=/app \
    python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-index --find-links=/tools --require-hashes -r /requirements/build.txt \
 && /opt/venv/bin/pip install --no-index --find-links=/wheels --require-hashes --compile -r /requirements/runtime.txt \
 && /opt/venv/bin/pip install --no-index --no-deps --compile /app/*.whl \
 && /opt/venv/bin/pip check \
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
