/**
 * Sampling A/B for agents that share a base model (bench/step/notes.md, runs 7-8): two LoRA agents
 * (r 16 on all seven projections) over SmolLM2-135M's shape with random weights, 4 rows each,
 * 64-token prompts, 32 new tokens; each repetition samples them one after the other (each over its
 * own merged packs) and then together (one batch of 8 rows, per-row adapters), and prints wall and
 * CPU seconds of both. Alternating in one process keeps the two ways under the same load.
 *
 *   npx tsx scripts/bench-team-decode.ts [fp32|bf16] [repetitions]
 */
import { loadavg } from 'node:os';
import { SMOLLM2_135M } from '../src/bench/step.js';
import { Rng } from '../src/engine/rng.js';
import { setPrecision } from '../src/engine/runtime.js';
import { parseModelConfig } from '../src/model/hf-config.js';
import { createModel } from '../src/model/load.js';
import { applyLora } from '../src/model/lora.js';
import { generate } from '../src/model/sample.js';

const precision = process.argv[2] === 'fp32' ? 'fp32' : 'bf16';
const reps = Number(process.argv[3] ?? 4);
const base = createModel(parseModelConfig(SMOLLM2_135M));
base.initialize(new Rng(1));
for (const p of base.params.values()) p.requiresGrad = false;
setPrecision(precision);
const targetModules = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];
const agents = [0, 1].map((i) => {
  const m = base.sharedBase();
  applyLora(m, { r: 16, alpha: 32, targetModules }, new Rng(5 + i));
  return m;
});
const prompt = (k: number) => Array.from({ length: 64 }, (_, i) => (((i + k) * 37) % 1000) + 5);
const rowsOf = [0, 0, 0, 0, 1, 1, 1, 1];
const opts = { maxNewTokens: 32, temperature: 1, stopTokenIds: [] as number[] };
const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
const timed = (fn: () => void) => {
  const [w, c] = [performance.now(), cpu()];
  fn();
  return { wall: (performance.now() - w) / 1000, cpu: cpu() - c };
};
for (let rep = 0; rep < reps; rep++) {
  const apart = timed(() => {
    for (const [i, m] of agents.entries())
      generate(
        m,
        [0, 1, 2, 3].map(() => prompt(i)),
        { ...opts, rng: 1 + i },
      );
  });
  const together = timed(() => {
    const rngs = [new Rng(1), new Rng(2)];
    generate(
      base,
      rowsOf.map((i) => prompt(i)),
      { ...opts, rowRngs: rowsOf.map((i) => rngs[i]), rowAdapters: rowsOf.map((i) => agents[i].lora) },
    );
  });
  const f = (x: number) => x.toFixed(2);
  console.log(
    `${precision} rep ${rep + 1}: apart ${f(apart.wall)} s (CPU ${f(apart.cpu)}), together ${f(together.wall)} s (CPU ${f(together.cpu)}); ` +
      `CPU ratio ${f(apart.cpu / together.cpu)}, wall ratio ${f(apart.wall / together.wall)}; load ${loadavg()[0].toFixed(1)}`,
  );
}
