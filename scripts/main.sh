#!/usr/bin/env bash
# The main job: set up on first run (SmolLM2-135M-Instruct pulled once), then the demo: two LoRA
# agents on SmolLM2 learn the writing task with MAGRPO and are compared with the untrained pair and
# the baselines (`npm start -- --env tldr` runs it on the shipped 1.7M-parameter base model).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-model
exec node --initial-old-space-size=128 dist/src/cli/main.js demo "$@" # the V8 flag: src/cli/node-flags.ts
