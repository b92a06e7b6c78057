#!/usr/bin/env bash
# Make the daemonless engines usable on this machine (idempotent): podman, buildah, skopeo and umoci from
# Debian (podman 4.3 / buildah 1.28 on Debian 12), and runc beside crun — on hybrid cgroups crun refuses to
# start containers, and envman then picks runc (envman/engine/runtime.py). Nothing is started: podman and
# buildah have no daemon.
set -euo pipefail

log() { echo "podman-up: $*" >&2; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

missing=()
for tool in podman buildah skopeo umoci runc; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done

if [ "${#missing[@]}" -eq 0 ]; then
    log "podman, buildah, skopeo, umoci and runc already installed"
else
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt_get_install() { $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
    # apt's lists may be absent on a fresh machine
    apt_get_install "${missing[@]}" 2>/dev/null || { $SUDO apt-get update -qq >/dev/null && apt_get_install "${missing[@]}"; }
fi

# podman and buildah need a policy and a registries file; Debian's containers-common ships both. A machine
# that lost them (a minimal image) gets the permissive defaults that accept local images.
if [ ! -e /etc/containers/policy.json ]; then
    log "writing /etc/containers/policy.json (insecureAcceptAnything: no registry is contacted for local images)"
    $SUDO mkdir -p /etc/containers
    echo '{"default":[{"type":"insecureAcceptAnything"}]}' | $SUDO tee /etc/containers/policy.json >/dev/null
fi

log "$(podman --version), $(buildah --version | cut -d' ' -f1-3), $(skopeo --version), $(umoci --version), runc $(runc --version | head -n 1 | awk '{print $3}')"
