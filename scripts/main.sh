#!/usr/bin/env bash
# The main job: set up on first run, then sample text from the project's shipped model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
model=models/small
[ -d "$model" ] || model=test/fixtures/models/tiny-qwen2
exec node dist/src/cli/main.js sample --model "$model" --prompt "${MAGRPO_PROMPT:-The whale}" --max-new-tokens 48 --temperature 0.8 --seed 1 "$@"
