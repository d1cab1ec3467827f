/** TRL GRPOConfig names: rewritten where the meaning is the same, refused with a reason otherwise; the doc table in step. */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { resolveConfig } from '../../src/rl/config.js';
import { TRL_ALIASES, TRL_WITHOUT_EQUIVALENT } from '../../src/rl/trl-names.js';
import { ConfigFileError, loadRunConfig } from '../../src/run/config-file.js';
import { configProblems as problems } from '../helpers/config-problems.js';

const ROOT = resolve(import.meta.dirname, '..', '..');

describe('TRL GRPOConfig names', () => {
  it('are rewritten to the magrpo keys of the same meaning', () => {
    const c = resolveConfig({
      learning_rate: 2e-5,
      max_completion_length: 48,
      num_iterations: 2,
      epsilon: 0.2,
      loss_type: 'grpo',
      lr_scheduler_type: 'constant_with_warmup',
      warmup_steps: 3,
      adam_beta2: 0.99,
      adam_epsilon: 1e-6,
      scale_rewards: 'none',
      num_generations: 4,
      per_device_train_batch_size: 8,
      gradient_accumulation_steps: 2,
    });
    assert.equal(c.agent_learning_rate, 2e-5);
    assert.equal(c.max_new_tokens, 48);
    assert.equal(c.ppo_epochs, 2);
    assert.equal(c.ppo_clip_eps, 0.2);
    assert.equal(c.loss_aggregation, 'token_mean');
    assert.equal(c.lr_scheduler, 'constant');
    assert.deepEqual(c.adam_betas, [0.9, 0.99]);
    assert.equal(c.adam_eps, 1e-6);
    assert.equal(c.advantage_normalization, false);
    assert.equal(c.rollout_buffer_size, 4, '8 × 2 completions per optimizer step / 4 per node sample');
    assert.equal(c.train_batch_size, null);
    assert.equal(resolveConfig({ loss_type: 'dr_grpo' }).loss_aggregation, 'constant_norm');
    assert.equal(resolveConfig({ scale_rewards: true }).advantage_normalization, true);
  });

  it('beta > 0 turns the KL loss term on, as in TRL; beta 0 turns it off; an explicit mode is kept', () => {
    const on = resolveConfig({ beta: 0.04 });
    assert.deepEqual([on.reference_kl_enabled, on.reference_kl_coef, on.reference_kl_mode], [true, 0.04, 'loss']);
    const off = resolveConfig({ beta: 0 });
    assert.equal(off.reference_kl_enabled, false);
    assert.equal(resolveConfig({ beta: 0.1, reference_kl_mode: 'reward_shaping' }).reference_kl_mode, 'reward_shaping');
  });

  it('a TRL name and the magrpo key it sets together are an error', () => {
    assert.deepEqual(problems({ learning_rate: 1e-4, agent_learning_rate: 1e-4 }), [
      "learning_rate: TRL's name for agent_learning_rate, and agent_learning_rate is given too: keep one of them",
    ]);
    assert.match(problems({ beta: 0.1, reference_kl_enabled: true })[0], /^beta: .*reference_kl_enabled is given too/);
    assert.match(problems({ per_device_train_batch_size: 8, rollout_buffer_size: 2 })[0], /rollout_buffer_size is given too/);
  });

  it('bad values are reported under the name written; values without an equivalent say so', () => {
    assert.deepEqual(problems({ learning_rate: -1 }), ['learning_rate: (as agent_learning_rate) Too small: expected number to be >0']);
    assert.match(problems({ loss_type: 'bnpo' })[0], /^loss_type: got "bnpo": magrpo accepts "grpo", "dr_grpo" \(bnpo, dapo/);
    assert.match(problems({ per_device_train_batch_size: 6 })[0], /\(6\) must be a multiple of num_generations \(4\)/);
    assert.match(problems({ gradient_accumulation_steps: 4 })[0], /needs per_device_train_batch_size/);
    assert.match(problems({ lr_scheduler_type: 'polynomial' })[0], /^lr_scheduler_type: got "polynomial"/);
  });

  it('unknown keys: TRL keys without an equivalent say so, others name the closest key', () => {
    assert.deepEqual(problems({ use_vllm: true }), [
      'use_vllm: TRL\'s GRPOConfig key "use_vllm" has no magrpo equivalent: generation runs in-process on the CPU engine (no vLLM) (docs/trl-names.md)',
    ]);
    assert.match(problems({ vllm_gpu_memory_utilization: 0.3 })[0], /has no magrpo equivalent/);
    assert.match(problems({ max_prompt_length: 512 })[0], /env\.max_prompt_tokens/);
    assert.deepEqual(problems({ lerning_rate: 1 }), ['lerning_rate: unknown key — did you mean "learning_rate"?']);
    assert.deepEqual(problems({ num_generation: 4 }), ['num_generation: unknown key — did you mean "num_generations"?']);
    assert.match(problems({ zzzzzzzzzzzz: 1 })[0], /^zzzzzzzzzzzz: unknown key \(the closest trainer key is "[a-z_]+"\)/);
  });

  it('in a run config file: rewritten, positioned errors, TRL keys at the top level pointed to trainer:', () => {
    const dir = mkdtempSync(join(tmpdir(), 'magrpo-trl-'));
    const file = join(dir, 'run.yaml');
    writeFileSync(file, 'env:\n  name: tldr\nmodel: m\ntrainer:\n  learning_rate: 3.0e-5\n  beta: 0.02\n  max_completion_length: 64\n');
    const { config } = loadRunConfig(file, ['trainer.num_iterations=1']);
    assert.equal(config.trainer.agent_learning_rate, 3e-5);
    assert.equal(config.trainer.max_new_tokens, 64);
    assert.equal(config.trainer.reference_kl_enabled, true);
    assert.ok(!('learning_rate' in config.trainer), 'the resolved config has magrpo keys only');

    writeFileSync(file, 'env:\n  name: tldr\nmodel: m\nlearning_rate: 1\ntrainer:\n  learning_rate: -2\n  use_vllm: true\n');
    try {
      loadRunConfig(file);
      assert.fail('expected a ConfigFileError');
    } catch (e) {
      assert.ok(e instanceof ConfigFileError, String(e));
      const lines = e.message.split('\n').map((l) => l.trim().replace(`${file}:`, ''));
      assert.deepEqual(lines.slice(1), [
        '4:1  learning_rate: a trainer setting: put it under "trainer:"',
        '6:3  trainer.learning_rate: (as agent_learning_rate) got -2, too small: expected number to be >0',
        '7:3  trainer.use_vllm: TRL\'s GRPOConfig key "use_vllm" has no magrpo equivalent: generation runs in-process on the CPU engine (no vLLM) (docs/trl-names.md)',
      ]);
    }
  });

  it('docs/trl-names.md lists every accepted name and every name without an equivalent', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'trl-names.md'), 'utf8');
    for (const name of [...Object.keys(TRL_ALIASES), ...Object.keys(TRL_WITHOUT_EQUIVALENT)])
      assert.ok(doc.includes(`\`${name}\``), `docs/trl-names.md misses ${name}`);
    for (const alias of Object.values(TRL_ALIASES)) for (const key of alias.sets) assert.ok(doc.includes(`\`${key}\``), `docs/trl-names.md misses ${key}`);
  });
});
