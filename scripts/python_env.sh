#!/usr/bin/env bash
# Sourced by scripts/test.sh: prepares build/pyenv, a Python venv holding the `gguf`
# package that the GGUF interoperability cross-checks compare against, and exports
# SWITCHYARD_PYTHON for them. Safe to run twice (does nothing when the venv already
# imports gguf). Without network access to PyPI the venv stays without the package,
# a warning says so, and those cross-checks skip.
switchyard_pyenv="build/pyenv"
if ! "$switchyard_pyenv/bin/python" -c 'import gguf' >/dev/null 2>&1; then
  echo "switchyard setup: preparing $switchyard_pyenv with the gguf Python package"
  if python3 -m venv "$switchyard_pyenv" >/dev/null &&
    "$switchyard_pyenv/bin/pip" install -q --disable-pip-version-check gguf >/dev/null 2>&1; then
    :
  else
    echo "warning: could not install the gguf Python package; the GGUF cross-checks will skip" >&2
  fi
fi
if [[ -x "$switchyard_pyenv/bin/python" ]]; then
  export SWITCHYARD_PYTHON="$PWD/$switchyard_pyenv/bin/python"
fi
