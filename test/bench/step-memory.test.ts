/**
 * The memory budget of a real-model MAGRPO step: SmolLM2-135M's shape (random weights), 2 agents
 * with LoRA r 16 on all seven projections, G = 4 × 64 new tokens, prompts of 400 tokens, one
 * update over two items: the process's peak RSS stays within STEP_BUDGET_MB. What keeps it there:
 * one copy of the frozen base for both agents and their references, one set of decode packs, the
 * prompt computed once per group in the update, LoRA projections without full-width temporaries.
 * Runs in a child process so the peak is the step's alone. Memory, not speed: the assertion does
 * not depend on how fast the machine is.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { it } from 'node:test';

const ROOT = join(import.meta.dirname, '..', '..');
const TSX = import.meta.resolve('tsx');
/** The step-speed issue's target for these settings (its measured peak was 10.4 GB before the work above). */
const STEP_BUDGET_MB = 3072;

const CHILD = `
import { measureStep, stepSettings } from ${JSON.stringify(join(ROOT, 'src', 'bench', 'step.ts'))};
const r = await measureStep({ ...stepSettings({ threads: 2, warmup: 0, items: 2 }) });
console.log(JSON.stringify({ peak: r.peak_rss_mb, items: r.settings.items, agents: r.settings.agents }));
`;

it(`a 135M-shaped step with 2 LoRA agents peaks under ${STEP_BUDGET_MB} MB`, { timeout: 900_000 }, () => {
  const r = spawnSync(process.execPath, ['--import', TSX, '--input-type=module', '-e', CHILD], { cwd: ROOT, encoding: 'utf8', maxBuffer: 1 << 24 });
  assert.equal(r.status, 0, r.stderr.slice(-2000));
  const line = r.stdout.trim().split('\n').at(-1) ?? '';
  const { peak, items, agents } = JSON.parse(line) as { peak: number | null; items: number; agents: number };
  assert.deepEqual([items, agents], [2, 2]);
  assert.ok(peak !== null && peak > 500, `peak RSS ${peak} MB: the model alone is 540 MB, so this was not measured`);
  assert.ok(peak <= STEP_BUDGET_MB, `peak RSS ${Math.round(peak)} MB exceeds the budget of ${STEP_BUDGET_MB} MB`);
});
