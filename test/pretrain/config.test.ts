import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { z } from 'zod';
import { loadPretrainConfig, PretrainConfigError, PretrainConfigSchema, parsePretrainConfig } from '../../src/pretrain/config.js';

const VALID = {
  run_dir: 'runs/x',
  model: { hidden_size: 16, intermediate_size: 48, num_layers: 1, num_heads: 2, context_length: 32 },
  train: { max_steps: 10, micro_batch_size: 2, learning_rate: 0.01 },
  eval: { every_steps: 5 },
  checkpoint: { every_steps: 5 },
  export: { dir: 'models/x' },
};

function errorOf(raw: unknown): PretrainConfigError {
  try {
    parsePretrainConfig(raw, 'cfg.yaml');
  } catch (err) {
    assert.ok(err instanceof PretrainConfigError);
    return err;
  }
  assert.fail('expected a PretrainConfigError');
}

test('a minimal config gets its documented defaults', () => {
  const c = parsePretrainConfig(VALID);
  assert.equal(c.data.tokenizer, 'data/tokenizer');
  assert.equal(c.train.weight_decay, 0.1);
  assert.deepEqual([c.train.beta1, c.train.beta2], [0.9, 0.95]);
  assert.equal(c.train.grad_clip, 1);
  assert.equal(c.train.min_lr_ratio, 0.1);
  assert.equal(c.export.dtype, 'F16');
  assert.equal(c.model.num_kv_heads, null);
});

test('a misspelled key is reported at its own path', () => {
  const err = errorOf({ ...VALID, train: { ...VALID.train, learing_rate: 1 } });
  assert.equal(err.code, 'BAD_CONFIG');
  assert.equal(err.file, 'cfg.yaml');
  assert.equal(err.message, 'cfg.yaml: invalid pretraining config\n  train.learing_rate: unknown key');
});

test('every problem is listed at once, each by key path', () => {
  const err = errorOf({ ...VALID, model: { ...VALID.model, hidden_size: 18, num_heads: 4 }, export: { dir: 'm', dtype: 'F8' }, eval: {} });
  assert.deepEqual(
    err.issues.map((i) => i.path),
    ['eval.every_steps', 'export.dtype'],
  );
  assert.match(err.message, /export\.dtype: Invalid option: expected one of "F32"\|"F16"\|"BF16"/);
});

test('cross-field invariants name the key to fix', () => {
  const heads = errorOf({ ...VALID, model: { ...VALID.model, num_heads: 3 } });
  assert.deepEqual(heads.issues, [{ path: 'model.num_heads', message: 'must divide hidden_size (16)' }]);
  const warm = errorOf({ ...VALID, train: { ...VALID.train, warmup_steps: 10 } });
  assert.deepEqual(warm.issues, [{ path: 'train.warmup_steps', message: 'must be below max_steps (10)' }]);
});

test('YAML file with --set overrides; a bad --set names the flag', () => {
  const dir = mkdtempSync(join(tmpdir(), 'magrpo-cfg-'));
  const file = join(dir, 'c.yaml');
  writeFileSync(file, JSON.stringify(VALID)); // JSON is YAML
  const c = loadPretrainConfig(file, ['train.max_steps=7', 'export.dtype=BF16', 'data.max_train_docs=3']);
  assert.equal(c.train.max_steps, 7);
  assert.equal(c.export.dtype, 'BF16');
  assert.equal(c.data.max_train_docs, 3);
  assert.throws(
    () => loadPretrainConfig(file, ['train.max_steps']),
    (e: unknown) => e instanceof PretrainConfigError && /\(--set\)/.test(e.message),
  );
  assert.throws(
    () => loadPretrainConfig(file, ['train.max_steps=lots']),
    (e: unknown) => e instanceof PretrainConfigError && e.issues[0].path === 'train.max_steps',
  );
});

test('every key of the schema has a description', () => {
  type Node = { description?: string; properties?: Record<string, Node> };
  const missing: string[] = [];
  const walk = (node: Node, prefix: string) => {
    for (const [k, v] of Object.entries(node.properties ?? {})) {
      if (!v.description) missing.push(prefix + k);
      walk(v, `${prefix}${k}.`);
    }
  };
  const schema = z.toJSONSchema(PretrainConfigSchema, { io: 'input' }) as Node;
  walk(schema, '');
  assert.ok(Object.keys(schema.properties ?? {}).length >= 9);
  assert.deepEqual(missing, []);
});
