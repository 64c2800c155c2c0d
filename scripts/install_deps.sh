#!/usr/bin/env bash
# Installs the Debian 12 packages h3-engine builds against. Skips apt when everything is already there.
#   install_deps.sh           everything: the build, the tests, the benches, the browser test, the format check
#   install_deps.sh --build   what scripts/setup.sh needs: the engine, the server, the Python module, curl + jq
set -euo pipefail
BUILD_PKGS=(build-essential cmake ninja-build pkg-config git
      nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
      libmicrohttpd-dev zlib1g-dev libbrotli-dev libopenblas-dev libpcre2-dev
      libavformat-dev libavcodec-dev libswscale-dev libswresample-dev libavutil-dev
      libpng-dev libjpeg-dev libwebp-dev
      python3-dev python3-numpy pybind11-dev
      curl jq)
TEST_PKGS=(clang clang-format libgtest-dev libgmock-dev libbenchmark-dev libcpp-httplib-dev
      chromium chromium-driver)
case "${1:-}" in
  --build) PKGS=("${BUILD_PKGS[@]}") ;;
  "") PKGS=("${BUILD_PKGS[@]}" "${TEST_PKGS[@]}") ;;
  *) echo "usage: install_deps.sh [--build]" >&2; exit 2 ;;
esac
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
