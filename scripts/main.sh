#!/usr/bin/env bash
# The main job: set up on first run, then the demo (two agents from the shipped base model learn
# the writing task with MAGRPO and are compared with the untrained pair and the baselines).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-model
exec node --initial-old-space-size=128 dist/src/cli/main.js demo "$@" # the V8 flag: src/cli/node-flags.ts
