#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine: installs what is missing, configures, builds,
# then runs the demo or the tests.
#   tools/dev.sh demo          build the program (release) and drain a demo spike end to end
#   tools/dev.sh test          build (dev: debug under ASan+UBSan) and run every test, then a
#                              short run of each fuzzer
#   tools/dev.sh fuzz [SECS]   build the libFuzzer targets (clang) and run each SECS (default 300)
#   tools/dev.sh test-tsan     the suite's multi-threaded part under ThreadSanitizer
#   tools/dev.sh ci            test, then test-tsan (what .ci/run does)
#   tools/dev.sh bench         build (release), run the micro benchmarks and every e2e scenario
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build ccache pkg-config openssl ca-certificates
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev libssl-dev libsqlite3-dev
  libsqlitecpp-dev libpq-dev libc-ares-dev libjemalloc-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev wrk sqlite3
  gnuplot-nox fonts-dejavu-core clang clang-format libclang-rt-14-dev time python3 nginx-light)

# promtool and prometheus: tests/monitoring unit-tests the alert rules and scrapes a real drain.
packages+=(prometheus)
# systemd-analyze: the shipped unit files are verified as systemd would read them.
packages+=(systemd)
# lintian, dpkg-dev (dpkg-deb, dpkg-shlibdeps for cpack): tests/dist checks the Debian package.
packages+=(lintian dpkg-dev)
# tinyproxy: the egress proxy the drain's --proxy tests go through.
packages+=(tinyproxy)
# nginx's echo module: bench/origins.py slow_partners --receiver nginx, a delayed receiver the
# project did not write.
packages+=(libnginx-mod-http-echo)
# chromium: the drain's live page (/) is read in a real headless browser.
packages+=(chromium)
# A throwaway PostgreSQL server (initdb in a temp dir, run as the package's `postgres` user when
# the suite runs as root): the PostgreSQL queue's tests run against it, not a mock.
packages+=(postgresql-15)

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "installing: ${missing[*]}"
    local sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

build() {
  cmake --preset "$1" "${@:2}" >/dev/null
  cmake --build --preset "$1" -j "$(nproc)"
}

# The demo needs the one program (it runs `surge sink` itself), not the tests and benchmarks.
build_program() {
  cmake --preset "$1" >/dev/null
  cmake --build --preset "$1" -j "$(nproc)" --target surge
}

install_missing
case "${1:-}" in
  demo)
    build_program release
    ./build/release/tools/surge demo "${@:2}"
    ;;
  test)
    build dev
    ctest --preset dev -j "$(nproc)"
    build fuzz -DSURGE_FUZZ_SECONDS=10
    ctest --preset fuzz -j "$(nproc)"
    ;;
  fuzz)
    build fuzz -DSURGE_FUZZ_SECONDS="${2:-300}"
    ctest --preset fuzz -j "$(nproc)"
    ;;
  test-tsan)
    build tsan
    ctest --preset tsan -j "$(nproc)"
    ;;
  ci)
    ./tools/dev.sh test
    ./tools/dev.sh test-tsan
    ;;
  bench)
    build release
    ./build/release/bench/surge_bench_micro "${@:2}"
    python3 bench/e2e.py --surge build/release/tools/surge --out build/release/bench-out
    ;;
  *)
    echo "usage: tools/dev.sh demo|test|test-tsan|ci|fuzz [SECONDS]|bench" >&2
    exit 2
    ;;
esac
