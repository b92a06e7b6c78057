#!/usr/bin/env bash
# Make a Docker engine answer on this machine (idempotent).
#
# CI machines start without an engine; Debian's docker.io package (engine 20.10) installs in seconds and
# dockerd runs in the background as root. Its own 20.10 client (/usr/bin/docker) carries BuildKit
# natively, which matters because the `docker` first on PATH may lack the buildx plugin.
set -euo pipefail

log() { echo "docker-up: $*" >&2; }

# Any client will do to ask the daemon; prefer the one on PATH, fall back to the package's.
client() {
    if command -v docker >/dev/null 2>&1; then docker "$@"; else /usr/bin/docker "$@"; fi
}

if client info >/dev/null 2>&1; then
    log "engine already answers"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

if ! command -v dockerd >/dev/null 2>&1; then
    # docker-registry (distribution 2.8, a few MB): the push tests run one on loopback.
    log "installing docker.io docker-registry"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq >/dev/null
    $SUDO apt-get install -y -qq docker.io docker-registry >/dev/null
fi

# Under systemd the service is the right way; in containers and plain CI runners there is no systemd.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    log "starting docker via systemctl"
    $SUDO systemctl start docker || true
fi

if ! client info >/dev/null 2>&1; then
    if ! pgrep -x dockerd >/dev/null 2>&1; then
        log "starting dockerd in the background (logs: /tmp/dockerd.log)"
        # setsid: the daemon must outlive this script and not get the caller's Ctrl-C.
        $SUDO setsid dockerd >/tmp/dockerd.log 2>&1 < /dev/null &
    fi
fi

for _ in $(seq 1 60); do
    if client info >/dev/null 2>&1; then
        log "engine answers"
        exit 0
    fi
    sleep 1
done

log "no answer from the engine after 60 s; last lines of /tmp/dockerd.log:"
tail -n 20 /tmp/dockerd.log >&2 || true
exit 1
