#!/usr/bin/env bash
# Build the integration tests' base image envman-test-base:bookworm (idempotent).
#
# No registry is reachable from CI, so nothing can be pulled: the base is a debootstrap'd Debian 12
# minbase (python3 3.11, venv, CA certificates) imported as an image. About 60 s and 270 MB.
set -euo pipefail

IMAGE="${ENVMAN_TEST_BASE:-envman-test-base:bookworm}"
DIR="${ENVMAN_TEST_BASE_DIR:-/tmp/envman-base}"

log() { echo "test-base-image: $*" >&2; }
client() {
    if command -v docker >/dev/null 2>&1; then docker "$@"; else /usr/bin/docker "$@"; fi
}

if client image inspect "$IMAGE" >/dev/null 2>&1; then
    log "$IMAGE already exists"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

if ! command -v debootstrap >/dev/null 2>&1; then
    log "installing debootstrap"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq >/dev/null
    $SUDO apt-get install -y -qq debootstrap >/dev/null
fi

# Use the Debian mirror apt already uses here (deb822 .sources or one-line sources.list): a CI
# network may only reach that one.
mirror() {
    local uri
    uri=$(grep -hE '^\s*URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | awk '{print $2}' | grep -E '/debian/?$' | head -n 1 || true)
    if [ -z "$uri" ]; then
        uri=$(grep -hE '^\s*deb\s' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
            | awk '{for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' \
            | grep -E '/debian/?$' | head -n 1 || true)
    fi
    echo "${uri:-http://deb.debian.org/debian}"
}
MIRROR=$(mirror)

cleanup() { $SUDO rm -rf "$DIR"; }
trap cleanup EXIT
cleanup

log "debootstrap bookworm from $MIRROR into $DIR"
$SUDO debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$DIR" "$MIRROR" >/tmp/envman-debootstrap.log 2>&1 || {
    log "debootstrap failed; last lines of /tmp/envman-debootstrap.log:"
    tail -n 20 /tmp/envman-debootstrap.log >&2
    exit 1
}
# apt caches are dead weight in a test image.
$SUDO rm -rf "$DIR"/var/cache/apt/archives/*.deb "$DIR"/var/lib/apt/lists/*

log "importing as $IMAGE"
$SUDO tar -C "$DIR" -c . | client import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' \
    - "$IMAGE" >/dev/null
log "done: $(client image inspect --format '{{.Id}} {{.Size}}' "$IMAGE")"
