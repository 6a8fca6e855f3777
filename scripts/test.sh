#!/usr/bin/env bash
# What CI runs (.ci/run), on what a PyPI user installs rather than the working tree:
#   1. build the sdist and the wheel and check them (twine check --strict);
#   2. install the wheel alone into a fresh environment outside the checkout and run
#      `relmerge demo` there;
#   3. install the built wheel (not editable) with its extras [dev,heta,ray,s3,docs,postgres,lightrag,graphiti] into
#      .venv, then ruff, ruff format --check, mypy and pytest against it;
#   4. build the documentation site strictly (broken links, anchors, pages left out fail).
# Arguments go to pytest. Step 3 replaces an editable install in .venv (CONTRIBUTING.md).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/relmerge-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
timings=()
phase() {  # name the next phase; the time of the one before is kept for the summary
  if [ -n "${current:-}" ]; then timings+=("$((SECONDS - started)) s  $current"); fi
  current=$1
  started=$SECONDS
  echo "== $1"
}

phase "build and check the sdist and the wheel"
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip 'build>=1.2' 'twine>=7.0'
# The sdist first, then the wheel built from it: a file the sdist lacks fails here.
.venv/bin/python -m build --outdir "$work/dist" .
.venv/bin/python -m twine check --strict "$work"/dist/*
wheels=("$work"/dist/relmerge-*-py3-none-any.whl)
wheel=${wheels[0]}

phase "relmerge demo from the wheel alone, outside the checkout"
python3 -m venv "$work/user"
"$work/user/bin/python" -m pip install --quiet "$wheel"
(cd "$work" && "$work/user/bin/relmerge" demo --output "$work/demo")
for name in deduplicate_relations_result.json relation_id_mapping.json \
    deduplicated_relation_keys.json decisions.jsonl; do
  if [ ! -s "$work/demo/$name" ]; then
    echo "relmerge demo from the wheel wrote no $name" >&2
    exit 1
  fi
done

phase "install the wheel with [dev,heta,ray,s3,docs,postgres,lightrag,graphiti] into .venv"
# Not the checkout: the tests test what `pip install relmerge[...]` gives. An earlier
# install of the same version (editable, or a wheel built before) goes first.
.venv/bin/python -m pip uninstall --quiet --yes relmerge 2>/dev/null || true
.venv/bin/python -m pip install --quiet "relmerge[dev,heta,ray,s3,docs,postgres,lightrag,graphiti] @ file://$wheel"
# The review page is tested in a real headless browser: Debian's chromium (Playwright's
# own browser download cannot work offline).
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 \
    && [ "$(id -u)" = 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
# The relation store tests start a throw-away PostgreSQL server (tests/support/postgres.py):
# Debian's postgresql, whose initdb and pg_ctl they find under /usr/lib/postgresql.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1 \
    && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi

phase "ruff, ruff format --check, mypy"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy

phase "pytest against the installed wheel"
# tests/test_packaging.py: relmerge must come from site-packages, and these artifacts
# must carry the project's files.
RELMERGE_TEST_WHEEL=1 RELMERGE_DIST="$work/dist" .venv/bin/pytest "$@"
phase "documentation site (mkdocs build --strict)"
# --strict fails on any warning, and mkdocs.yml turns broken links and anchors and pages
# left out of the nav into warnings. Not --quiet: it silences the warnings, and strict
# mode then has nothing to fail on.
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$work/site"
phase "done"
printf '%s\n' "${timings[@]}"
