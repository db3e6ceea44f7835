#!/usr/bin/env bash
# Sourced by scripts/test.sh: prepares build/pyenv, a Python venv holding the
# reference implementations the cross-checks compare against (`gguf` for the GGUF
# format, `sentencepiece` and `tokenizers` for the tokenizers) and what the
# switchyard Python package builds and tests with, and exports SWITCHYARD_PYTHON.
# Safe to run twice (does nothing when the venv already imports them all). Without
# network access to PyPI the venv stays without them, a warning says so, and the
# cross-checks and the package's tests skip.
switchyard_pyenv="build/pyenv"
# The references, and what building and testing the switchyard package needs.
switchyard_pypackages=(gguf sentencepiece tokenizers numpy pytest hypothesis scikit-build-core nanobind)
if ! "$switchyard_pyenv/bin/python" -c 'import gguf, sentencepiece, tokenizers, numpy, pytest, hypothesis, scikit_build_core, nanobind' >/dev/null 2>&1; then
  echo "switchyard setup: preparing $switchyard_pyenv with ${switchyard_pypackages[*]}"
  if python3 -m venv "$switchyard_pyenv" >/dev/null &&
    "$switchyard_pyenv/bin/pip" install -q --disable-pip-version-check \
      "${switchyard_pypackages[@]}" >/dev/null 2>&1; then
    :
  else
    echo "warning: could not install ${switchyard_pypackages[*]}; the cross-checks that" \
      "need them will skip" >&2
  fi
fi
if [[ -x "$switchyard_pyenv/bin/python" ]]; then
  export SWITCHYARD_PYTHON="$PWD/$switchyard_pyenv/bin/python"
fi
