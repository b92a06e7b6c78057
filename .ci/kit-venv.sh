#!/usr/bin/env bash
# The GPU kit's dry run trains its setups at toy sizes on the CPU (tests/integration/test_gpu_kit.py): a venv
# with torch (pip takes the local CPU build, no download), transformers and peft. Kept between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
if .venv-kit/bin/python -c "import torch, transformers, peft, yaml, typer, jinja2" 2>/dev/null; then
    exit 0
fi
rm -rf .venv-kit
python3 -m venv .venv-kit
.venv-kit/bin/python -m pip install -q torch==2.13.0 transformers peft pyyaml 'typer>=0.20,<0.28' jinja2 packaging nvidia-ml-py
