#!/usr/bin/env bash
# Install relmerge with its development tools (and heta-framework, to test the step inside
# its builds) into .venv, then lint, type-check and test.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# heta: relmerge's step is tested inside real heta-framework builds.
.venv/bin/python -m pip install --quiet -e '.[dev,heta]'
# The review page is tested in a real headless browser: Debian's chromium (Playwright's
# own browser download cannot work offline).
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 \
    && [ "$(id -u)" = 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/pytest "$@"
