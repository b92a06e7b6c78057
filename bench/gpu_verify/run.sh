#!/usr/bin/env bash
# envman's GPU verification kit: one command, no network, a report under OUT.
#
#   bash bench/gpu_verify/run.sh OUT [--dry-run]
#
# Runs envman from this working tree (PYTHONPATH), with the python3 that holds torch (ENVMAN_KIT_PYTHON to
# choose another). envman's own dependencies are usually there already (typer, pyyaml, jinja2, packaging,
# nvidia-ml-py); where one is missing, the wheels that bench/gpu_verify/prepare.sh put in .gpukit-wheels/
# are installed into a temporary folder, offline. The whole run stays under ~6 minutes (verify.py --budget).
set -uo pipefail
out=${1:?usage: run.sh OUT [--dry-run]}
shift
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${ENVMAN_KIT_PYTHON:-$(command -v python3)}
mkdir -p "$out"
missing=$("$py" - <<'PY'
import importlib.util as u
print(" ".join(m for m in ("typer", "yaml", "jinja2", "packaging") if u.find_spec(m) is None))
PY
)
if [ -n "$missing" ]; then
    if [ -d "$root/.gpukit-wheels" ]; then
        echo "gpu_verify: installing $missing from .gpukit-wheels (offline)"
        "$py" -m pip install -q --no-index --no-deps --no-compile --target /tmp/gpukit-site "$root"/.gpukit-wheels/*.whl ||
            { echo "gpu_verify: the offline install failed" >&2; exit 3; }
        export PYTHONPATH=/tmp/gpukit-site${PYTHONPATH:+:$PYTHONPATH}
    else
        echo "gpu_verify: $py lacks $missing and there is no .gpukit-wheels/ (run bench/gpu_verify/prepare.sh here first)" >&2
        exit 3
    fi
fi
export ENVMAN_KIT_PYTHON=$py
exec timeout --kill-after=10 380 "$py" "$here/verify.py" "$out" "$@"
