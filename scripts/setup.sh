#!/usr/bin/env bash
# Installs the Debian 12 packages Switchyard builds with, when they are missing,
# and any further packages named as arguments (scripts/test.sh adds the browser
# that tests the report page). Safe to run any number of times; does nothing
# when everything is present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libfmt-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev
  python3 python3-venv python3-dev python3-matplotlib
  libjs-chart.js
  "$@"
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "switchyard setup: installing ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
