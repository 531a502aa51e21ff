#!/usr/bin/env bash
# Opt-in version checks, outside CI (CI and the README install the tested set in constraints.txt).
#
#   bash tools/check_versions.sh latest    fresh venv with today's newest releases the extras allow (no constraints):
#                                          prints what differs from constraints.txt, then lint, types and the suite.
#                                          Run it before a release, or when a dependency announces a major version,
#                                          to see what a new release breaks before users meet it.
#   bash tools/check_versions.sh oldest    fresh venv with the floors of pyproject.toml's ranges (numpy==2.0, ...):
#                                          shows whether the lower bounds we declare still hold.
#   bash tools/check_versions.sh --update  regenerate constraints.txt from a fresh venv holding every extra (then
#                                          run the whole suite with it before committing).
#
# Extra arguments go to pytest (e.g. `bash tools/check_versions.sh latest -x -q tests/test_lm_rewriters.py`).
# Lint, types and the tests each run even when one fails; the last line says which failed. The whole suite takes
# ~16 min on an idle 2-core machine; a representative subset (every third-party package's tests: about 300 tests,
# 3-30 min with the machine's load) is
#   tests/test_install_pins.py tests/test_lm_rewriters.py tests/test_lm_cli.py tests/test_generation_eval_lm.py
#   tests/test_lm_decoding.py tests/test_generation_model.py tests/test_serve.py tests/test_serve_browser.py
#   tests/test_engines.py tests/test_security_dask.py tests/test_topics_core.py tests/test_accountant.py
#   tests/test_accounting_bounds.py tests/test_embeddings.py tests/test_mechanisms_laws.py tests/test_cli.py
#   tests/test_model_folders.py tests/test_doc_examples.py
# Each mode uses its own venv under ${TEXTDP_CHECK_DIR:-/tmp/textdp-version-check} and leaves the project's alone.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
shift || true
root=${TEXTDP_CHECK_DIR:-/tmp/textdp-version-check}
ALL_EXTRAS='test,dev,generation,minilm,fasttext,topics-fast,eval,serve,gpu,dask,faiss,ot,plot'

fresh_venv() {
    rm -rf "$root/$1" && mkdir -p "$root" && python3 -m venv "$root/$1"
    # shellcheck disable=SC1091
    . "$root/$1/bin/activate"
    python -m pip install --quiet --upgrade pip
}

# lint, types and the tests, each run even when an earlier one fails (a new mypy error must not hide a test that
# breaks); prints one summary line and fails if any did
checks() {
    local failed=()
    ruff check || failed+=(ruff)
    mypy || failed+=(mypy)
    python -m pytest "$@" || failed+=(pytest)
    echo "== $mode: ${failed[*]:-nothing} failed =="
    [ ${#failed[@]} -eq 0 ]
}

case "$mode" in
latest)
    fresh_venv latest
    pip install --quiet "torch==2.13.0+cpu"
    # torch stays the CPU build (a newer torch from PyPI is the multi-GB CUDA build); everything else floats
    echo "torch==2.13.0+cpu" > "$root/torch-cpu.txt"
    pip install --quiet --upgrade --upgrade-strategy eager -c "$root/torch-cpu.txt" -e ".[$ALL_EXTRAS]"
    echo "== versions that differ from constraints.txt (tested -> latest) =="
    python tools/pin_diff.py constraints.txt || true
    checks "$@"
    ;;
oldest)
    fresh_venv oldest
    python tools/pin_diff.py --floors pyproject.toml > "$root/floors.txt"
    echo "== floors ==" && cat "$root/floors.txt"
    pip install --quiet "torch==2.13.0+cpu"
    pip install --quiet -c "$root/floors.txt" -e ".[test,dev]"
    checks "$@"
    ;;
--update)
    fresh_venv update
    pip install --quiet "torch==2.13.0+cpu"
    pip install --quiet -e ".[$ALL_EXTRAS]"
    { sed -n '/^#/p' constraints.txt; pip freeze --exclude-editable | grep -v '^#'; } > constraints.txt.new
    mv constraints.txt.new constraints.txt
    git diff --stat constraints.txt || true
    echo "constraints.txt regenerated: now run the README's test command with it before committing."
    ;;
*)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
