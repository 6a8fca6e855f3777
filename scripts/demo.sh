#!/usr/bin/env bash
# Install relmerge into .venv and deduplicate the bundled sample batch offline
# (default embedder shipped in the package, no LLM, no API key).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
.venv/bin/relmerge run examples/sample/relations.jsonl \
  --entity-mapping examples/sample/entity_id_mapping.json \
  --entities examples/sample/entities.jsonl \
  --output out/sample --overwrite "$@"
echo "outputs in out/sample: deduplicated_relations/, relation_id_mapping.json, decisions.jsonl …"
waiting=$(grep -c . out/sample/clarifications.jsonl 2>/dev/null || true)
if [ "${waiting:-0}" -gt 0 ]; then
  echo "${waiting} cases wait for a person: .venv/bin/relmerge review out/sample" \
    "(then run bash scripts/demo.sh again to apply the answers)"
else
  echo "no case waits for a person."
fi
