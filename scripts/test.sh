#!/usr/bin/env bash
# Install relmerge with its development tools (and heta-framework, to test the step inside
# its builds, and MkDocs, to build the documentation site) into .venv, then lint,
# type-check, test, and build the site strictly.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# heta: relmerge's step is tested inside real heta-framework builds.
.venv/bin/python -m pip install --quiet -e '.[dev,heta,docs]'
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
# The documentation site, as it would be published: --strict fails on any warning, and
# mkdocs.yml turns broken links and anchors and pages left out of the nav into warnings.
# Not --quiet: it silences the warnings, and strict mode then has nothing to fail on.
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$site"
