#!/usr/bin/env bash
# Quick start, second command: builds everything and runs every test.
#   1. the GoogleTest suite (dev preset: optimised, warnings as errors), the
#      tool's end-to-end scripts and the report page in headless Chromium;
#   2. the SIMD objects hold no code for instruction sets their callers do not
#      check (scripts/check_isa.sh);
#   3. the whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer
#      (asan preset), the fuzz targets' corpora and regressions included;
#   4. the concurrency tests again under ThreadSanitizer (tsan preset);
#   5. the Python package, installed into a venv and tested with pytest;
#   6. the tool's own checks on the built-in table (coverage, conformance).
set -euo pipefail
cd "$(dirname "$0")/.."
# Headless Chromium and its WebDriver client, for the report page's browser test.
bash scripts/setup.sh chromium chromium-driver python3-selenium
# A venv with the reference implementations (gguf, sentencepiece, tokenizers) for the
# cross-checks.
source scripts/python_env.sh

echo "== build and test (dev)"
cmake --preset dev >/dev/null
cmake --build --preset dev
ctest --preset dev

echo "== instruction sets of the SIMD objects"
bash scripts/check_isa.sh build/dev

echo "== the whole suite under AddressSanitizer + UndefinedBehaviorSanitizer (asan)"
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan

echo "== concurrency tests under ThreadSanitizer (tsan)"
cmake --preset tsan >/dev/null
cmake --build --preset tsan --target switchyard_tests
# Concurrency tests are named *Concurrent*; ThreadSanitizer fails them on any race.
TSAN_OPTIONS="halt_on_error=1" ./build/tsan/tests/switchyard_tests --gtest_filter='*Concurrent*'

echo "== the Python package: pip install into build/pyenv, then its pytest suite"
if "${SWITCHYARD_PYTHON:-false}" -c 'import scikit_build_core, nanobind, pytest, numpy' 2>/dev/null; then
  # The build tools come from the venv (no isolated download). CUDA is left out
  # here, where no GPU is: the dev build above compiles that backend already.
  "$SWITCHYARD_PYTHON" -m pip install -q --disable-pip-version-check --no-build-isolation \
    -C cmake.define.SWITCHYARD_CUDA=OFF .
  "$SWITCHYARD_PYTHON" -m pytest -q python/tests
else
  echo "warning: the venv lacks scikit-build-core, nanobind, pytest or numpy; the Python" \
    "package is not tested" >&2
fi

echo "== tool checks"
./build/dev/tools/switchyard/switchyard coverage >/dev/null
# The conformance harness: every kernel alternative against its float64 reference.
./build/dev/tools/switchyard/switchyard verify --ledger build/dev/switchyard-ledger.json
echo "all tests passed"
