#!/usr/bin/env bash
# The whole test suite: setup, lint, type-check, layering rule, then every test file.
set -euo pipefail
cd "$(dirname "$0")/.."
# On CI also the PyTorch learner (~4 GB from PyPI, ~10 min on a fresh machine), so its parity
# tests run there; locally they run when `bash scripts/setup.sh --with-learner` was done, and say
# SKIPPED otherwise.
# llama.cpp compiles (CPU) while the learner downloads (network): in parallel.
if [ -n "${CI:-}" ] && [ -z "${MAGRPO_CI_NO_LEARNER:-}" ]; then
  bash scripts/setup.sh --with-browser
  MAGRPO_QUIET=1 bash scripts/setup.sh --with-llama &
  llama_setup=$!
  bash scripts/setup.sh --with-learner
  wait "$llama_setup" || true
else
  bash scripts/setup.sh --with-browser
fi
echo "== lint (biome)"
npx biome check --diagnostic-level=error .
echo "== typecheck (tsc --noEmit)"
npx tsc --noEmit -p tsconfig.json
echo "== layering and size budgets"
node scripts/check-layers.mjs
echo "== tests"
# Two test files at a time: the machine has two cores and several tests are compute-bound.
# shellcheck disable=SC2046
exec npx tsx --test --test-concurrency=2 $(find test -name '*.test.ts' | sort)
