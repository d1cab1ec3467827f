/**
 * `magrpo bench --step` (bench-step.ts) on a tiny random model: the trainer's own step runs, every
 * phase of a step shows up with its kernel time, the rows add up to the step, and the table names
 * the settings.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatStep, measureStep, SMOLLM2_135M, STEP_PHASES, stepSettings } from '../../src/bench/step.js';

const TINY = {
  model_type: 'llama',
  vocab_size: 64,
  hidden_size: 32,
  intermediate_size: 64,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  max_position_embeddings: 128,
  tie_word_embeddings: true,
};

describe('bench --step', () => {
  it("defaults are the issue's step on SmolLM2-135M's shape", () => {
    const s = stepSettings({ threads: 2 });
    assert.deepEqual(
      [s.model, s.agents, s.group, s.newTokens, s.promptTokens, s.loraRank, s.bufferSize, s.warmupItems, s.items],
      [null, 2, 4, 64, 400, 16, 2, 2, 2],
    );
    assert.equal(s.shape, SMOLLM2_135M);
    assert.equal(s.precision, 'fp32');
    assert.equal(stepSettings({ threads: 2, precision: 'bf16' }).precision, 'bf16');
    assert.deepEqual(
      [SMOLLM2_135M.num_hidden_layers, SMOLLM2_135M.hidden_size, SMOLLM2_135M.num_attention_heads, SMOLLM2_135M.num_key_value_heads, SMOLLM2_135M.vocab_size],
      [30, 576, 9, 3, 49152],
    );
  });

  it('profiles warm-up and timed items of a tiny random model: every phase, kernel time, rows adding up', { timeout: 120_000 }, async () => {
    const settings = { ...stepSettings({ threads: 1, warmup: 2, items: 2 }), shape: TINY, newTokens: 4, promptTokens: 12, group: 2, loraRank: 2 };
    const r = await measureStep(settings);
    const phases = r.rows.map((x) => x.phase);
    assert.deepEqual(phases, [...STEP_PHASES.filter((p) => p !== 'score/rescore'), 'other', 'step']);
    const byName = Object.fromEntries(r.rows.map((x) => [x.phase, x]));
    // One prefill (the G copies of a prompt share it) and one decode loop for both items of the
    // buffer and both agents (they share their base model: one batch); one update of each agent
    // after the second item.
    assert.equal(byName['sample/prefill'].calls, 1);
    assert.equal(byName['sample/decode'].calls, 1);
    assert.equal(byName['update/optimizer'].calls, 2);
    for (const x of r.rows.filter((y) => y.phase !== 'other')) {
      assert.ok(x.s > 0 && x.kernel_s > 0 && x.kernel_s <= x.s + 1e-9, `${x.phase}: ${x.kernel_s} s of ${x.s} s in kernels`);
      assert.ok(Math.abs(x.s - x.kernel_s - x.outside_s) < 1e-9);
    }
    const parts = r.rows.filter((x) => x.phase !== 'step').reduce((a, x) => a + x.s, 0);
    assert.ok(Math.abs(parts - r.step_s) < 1e-9, `${parts} against ${r.step_s}`);
    assert.equal(r.item_s.length, 2);
    assert.equal(r.item_cpu_s?.length, 2);
    assert.ok((r.item_cpu_s ?? []).every((x) => x > 0));
    assert.equal(r.tokens.prompt, 12);
    assert.ok(r.tokens.completion > 0 && r.tokens.completion <= 2 * 2 * 4);
    assert.ok(r.settings.params > 4000 && r.settings.shared_prefill && r.settings.team_decode && r.settings.item_window);
    if (process.platform === 'linux') assert.ok((r.peak_rss_mb ?? 0) > 10);
    const text = formatStep(r);
    assert.match(text, /2 agents, LoRA r 2 on all seven projections/);
    assert.match(text, /G 2 × 4 new tokens per agent, prompts of 12 tokens, rollout_buffer_size 2/);
    assert.match(text, /^\| sample\/decode \| 1 \| /m);
    assert.match(text, /agents decode together; a buffer's items sampled together/);
    assert.match(text, /peak RSS \d+ MB/);
  });
});
