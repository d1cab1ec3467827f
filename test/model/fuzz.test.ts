/**
 * Seeded fuzzing of the two parsers that read untrusted files: a valid safetensors file and a valid
 * config.json (model) / run config (YAML) are mutated a few hundred times each (bit flips, byte
 * runs, truncation, header-length and offset edits, JSON value swaps). Every mutant must either
 * load or fail with the parser's own named error (CheckpointError / ConfigFileError) whose message
 * names the file: no TypeError, RangeError, hang or crash. Seeded, so a failure replays exactly.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, it } from 'node:test';
import { Rng } from '../../src/engine/rng.js';
import { CheckpointError } from '../../src/model/errors.js';
import { parseModelConfig } from '../../src/model/hf-config.js';
import { readSafetensors } from '../../src/model/safetensors.js';
import { ConfigFileError, loadRunConfig } from '../../src/run/config-file.js';

const SEED = Number(process.env.MAGRPO_FUZZ_SEED ?? 20261125);
const ROUNDS = 300;
const FIXTURES = resolve(import.meta.dirname, '..', 'fixtures', 'models');
const root = mkdtempSync(join(tmpdir(), 'magrpo-fuzz-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** One random mutation of `bytes` (a copy). */
function mutate(rng: Rng, bytes: Buffer, headerEnd: number): Buffer {
  const b = Buffer.from(bytes);
  const at = (limit = b.length) => Math.floor(rng.next() * Math.max(1, limit));
  switch (Math.floor(rng.next() * 8)) {
    case 0: // flip bits anywhere
      for (let k = 0; k < 1 + at(8); k++) b[at()] ^= 1 << at(8);
      return b;
    case 1: // flip bits in the length prefix + JSON header, where parsing happens
      for (let k = 0; k < 1 + at(4); k++) b[at(headerEnd)] ^= 1 << at(8);
      return b;
    case 2: // truncate
      return b.subarray(0, at());
    case 3: {
      // absurd header length: 2^k for k in [0, 64)
      b.writeBigUInt64LE((1n << BigInt(at(64))) + BigInt(at(3)) - 1n, 0);
      return b;
    }
    case 4: {
      // overwrite a run of header bytes with random printable or control bytes
      const start = 8 + at(headerEnd - 8);
      for (let i = start; i < Math.min(headerEnd, start + 1 + at(16)); i++) b[i] = at(256);
      return b;
    }
    case 5: {
      // append or insert junk
      const junk = Buffer.from(Array.from({ length: 1 + at(64) }, () => at(256)));
      return Buffer.concat([b.subarray(0, 8 + at(b.length - 8)), junk, b.subarray(8 + at(b.length - 8))]);
    }
    case 6: {
      // rewrite a digit inside the JSON header (shapes, offsets)
      const header = b.subarray(8, headerEnd).toString('latin1');
      const digits = [...header.matchAll(/\d/g)].map((m) => m.index as number);
      if (digits.length > 0) b[8 + digits[at(digits.length)]] = 0x30 + at(10);
      return b;
    }
    default: {
      // swap a JSON token for a hostile value
      const header = b.subarray(8, headerEnd).toString('latin1');
      const tokens = [...header.matchAll(/"[A-Z0-9]+"|\d+|\[|\]/g)];
      if (tokens.length === 0) return b;
      const t = tokens[at(tokens.length)];
      const hostile = ['-1', '1e308', 'null', '"F8"', '{}', '[[[[', '9007199254740993', '"__proto__"', '1.5'][at(9)];
      const text = header.slice(0, t.index) + hostile + header.slice((t.index as number) + t[0].length);
      const out = Buffer.concat([Buffer.alloc(8), Buffer.from(text, 'latin1'), b.subarray(headerEnd)]);
      out.writeBigUInt64LE(BigInt(Buffer.byteLength(text, 'latin1')));
      return out;
    }
  }
}

/** Runs `fn`; a throw must be one of `allowed` and name `file`. Returns 'ok' or 'error'. */
function outcome(fn: () => unknown, allowed: (new (...a: never[]) => Error)[], file: string, what: string): 'ok' | 'error' {
  try {
    fn();
    return 'ok';
  } catch (e) {
    assert.ok(
      allowed.some((c) => e instanceof c),
      `${what}: unexpected ${(e as Error)?.name}: ${(e as Error)?.message?.slice(0, 300)} (replay with MAGRPO_FUZZ_SEED=${SEED})`,
    );
    assert.ok((e as Error).message.startsWith(file), `${what}: message does not name the file: ${(e as Error).message.slice(0, 200)}`);
    return 'error';
  }
}

describe(`fuzz (seed ${SEED}, ${ROUNDS} mutants per parser)`, () => {
  it('safetensors: every mutant loads or gives a CheckpointError naming the file', () => {
    const rng = new Rng(SEED);
    const valid = readFileSync(join(FIXTURES, 'tiny-llama', 'model.safetensors'));
    const headerEnd = 8 + Number(valid.readBigUInt64LE(0));
    const file = join(root, 'fuzz.safetensors');
    const counts = { ok: 0, error: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      writeFileSync(file, mutate(rng, valid, headerEnd));
      counts[outcome(() => readSafetensors(file), [CheckpointError], file, `safetensors mutant ${round}`)]++;
    }
    assert.ok(counts.error > ROUNDS / 2, `most mutants must be refused: ${JSON.stringify(counts)}`);
  });

  it('config.json: every mutant parses or gives a CheckpointError naming the file', () => {
    const rng = new Rng(SEED + 1);
    const text = readFileSync(join(FIXTURES, 'tiny-llama', 'config.json'), 'utf8');
    const base = JSON.parse(text) as Record<string, unknown>;
    const keys = Object.keys(base);
    const hostile: unknown[] = [-1, 0, 1e9, 2 ** 53, 1.5, Number.MAX_VALUE, '', 'x', null, true, [], {}, [1e9], 'LlamaForCausalLM', ['GPT2LMHeadModel']];
    const counts = { ok: 0, error: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      let json: unknown;
      if (rng.next() < 0.3) {
        // byte-level: corrupt the text
        const b = Buffer.from(text);
        for (let k = 0; k < 1 + Math.floor(rng.next() * 4); k++) b[Math.floor(rng.next() * b.length)] = Math.floor(rng.next() * 256);
        try {
          json = JSON.parse(b.toString('utf8'));
        } catch {
          counts.error++;
          continue;
        }
      } else {
        const c: Record<string, unknown> = { ...base };
        for (let k = 0; k < 1 + Math.floor(rng.next() * 3); k++) {
          const key = keys[Math.floor(rng.next() * keys.length)];
          if (rng.next() < 0.2) delete c[key];
          else c[key] = hostile[Math.floor(rng.next() * hostile.length)];
        }
        json = c;
      }
      counts[outcome(() => parseModelConfig(json, 'fuzz/config.json'), [CheckpointError], 'fuzz/config.json', `config.json mutant ${round}`)]++;
    }
    assert.ok(counts.error > ROUNDS / 3, `many mutants must be refused: ${JSON.stringify(counts)}`);
  });

  it('run config (YAML): every mutant loads or gives a ConfigFileError naming the file', () => {
    const rng = new Rng(SEED + 2);
    const valid = `env:
  name: coop-python
  train_size: 8
model: ${join(FIXTURES, 'tiny-llama')}
trainer:
  num_generations: 4
  num_turns: 2
  joint_mode: aligned
  max_new_tokens: 32
  agent_learning_rate: [1.0e-5, 2.0e-5]
  lora: {r: 4, alpha: 8, target_modules: [q_proj, v_proj]}
eval:
  samples_per_item: 2
samples:
  every: 2
`;
    const file = join(root, 'fuzz.yaml');
    const hostile = [
      '1e9',
      '-1',
      '.nan',
      '.inf',
      '~',
      '"x"',
      '[]',
      '{}',
      '*a',
      '&a [*a, *a]',
      '!!binary aGk=',
      '<<: *a',
      '0x7fffffff',
      '"\\u0000"',
      '- [',
      ': :',
    ];
    const counts = { ok: 0, error: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      const lines = valid.split('\n');
      for (let k = 0; k < 1 + Math.floor(rng.next() * 3); k++) {
        const i = Math.floor(rng.next() * (lines.length - 1));
        const r = rng.next();
        if (r < 0.45) lines[i] = lines[i].replace(/:\s.*$/, `: ${hostile[Math.floor(rng.next() * hostile.length)]}`);
        else if (r < 0.6) lines.splice(i, 1);
        else if (r < 0.75) lines[i] = `${' '.repeat(Math.floor(rng.next() * 5))}${lines[i].trimStart()}`;
        else {
          const chars = [...lines[i]];
          chars[Math.floor(rng.next() * Math.max(1, chars.length))] = String.fromCharCode(Math.floor(rng.next() * 128));
          lines[i] = chars.join('');
        }
      }
      writeFileSync(file, lines.join('\n'));
      counts[outcome(() => loadRunConfig(file), [ConfigFileError], file, `yaml mutant ${round}`)]++;
    }
    assert.ok(counts.error > ROUNDS / 3, `many mutants must be refused: ${JSON.stringify(counts)}`);
  });
});
