#!/usr/bin/env bash
# One entry point for a fresh machine. Both commands create .venv and install what they need.
#   bash scripts/dev.sh demo   generate a sample dataset, build a store on local Ray, print it
#   bash scripts/dev.sh test   install the dev extras, run the linters, then the test suite on
#                              NOSTALL_TEST_WORKERS xdist workers (default 2; 0: in one process)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv
PY=${PYTHON:-python3}

install() {
  if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
  fi
  local stamp="$VENV/.nostall-installed"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    "$VENV/bin/python" -m pip install -q --upgrade pip
    # The pinned torch first: a CPU build here, a CUDA build on a GPU machine.
    "$VENV/bin/python" -m pip install -q "torch==2.13.0"
    "$VENV/bin/python" -m pip install -q -e ".[dali,dev,jpeg,tf,jax]"
    touch "$stamp"
  fi
}

# The page tests drive Debian's Chromium and chromedriver (tests/browser.py); without them they
# fail, naming this install.
install_browser() {
  if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    return
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "no apt-get: install chromium and chromedriver as /usr/bin/chromium, /usr/bin/chromedriver" >&2
    return
  fi
  local as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    as_root=(sudo -n)
  fi
  "${as_root[@]}" apt-get update -qq &&
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver ||
    echo "could not install chromium chromium-driver with apt-get" >&2
}

# The Azure Blob tests run against Azurite (tests/azurite.py), a Node package kept in .azurite/;
# without Node and npm they fail, naming this install.
install_azurite() {
  if [ -x .azurite/node_modules/.bin/azurite-blob ]; then
    return
  fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "no npm: install Node.js 18+ so that the Azure Blob tests can install Azurite" >&2
    return
  fi
  npm install --prefix .azurite --no-audit --no-fund --silent azurite@3 ||
    echo "could not install azurite with npm" >&2
}

case "${1:-}" in
  demo)
    install
    shift
    exec "$VENV/bin/precompute" demo "$@"
    ;;
  test)
    install
    install_browser
    install_azurite
    shift
    # Lint first: a formatting, lint or type error fails CI like a failing test.
    "$VENV/bin/ruff" format --check .
    "$VENV/bin/ruff" check .
    "$VENV/bin/mypy"
    set +e
    # Bytecode kept between runs (pytest's rewritten test modules too: 3.4 s of CPU less per
    # worker's collection from the second run on), whatever the shell says. Where Python keeps
    # it by default: the packages' own, which pip compiled at install, are used from the first
    # run on (a cache prefix would compile every imported module again in each fresh clone).
    unset PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX
    # Two workers on a 2-core machine: each worker costs its own collection (about 14 s of CPU),
    # session Ray and object servers; with three the suite took 545 s of CPU and 370 s, with two
    # 444 s and 333 s. loadscope keeps each test module on one worker, so a module-scoped
    # fixture is made once (tests/xdistscope.py).
    "$VENV/bin/python" -m pytest -n "${NOSTALL_TEST_WORKERS:-2}" --dist loadscope "$@"
    rc=$?
    if [ "$rc" -eq 5 ]; then
      echo "pytest collected no tests: failing on purpose" >&2
      exit 1
    fi
    exit "$rc"
    ;;
  *)
    echo "usage: bash scripts/dev.sh demo|test [args...]" >&2
    exit 2
    ;;
esac
