/** Config validation, mirroring the reference library's tests/test_config_constraints.py (OpenMLRL/CoMLRL). */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { ConfigError, MagrpoConfigSchema, resolveConfig } from '../../src/rl/config.js';
import { configProblems as problems } from '../helpers/config-problems.js';

const ROOT = resolve(import.meta.dirname, '..', '..');

function rejects(input: Record<string, unknown>, field: string) {
  assert.throws(
    () => resolveConfig(input),
    (e: unknown) => e instanceof ConfigError && e.issues.some((i) => i.path === field) && e.message.includes(field),
    `${JSON.stringify(input)} should be rejected naming ${field}`,
  );
}

describe('MAGRPO config', () => {
  it('defaults match the reference (with our documented differences)', () => {
    const c = resolveConfig({});
    assert.equal(c.num_train_epochs, 20);
    assert.equal(c.agent_learning_rate, 5e-6);
    assert.equal(c.num_generations, 4);
    assert.equal(c.max_new_tokens, 256);
    assert.equal(c.temperature, 0.6);
    assert.equal(c.top_p, 0.6);
    assert.equal(c.top_k, 50);
    assert.equal(c.discount, 1);
    assert.equal(c.joint_mode, 'aligned');
    assert.equal(c.early_termination_threshold, -0.2);
    assert.equal(c.eval_interval, 16);
    assert.equal(c.eval_num_samples, 4);
    assert.equal(c.rollout_buffer_size, 2);
    assert.equal(c.train_batch_size, null);
    assert.equal(c.advantage_normalization, true);
    assert.equal(c.advantage_mode, 'mean');
    assert.equal(c.reference_kl_enabled, false);
    assert.equal(c.reference_kl_coef, 0.1);
    assert.equal(c.num_turns, 1); // reference: 2 (see docs/differences.md)
  });

  it("joint_mode: the reference's spellings resolve to one value each", () => {
    for (const [given, resolved] of [
      ['aligned', 'aligned'],
      ['align', 'aligned'],
      ['cross', 'cross'],
      ['crossed', 'cross'],
    ])
      assert.equal(resolveConfig({ joint_mode: given }).joint_mode, resolved, given);
  });
  it('rejects 0 for every count that must be ≥ 1', () => {
    for (const k of ['num_train_epochs', 'num_agents', 'rollout_buffer_size', 'num_turns', 'logging_steps', 'train_batch_size']) rejects({ [k]: 0 }, k);
  });
  it('rejects −1 for eval_interval and eval_num_samples, and num_generations 1', () => {
    rejects({ eval_interval: -1 }, 'eval_interval');
    rejects({ eval_num_samples: -1 }, 'eval_num_samples');
    rejects({ num_generations: 1 }, 'num_generations');
  });
  it('parallel_training: "invalid" and "auto" rejected', () => {
    rejects({ parallel_training: 'invalid' }, 'parallel_training');
    rejects({ parallel_training: 'auto' }, 'parallel_training');
  });
  it('accepts the reference valid set', () => {
    for (const ok of [{}, { parallel_training: 'none' }, { parallel_training: 'null' }, { parallel_training: 'mp' }, { num_generations: 2 }]) {
      assert.doesNotThrow(() => resolveConfig(ok), JSON.stringify(ok));
    }
  });
  it('KL: negative coef rejected; agent_learning_rate and reference_kl_coef lists must have 1 or N entries', () => {
    rejects({ reference_kl_coef: -0.1 }, 'reference_kl_coef');
    assert.throws(() => resolveConfig({ num_agents: 2, reference_kl_coef: [0.1, -0.1] }), /reference_kl_coef\.1/);
    assert.throws(
      () => resolveConfig({ num_agents: 2, agent_learning_rate: [1e-5, 1e-5, 1e-5] }),
      /agent_learning_rate length \(3\) must be 1 or num_agents \(2\)/,
    );
    assert.throws(() => resolveConfig({ num_agents: 3, reference_kl_coef: [0.1, 1] }), /reference_kl_coef length \(2\) must be 1 or num_agents \(3\)/);
    assert.deepEqual(resolveConfig({ num_agents: 2, reference_kl_coef: [0.3, 1] }).reference_kl_coef, [0.3, 1]);
  });
  it('removed reference keys: a setting is refused with the reason; the unset value of a resolved run config is dropped', () => {
    assert.deepEqual(problems({ eval_batch_size: 8, agent_devices: ['cpu', 'cpu'], reference_devices: 'cpu' }), [
      'eval_batch_size: eval_batch_size was never used: evaluation samples every eval episode of a turn in one batch per agent; remove it',
      "agent_devices: agent_devices was never used: agents run on this machine's CPU (parallel_training: mp gives each agent its own worker thread); remove it",
      'reference_devices: reference_devices was never used: the frozen reference model runs on the CPU with its agent; remove it',
    ]);
    const written = parse(readFileSync(join(ROOT, 'test/dashboard/fixtures/run-coordination/config.yaml'), 'utf8')).trainer;
    assert.deepEqual([written.eval_batch_size, written.agent_devices, written.reference_devices], [1, null, null]);
    const c = resolveConfig(written);
    assert.equal(c.num_generations, 4);
    assert.ok(!('eval_batch_size' in c) && !('agent_devices' in c) && !('reference_devices' in c));
  });
  it('bad enums, unknown keys with a suggestion, and all problems at once', () => {
    rejects({ advantage_mode: 'median' }, 'advantage_mode');
    assert.throws(() => resolveConfig({ advantage_mode: 'median' }), /expected one of "mean", "raw", "max", "rloo"/);
    assert.throws(() => resolveConfig({ num_generation: 4 }), /num_generation: unknown key — did you mean "num_generations"\?/);
    try {
      resolveConfig({ num_turns: 0, top_p: 2, bogus_key_xyz: 1 });
      assert.fail('should throw');
    } catch (e) {
      assert.ok(e instanceof ConfigError);
      assert.deepEqual(e.issues.map((i) => i.path).sort(), ['bogus_key_xyz', 'num_turns', 'top_p']);
    }
  });
  it('every key has a description (docs and --help are generated from them)', () => {
    for (const [k, v] of Object.entries(MagrpoConfigSchema.shape)) assert.ok((v as { description?: string }).description, `${k} has no description`);
  });
});
