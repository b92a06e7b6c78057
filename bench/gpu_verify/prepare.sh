#!/usr/bin/env bash
# Before a GPU run, on a machine with PyPI: envman's pure-Python dependencies (and PyYAML/MarkupSafe for the
# GPU machine's Python) as wheels in .gpukit-wheels/ (git-ignored; name it in the device run's `carry`).
# Only needed where the GPU machine's python3 lacks them: run.sh says so. A few MB.
#
#   bash bench/gpu_verify/prepare.sh [PYTHON_VERSION]   (default 3.12, the lent H200's)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
pyv=${1:-3.12}
dest="$root/.gpukit-wheels"
rm -rf "$dest" && mkdir -p "$dest"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$pyv" --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 -d "$dest" \
    'typer>=0.20,<0.28' annotated-doc rich shellingham markdown-it-py mdurl pygments typing-extensions packaging \
    pyyaml jinja2 markupsafe nvidia-ml-py
du -sh "$dest"
