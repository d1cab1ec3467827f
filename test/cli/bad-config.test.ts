/**
 * Hostile or broken run configs: wrong types, absurd sizes that would allocate without bound, YAML
 * anchor ("billion laughs") bombs, huge, binary or missing files. Each gives one ConfigFileError
 * naming the file and the key, quickly and without allocating the absurd size.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, it } from 'node:test';
import { ConfigFileError, loadRunConfig, MAX_CONFIG_BYTES } from '../../src/run/config-file.js';

const root = mkdtempSync(join(tmpdir(), 'magrpo-bad-config-'));
after(() => rmSync(root, { recursive: true, force: true }));
const MODEL = resolve(import.meta.dirname, '..', 'fixtures', 'models', 'tiny-llama');
const head = `env:\n  name: coop-python\nmodel: ${MODEL}\n`;

/** "billion laughs": 9 levels of 9 aliases each, 9^9 strings once expanded. */
function aliasBomb(): string {
  const lines = [`${head}trainer:\n  stop_strings: &a ["x","x","x","x","x","x","x","x","x"]`];
  let prev = 'a';
  for (const name of ['b', 'c', 'd', 'e', 'f', 'g', 'h', 'i']) {
    lines.push(`x_${name}: &${name} [${Array(9).fill(`*${prev}`).join(', ')}]`);
    prev = name;
  }
  return lines.join('\n');
}

type Case = [name: string, content: string | Buffer, fragment: RegExp];
const CASES: Case[] = [
  ['num_generations 1e9', `${head}trainer:\n  num_generations: 1e9\n`, /trainer\.num_generations: got 1000000000, too big/],
  ['num_agents 1e6', `${head}trainer:\n  num_agents: 1000000\n`, /trainer\.num_agents: got 1000000/],
  ['max_new_tokens 2^40', `${head}trainer:\n  max_new_tokens: 1099511627776\n`, /trainer\.max_new_tokens/],
  ['rollout_buffer_size 1e12', `${head}trainer:\n  rollout_buffer_size: 1e12\n`, /trainer\.rollout_buffer_size/],
  ['eval.samples_per_item 1e9', `${head}eval:\n  samples_per_item: 1000000000\n`, /eval\.samples_per_item/],
  ['eval.max_new_tokens 2^40', `${head}eval:\n  max_new_tokens: 1099511627776\n`, /eval\.max_new_tokens/],
  ['samples.max_chars 1e12', `${head}samples:\n  max_chars: 1000000000000\n`, /samples\.max_chars/],
  ['lora rank 1e9', `${head}trainer:\n  lora: {r: 1000000000, alpha: 1, target_modules: [q_proj]}\n`, /trainer\.lora\.r/],
  [
    'cross-mode tree explosion',
    `${head}trainer:\n  num_generations: 64\n  joint_mode: cross\n  num_turns: 3\n`,
    /trainer\.num_generations: each item's rollout tree would have/,
  ],
  ['num_turns 64 with G 4', `${head}trainer:\n  num_turns: 64\n`, /rollout tree would have G\^1 \+ … \+ G\^T/],
  [
    'wrong types',
    `${head}trainer:\n  num_generations: "four"\n  temperature: [1]\n  joint_mode: 7\n`,
    /num_generations: got "four"[\s\S]*temperature[\s\S]*joint_mode/,
  ],
  ['negative and fractional', `${head}trainer:\n  seed: -1\n  num_train_epochs: 1.5\n`, /seed: got -1[\s\S]*num_train_epochs: got 1.5/],
  ['NaN and infinity', `${head}trainer:\n  temperature: .nan\n  agent_learning_rate: .inf\n`, /temperature[\s\S]*agent_learning_rate/],
  ['YAML anchor bomb', aliasBomb(), /too many alias expansions \(YAML anchor bomb\?\)/],
  ['recursive alias', `${head}trainer:\n  stop_strings: &a [x, *a]\n`, /trainer\.stop_strings(\.\d+)?: refers to itself through a YAML alias/],
  ['deeply nested flow', `${head}x: ${'['.repeat(5000)}${']'.repeat(5000)}\n`, /\(yaml\)|Maximum call stack|x: unknown key/],
  ['2 MiB file', `${head}# ${'x'.repeat(2 * MAX_CONFIG_BYTES)}\n`, /is at most 1048576/],
  ['invalid UTF-8', Buffer.concat([Buffer.from(head), Buffer.from([0xff, 0xfe, 0x0a])]), /not valid UTF-8/],
  ['binary garbage', Buffer.from(Array.from({ length: 512 }, (_, i) => (i * 37) % 256)), /.+/],
  ['duplicate keys', `${head}trainer:\n  seed: 1\n  seed: 2\n`, /unique|duplicate/i],
  ['not a mapping', '- a\n- b\n', /expected a mapping of keys/],
];

describe('bad run configs: one ConfigFileError each', () => {
  for (const [name, content, fragment] of CASES) {
    it(name, () => {
      const file = join(root, `${name.replace(/\W+/g, '-')}.yaml`);
      writeFileSync(file, content);
      const t0 = performance.now();
      assert.throws(
        () => loadRunConfig(file),
        (e: unknown) => {
          assert.ok(e instanceof ConfigFileError, `expected ConfigFileError, got ${(e as Error)?.name}: ${(e as Error)?.message}`);
          assert.ok(e.message.startsWith(`${file}: `), e.message.slice(0, 200));
          assert.match(e.message, fragment);
          return true;
        },
      );
      assert.ok(performance.now() - t0 < 20_000, 'refused promptly');
    });
  }

  it('a missing file', () => {
    assert.throws(
      () => loadRunConfig(join(root, 'nope.yaml')),
      (e: unknown) => e instanceof ConfigFileError && /nope\.yaml: 1 problem[\s\S]*no such file/.test(e.message),
    );
  });
});
