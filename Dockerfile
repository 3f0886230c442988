# kernel-wheels serve in a container. UNTESTED: docker could not run where this was
# written; every command in it is tested outside a container (tests/test_serve.py).
#
#   docker build --build-arg VERSION=$(python -m setuptools_scm) -t kernel-wheels-serve .
#   docker run -d -p 8000:8000 -v kw-cache:/cache -e HF_TOKEN \
#       kernel-wheels-serve --kernels drbh/img2gray --workers 2 --cache-size 20G
#   pip install img2gray --index-url http://HOST:8000/torch213-cxx11-cpu/simple
#
# Authentication: mount an htpasswd file and add --auth-file /run/secrets/htpasswd, or
# pass its lines in KERNEL_WHEELS_SERVE_HTPASSWD. See docs/serve.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The version comes from git tags (docs/release.md); the build context has no .git, so
# it is passed in (--build-arg VERSION=...), else the image says 0+docker.
ARG VERSION=0+docker
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# The [serve] extra; bcrypt lets htpasswd files use bcrypt hashes (htpasswd -B); passlib
# 1.7.4 cannot load bcrypt 5 (it refuses the long test password passlib checks with).
RUN SETUPTOOLS_SCM_PRETEND_VERSION="$VERSION" pip install ".[serve]" "bcrypt>=4,<5" \
    && rm -rf /src

# One volume for everything the server keeps: wheels, Hub downloads, commit times.
RUN useradd --system --uid 10001 --home-dir /cache kernel-wheels \
    && mkdir -p /cache && chown kernel-wheels /cache
ENV HF_HOME=/cache/hf \
    KERNEL_WHEELS_CACHE=/cache/kernel-wheels \
    HF_HUB_DISABLE_PROGRESS_BARS=1
VOLUME /cache
USER kernel-wheels
WORKDIR /cache

EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"
# SIGTERM (docker stop): requests in flight, conversions included, finish first.
STOPSIGNAL SIGTERM
ENTRYPOINT ["kernel-wheels", "serve", "--host", "0.0.0.0", "--port", "8000", "--cache", "/cache/wheels"]
CMD ["--kernels", "drbh/img2gray"]
