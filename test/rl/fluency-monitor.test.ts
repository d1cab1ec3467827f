/** Fluency tracking in the trainer: per-agent metrics next to the reward, and the degradation warning. */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { setBackend } from '../../src/engine/runtime.js';
import { FLUENCY_WARNING, FluencyMonitor } from '../../src/rl/fluency-monitor.js';
import { MemorySink } from '../../src/rl/metrics.js';
import type { Task } from '../../src/rl/task.js';
import { MAGRPOTrainer } from '../../src/rl/trainer.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

describe('FluencyMonitor', () => {
  const W = FLUENCY_WARNING.window;
  it('warns once when word validity drops more than 10 points, with an example', () => {
    const m = new FluencyMonitor(2);
    for (let k = 0; k < W; k++) assert.equal(m.observe(0, { word_validity: 0.8, ref_nll: 3 }, 'fine words'), null);
    for (let k = 0; k < W / 2; k++) m.observe(0, { word_validity: 0.72, ref_nll: 3 }, 'still fine');
    assert.equal(m.observe(0, { word_validity: 0.72, ref_nll: 3 }, 'x'), null, 'an 8-point drop is tolerated');
    let warning: string | null = null;
    for (let k = 0; k < W && !warning; k++) warning = m.observe(0, { word_validity: 0.1, ref_nll: 3 }, 'EDESE SOSUSSTESESERE');
    assert.ok(warning?.includes('agent 0') && warning.includes('word validity fell') && warning.includes('EDESE SOSUSSTESESERE'), String(warning));
    for (let k = 0; k < W; k++) assert.equal(m.observe(0, { word_validity: 0 }, 'y'), null, 'once per agent');
    // agent 1 has its own baseline and its own warning
    for (let k = 0; k < W; k++) m.observe(1, { word_validity: 0.5, ref_nll: 2 }, 'a');
    let w1: string | null = null;
    for (let k = 0; k < W && !w1; k++) w1 = m.observe(1, { word_validity: 0.5, ref_nll: 3.2 }, 'b');
    assert.ok(w1?.includes('agent 1') && w1.includes('NLL under the starting model rose'), String(w1));
  });
  it('warns when clauses shrink to less than half their starting length (lists of fragments)', () => {
    const m = new FluencyMonitor(1);
    for (let k = 0; k < W; k++) m.observe(0, { word_validity: 0.9, clause_length: 6 }, 'a whole sentence of words');
    for (let k = 0; k < W; k++) assert.equal(m.observe(0, { word_validity: 0.9, clause_length: 3.5 }, 'a kind, a sort'), null, '3.5 of 6 is tolerated');
    let warning: string | null = null;
    for (let k = 0; k < W && !warning; k++) warning = m.observe(0, { word_validity: 0.9, clause_length: 2.5 }, 'the subject, a sort, the justice');
    assert.ok(warning?.includes('clauses shrank from 6.0') && warning.includes('the subject, a sort'), String(warning));
  });
  it('warns when grammar validity falls more than 10 points (real words in no English order)', () => {
    const m = new FluencyMonitor(1);
    for (let k = 0; k < W; k++) m.observe(0, { word_validity: 0.9, grammar_validity: 0.95 }, 'the whale rose beside the ship');
    for (let k = 0; k < W; k++) assert.equal(m.observe(0, { word_validity: 0.9, grammar_validity: 0.87 }, 'and the ship'), null, '8 points is tolerated');
    let warning: string | null = null;
    for (let k = 0; k < W && !warning; k++) warning = m.observe(0, { word_validity: 0.9, grammar_validity: 0.8 }, 'and, and be filled, and');
    assert.ok(warning?.includes('grammar validity fell from 95.0%') && warning.includes('and, and be filled'), String(warning));
  });
  it('does not warn about a ref NLL rise too small to matter (code starts near 0.05 nats/token)', () => {
    const m = new FluencyMonitor(1);
    for (let k = 0; k < W; k++) m.observe(0, { ref_nll: 0.04 }, 'def aux(n):');
    for (let k = 0; k < 2 * W; k++) assert.equal(m.observe(0, { ref_nll: 0.07 }, 'def aux(n):'), null);
    let warning: string | null = null;
    for (let k = 0; k < W && !warning; k++) warning = m.observe(0, { ref_nll: 0.5 }, 'def aux(n):');
    assert.ok(warning?.includes('NLL under the starting model rose from 0.04'), String(warning));
  });
  it('stays quiet while fluency holds', () => {
    const m = new FluencyMonitor(1);
    for (let k = 0; k < 5 * W; k++) assert.equal(m.observe(0, { word_validity: 0.7 + 0.05 * Math.sin(k), ref_nll: 3 + 0.3 * Math.cos(k) }, 'ok'), null);
  });
});

describe('trainer fluency metrics', () => {
  let dir = '';
  before(() => {
    setBackend('native');
    dir = makeTinyModel({ seed: 3 });
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('logs ref_nll per agent, and the prose metrics only for prose tasks', async () => {
    for (const outputKind of ['prose', 'code'] as const) {
      const sink = new MemorySink();
      const task: Task<{ prompt: string }> = { outputKind, dataset: [{ prompt: 'go' }, { prompt: 'go' }], reward: ({ completions }) => completions[0].length };
      const t = new MAGRPOTrainer({
        task,
        model: dir,
        sinks: [sink],
        config: { max_new_tokens: 3, num_train_epochs: 1, logging_steps: 1, eval_interval: 0, early_termination_threshold: null },
      });
      await t.train();
      await t.close();
      const first = sink.entries.find((e) => e.metrics['agent_0/ref_nll'] !== undefined);
      assert.ok(first, `${outputKind}: agent_0/ref_nll logged`);
      const m = first.metrics;
      assert.ok(Number.isFinite(m['agent_0/ref_nll']) && m['agent_0/ref_nll'] > 0);
      assert.ok(Number.isFinite(m['agent_1/ref_nll']));
      assert.equal('agent_0/word_validity' in m, outputKind === 'prose');
      assert.equal('agent_1/distinct_2' in m, outputKind === 'prose');
    }
  });

  it('fluency_metrics: false loads no reference and logs none', async () => {
    const sink = new MemorySink();
    const task: Task<{ prompt: string }> = { dataset: [{ prompt: 'go' }, { prompt: 'go' }], reward: () => 1 };
    const t = new MAGRPOTrainer({
      task,
      model: dir,
      sinks: [sink],
      config: { fluency_metrics: false, max_new_tokens: 2, num_train_epochs: 1, logging_steps: 1, eval_interval: 0 },
    });
    await t.train();
    await t.close();
    assert.ok(sink.entries.length > 0);
    assert.ok(sink.entries.every((e) => Object.keys(e.metrics).every((k) => !k.includes('ref_nll') && !k.includes('word_validity'))));
  });
});
