# dra-mirror image: `docker build -t dra-mirror .`
# Stage 1 builds a virtualenv with the project and its dependencies (wheels only, no
# compiler needed); stage 2 copies that virtualenv onto a slim base and runs as non-root.

FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/dra-mirror
WORKDIR /src
# Dependencies change less often than the code: install them in their own layer.
COPY pyproject.toml setup.py README.md ./
RUN mkdir -p service schema migrations \
    && touch service/__init__.py schema/__init__.py \
    && /opt/dra-mirror/bin/pip install . \
    && /opt/dra-mirror/bin/pip uninstall -y dra-mirror
COPY service ./service
COPY schema ./schema
COPY migrations ./migrations
RUN /opt/dra-mirror/bin/pip install --no-deps . \
    && /opt/dra-mirror/bin/dra-mirror --help >/dev/null

FROM python:3.11-slim
# A fixed numeric uid/gid so Kubernetes can check runAsNonRoot without a passwd lookup.
# /shared: docker-compose mounts a named volume there, which takes this directory's owner.
RUN groupadd --system --gid 10001 dramirror \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/dra-mirror \
       --shell /usr/sbin/nologin dramirror \
    && mkdir -p /var/lib/dra-mirror /shared \
    && chown 10001:10001 /var/lib/dra-mirror /shared
COPY --from=build /opt/dra-mirror /opt/dra-mirror
# In a container the API must listen beyond loopback (the process default is 127.0.0.1).
ENV PATH=/opt/dra-mirror/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DRA_MIRROR_HTTP_HOST=0.0.0.0
WORKDIR /var/lib/dra-mirror
USER 10001:10001
EXPOSE 8000
ENTRYPOINT ["dra-mirror"]
CMD ["serve"]
