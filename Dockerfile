# The same scripts as on a bare machine, on Debian trixie: the host is the build root,
# so no debootstrap or chroot is needed. The wheel lands in /src/dist.
#   docker build -t torch-semiring .
#   docker run --rm torch-semiring python3 scripts/semiring test
FROM debian:trixie

RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 ca-certificates git patch \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src

# The build dependencies (scripts/semiring_tool/buildroot.py: PACKAGES). Only the scripts
# are copied for this layer, so that editing a patch or a test keeps it cached.
COPY scripts/ /src/scripts/
RUN python3 -c "import sys; sys.path.insert(0, 'scripts'); \
from semiring_tool.buildroot import PACKAGES, SELECT_OPENMP_BLAS; \
print(' '.join(PACKAGES)); open('/tmp/select-blas', 'w').write(SELECT_OPENMP_BLAS)" > /tmp/packages \
    && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(cat /tmp/packages) \
    && sh -c "$(cat /tmp/select-blas)" \
    && rm -rf /var/lib/apt/lists/*

# The rest of the repository (the pin, the series, the tests), then the build.
COPY . /src
ENV TORCH_SEMIRING_STATE=/var/cache/torch-semiring
RUN python3 scripts/semiring build

CMD ["python3", "scripts/semiring", "test"]
