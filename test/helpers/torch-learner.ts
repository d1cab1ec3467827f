/**
 * For tests that run the PyTorch learner (learner/): the interpreter, why it cannot run here (for
 * test/helpers/skip.ts, skip id `learner`), and the weights and AdamW moments of a saved
 * `torch_learner.pt` read back through that interpreter, by magrpo's parameter names.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Rng } from '../../src/engine/rng.js';
import type { LearnerConfig } from '../../src/rl/torch-learner.js';

export const LEARNER_PYTHON =
  process.env.MAGRPO_LEARNER_PYTHON ?? (existsSync('.cache/venv-learner/bin/python') ? '.cache/venv-learner/bin/python' : 'python3');

/** The learner the parity tests start: 2 processes on the CPU in float64, `parallel` DDP or FSDP, generous timeouts. */
export function float64LearnerConfig(parallel: 'ddp' | 'fsdp', python = LEARNER_PYTHON): LearnerConfig {
  return {
    backend: 'torch',
    url: null,
    python,
    command: null,
    nproc: 2,
    device: 'cpu',
    parallel,
    dtype: 'float64',
    exchange_dir: null,
    timeout_s: 900,
    startup_timeout_s: 900,
    max_message_mb: 64,
  };
}

/** The three toy groups of the learner parity minibatches: prompts of 4, 6 and 3 tokens (the first 0), three completions each (one empty), ids from a fixed stream. */
export function toyGroups(): { promptIds: number[]; completions: number[][] }[] {
  const rng = new Rng(3);
  const tok = () => 3 + Math.floor(rng.next() * 4000);
  const shapes = [
    { prompt: 4, lens: [3, 5, 1] },
    { prompt: 6, lens: [2, 0, 4] },
    { prompt: 3, lens: [6, 2, 3] },
  ];
  return shapes.map(({ prompt, lens }) => {
    const promptIds = [0, ...Array.from({ length: prompt - 1 }, tok)];
    return { promptIds, completions: lens.map((n) => Array.from({ length: n }, tok)) };
  });
}

/** Why the learner cannot run here (null: it can), as a SKIPPED reason. */
export function learnerProblem(): string | null {
  const r = spawnSync(LEARNER_PYTHON, ['-c', 'import torch, transformers, peft, safetensors'], { encoding: 'utf8', timeout: 600_000 });
  if (r.error) return `SKIPPED: ${LEARNER_PYTHON} cannot be run (${r.error.message}); install the learner with bash scripts/setup.sh --with-learner`;
  if (r.status !== 0) {
    const why = r.stderr.trim().split('\n').pop();
    return `SKIPPED: ${LEARNER_PYTHON} cannot import torch, transformers and peft (${why}); install them with bash scripts/setup.sh --with-learner`;
  }
  return null;
}

const DUMP = `
import json, sys, torch
st = torch.load(sys.argv[1], map_location="cpu")
opt = st["optimizer"]["state"]
out = {"steps": st["steps"], "params": {}}
for i, (n, w) in enumerate(st["weights"].items()):
    s = opt.get(i, {})
    flat = lambda t: t.double().flatten().tolist()
    out["params"][n] = {"w": flat(w), "m": flat(s["exp_avg"]) if "exp_avg" in s else None, "v": flat(s["exp_avg_sq"]) if "exp_avg_sq" in s else None}
print(json.dumps(out))
`;

/** magrpo's name of a learner parameter: PEFT's `base_model.model.` prefix and adapter name dropped. */
const magrpoName = (n: string) => n.replace(/^base_model\.model\./, '').replace('.default.', '.');

/**
 * The trainable weights (float64, as the learner holds them) and AdamW moments in `dir`/torch_learner.pt,
 * keyed by magrpo's parameter names, and the learner's step count.
 */
export function readTorchLearnerState(dir: string): {
  steps: number;
  params: Map<string, { data: number[] }>;
  buffers: Record<string, { m: number[]; v: number[] }>;
} {
  const r = spawnSync(LEARNER_PYTHON, ['-c', DUMP, join(dir, 'torch_learner.pt')], { encoding: 'utf8', timeout: 120_000, maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`reading ${dir}/torch_learner.pt: ${r.stderr || r.error?.message}`);
  const out = JSON.parse(r.stdout) as { steps: number; params: Record<string, { w: number[]; m: number[] | null; v: number[] | null }> };
  const params = new Map<string, { data: number[] }>();
  const buffers: Record<string, { m: number[]; v: number[] }> = {};
  for (const [n, p] of Object.entries(out.params)) {
    const name = magrpoName(n);
    params.set(name, { data: p.w });
    buffers[name] = { m: p.m ?? p.w.map(() => 0), v: p.v ?? p.w.map(() => 0) };
  }
  return { steps: out.steps, params, buffers };
}
