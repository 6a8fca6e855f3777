#!/usr/bin/env bash
# From a clone: install relmerge into .venv (as a PyPI user would get it, not editable) and
# run `relmerge demo`, the sample batch shipped in the package, offline (default embedder
# shipped in a PyPI package, no LLM, no API key).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet .
.venv/bin/relmerge demo --output out/sample --overwrite
echo "relmerge is installed in .venv: 'source .venv/bin/activate' once per shell to run" \
  "the commands above as written (or put .venv/bin/ before relmerge)."
