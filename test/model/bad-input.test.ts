/**
 * Bad model folders and dataset files as users (or attackers) hand them over: every case must end in
 * ONE named error (CheckpointError / CodingDataError / WritingDataError) whose message starts with
 * the offending file, never a TypeError, a crash, a hang or a huge allocation. The cases are a table
 * so docs/reliability.md can count them.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { CodingDataError, loadCodingJsonl } from '../../src/envs/coding/data.js';
import { MAX_ROW_BYTES } from '../../src/envs/dataset-file.js';
import { loadWritingItems, WritingDataError } from '../../src/envs/writing/data.js';
import { CheckpointError } from '../../src/model/errors.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import { readSafetensorsHeader } from '../../src/model/safetensors.js';

const FIXTURE = resolve(import.meta.dirname, '..', 'fixtures', 'models', 'tiny-llama');
const root = mkdtempSync(join(tmpdir(), 'magrpo-bad-input-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

/** A copy of the tiny Llama folder with `edit` applied. */
function folder(edit: (dir: string) => void): string {
  const dir = join(root, `m${n++}`);
  cpSync(FIXTURE, dir, { recursive: true });
  edit(dir);
  return dir;
}
const json = (dir: string, file: string) => JSON.parse(readFileSync(join(dir, file), 'utf8'));
const writeJson = (dir: string, file: string, v: unknown) => writeFileSync(join(dir, file), JSON.stringify(v));
const editJson = (file: string, f: (v: Record<string, unknown>) => unknown) => (dir: string) => writeJson(dir, file, f(json(dir, file)));

/** Rewrites model.safetensors with a new header (tensor bytes kept, or replaced). */
function rewriteWeights(
  dir: string,
  edit: (header: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>, data: Buffer) => unknown,
): void {
  const file = join(dir, 'model.safetensors');
  const bytes = readFileSync(file);
  const len = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + len).toString('utf8'));
  const data = Buffer.from(bytes.subarray(8 + len));
  const edited = edit(header, data);
  const newData = Buffer.isBuffer(edited) ? edited : data;
  const h = Buffer.from(JSON.stringify(header));
  const out = Buffer.alloc(8 + h.length + newData.length);
  out.writeBigUInt64LE(BigInt(h.length));
  h.copy(out, 8);
  newData.copy(out, 8 + h.length);
  writeFileSync(file, out);
}
const firstWeight = (dir: string) => {
  const t = [...readSafetensorsHeader(join(dir, 'model.safetensors')).tensors].find(([k]) => k.endsWith('q_proj.weight'));
  return t as [string, { offset: number; byteLength: number }];
};

type Case = [name: string, dir: () => string, file: string, fragment: RegExp];
const MODEL_CASES: Case[] = [
  ['config.json missing', () => folder((d) => rmSync(join(d, 'config.json'))), 'config.json', /does not exist/],
  ['config.json empty', () => folder((d) => writeFileSync(join(d, 'config.json'), '')), 'config.json', /not valid JSON/],
  [
    'config.json garbage bytes',
    () => folder((d) => writeFileSync(join(d, 'config.json'), Buffer.from([0xff, 0xfe, 0x00, 0x9c]))),
    'config.json',
    /not valid JSON/,
  ],
  ['config.json a JSON array', () => folder((d) => writeFileSync(join(d, 'config.json'), '[1,2]')), 'config.json', /not a JSON object/],
  ['config.json 20 MiB', () => folder((d) => writeFileSync(join(d, 'config.json'), ' '.repeat(20 << 20))), 'config.json', /at most/],
  [
    'config.json wrong types',
    () => folder(editJson('config.json', (c) => ({ ...c, hidden_size: '32', num_hidden_layers: 1.5 }))),
    'config.json',
    /hidden_size: got "32"/,
  ],
  [
    'num_hidden_layers 1e9',
    () => folder(editJson('config.json', (c) => ({ ...c, num_hidden_layers: 1e9 }))),
    'config.json',
    /num_hidden_layers: got 1000000000, expected a positive integer ≤ 1024/,
  ],
  ['vocab_size 2^40', () => folder(editJson('config.json', (c) => ({ ...c, vocab_size: 2 ** 40 }))), 'config.json', /vocab_size/],
  // Within the bounds but 2^41 parameters: refused from the safetensors header, before any allocation.
  [
    'config.json claims a huge model',
    () => folder(editJson('config.json', (c) => ({ ...c, vocab_size: 1 << 24, hidden_size: 1 << 17, head_dim: 64 }))),
    'model.safetensors',
    /has shape .* but config.json implies/,
  ],
  [
    'hidden_size inconsistent with weights',
    () => folder(editJson('config.json', (c) => ({ ...c, hidden_size: 64, head_dim: 16 }))),
    'model.safetensors',
    /config.json implies/,
  ],
  [
    'missing key changes the implied shape',
    () => folder(editJson('config.json', ({ num_key_value_heads: _, ...c }) => c)),
    'model.safetensors',
    /config.json implies/,
  ],
  ['unknown architecture', () => folder(editJson('config.json', (c) => ({ ...c, architectures: ['MambaForCausalLM'] }))), 'config.json', /not supported/],
  ['model.safetensors missing', () => folder((d) => rmSync(join(d, 'model.safetensors'))), 'model.safetensors', /neither model.safetensors/],
  [
    'safetensors truncated',
    () => folder((d) => writeFileSync(join(d, 'model.safetensors'), readFileSync(join(d, 'model.safetensors')).subarray(0, 5000))),
    'model.safetensors',
    /file has 5000|header needs/,
  ],
  ['safetensors 3 bytes', () => folder((d) => writeFileSync(join(d, 'model.safetensors'), 'abc')), 'model.safetensors', /too short/],
  [
    'safetensors header length 2^60',
    () =>
      folder((d) => {
        const b = readFileSync(join(d, 'model.safetensors'));
        b.writeBigUInt64LE(1n << 60n);
        writeFileSync(join(d, 'model.safetensors'), b);
      }),
    'model.safetensors',
    /not a safetensors file/,
  ],
  [
    'safetensors non-JSON header',
    () =>
      folder((d) => {
        const b = readFileSync(join(d, 'model.safetensors'));
        b.fill(0x41, 8, 40);
        writeFileSync(join(d, 'model.safetensors'), b);
      }),
    'model.safetensors',
    /not valid UTF-8 JSON/,
  ],
  [
    'safetensors overlapping offsets',
    () =>
      folder((d) =>
        rewriteWeights(d, (h) => {
          const [a, b] = Object.keys(h).filter((k) => k !== '__metadata__');
          h[b].data_offsets = [h[a].data_offsets[0], h[a].data_offsets[0] + (h[b].data_offsets[1] - h[b].data_offsets[0])];
        }),
      ),
    'model.safetensors',
    /overlaps|gap|needs/,
  ],
  [
    'safetensors offsets past the end',
    () =>
      folder((d) =>
        rewriteWeights(d, (h) => {
          const k = Object.keys(h)
            .filter((x) => x !== '__metadata__')
            .pop() as string;
          h[k].data_offsets = [h[k].data_offsets[0] + 1e12, h[k].data_offsets[1] + 1e12];
        }),
      ),
    'model.safetensors',
    /gap|describes|file has/,
  ],
  [
    'safetensors unknown dtype',
    () =>
      folder((d) =>
        rewriteWeights(d, (h) => {
          h[firstWeight(d)[0]].dtype = 'F8_E4M3';
          return undefined;
        }),
      ),
    'model.safetensors',
    /dtype F8_E4M3/,
  ],
  [
    'safetensors integer weights',
    () =>
      folder((d) =>
        rewriteWeights(d, (h) => {
          h[firstWeight(d)[0]].dtype = 'I32';
          return undefined;
        }),
      ),
    'model.safetensors',
    /stored as I32, not a float type/,
  ],
  [
    'safetensors shape mismatch',
    () =>
      folder((d) =>
        rewriteWeights(d, (h) => {
          const w = h[firstWeight(d)[0]];
          w.shape = [w.shape[1], w.shape[0] * 2].map((x, i) => (i === 0 ? x : x / 2));
          w.shape = [w.shape[0] * 2, w.shape[1] / 2];
        }),
      ),
    'model.safetensors',
    /config.json implies/,
  ],
  [
    'NaN weights',
    () =>
      folder((d) => {
        const [, t] = firstWeight(d);
        const b = readFileSync(join(d, 'model.safetensors'));
        b.writeFloatLE(Number.NaN, t.offset + 4 * 7);
        writeFileSync(join(d, 'model.safetensors'), b);
      }),
    'model.safetensors',
    /holds NaN at element 7: weights must be finite/,
  ],
  [
    'infinite weights',
    () =>
      folder((d) => {
        const [, t] = firstWeight(d);
        const b = readFileSync(join(d, 'model.safetensors'));
        b.writeFloatLE(Number.NEGATIVE_INFINITY, t.offset);
        writeFileSync(join(d, 'model.safetensors'), b);
      }),
    'model.safetensors',
    /holds -Infinity at element 0/,
  ],
  ['tokenizer.json missing', () => folder((d) => rmSync(join(d, 'tokenizer.json'))), 'tokenizer.json', /no tokenizer.json/],
  [
    'tokenizer.json garbage',
    () => folder((d) => writeFileSync(join(d, 'tokenizer.json'), Buffer.from([0x7b, 0xff, 0x00, 0x22]))),
    'tokenizer.json',
    /JSON|tokenizer/,
  ],
  ['tokenizer.json empty object', () => folder((d) => writeFileSync(join(d, 'tokenizer.json'), '{}')), 'tokenizer.json', /tokenizer/],
  ['tokenizer.json model missing', () => folder(editJson('tokenizer.json', ({ model: _, ...t }) => t)), 'tokenizer.json', /tokenizer/],
  [
    'tokenizer.json vocab not a map',
    () => folder(editJson('tokenizer.json', (t) => ({ ...t, model: { ...(t.model as object), vocab: 7 } }))),
    'tokenizer.json',
    /tokenizer/,
  ],
  [
    'tokenizer larger than the model vocabulary',
    () =>
      folder(
        editJson('tokenizer.json', (t) => ({
          ...t,
          added_tokens: [
            ...(t.added_tokens as object[]),
            { id: 100000, content: '<extra>', special: true, single_word: false, lstrip: false, rstrip: false, normalized: false },
          ],
        })),
      ),
    'tokenizer.json',
    /the tokenizer has 100001 tokens but the model's vocabulary is/,
  ],
  ['tokenizer_config.json garbage', () => folder((d) => writeFileSync(join(d, 'tokenizer_config.json'), 'not json')), 'tokenizer_config.json', /JSON/],
  [
    'tokenizer_config.json eos not in vocabulary',
    () => folder(editJson('tokenizer_config.json', (c) => ({ ...c, eos_token: '<nope>' }))),
    'tokenizer_config.json',
    /not in tokenizer.json's vocabulary/,
  ],
  [
    'generation_config.json wrong types',
    () => folder(editJson('generation_config.json', (c) => ({ ...c, top_p: 'high', max_new_tokens: -3 }))),
    'generation_config.json',
    /top_p: got "high"/,
  ],
];

type DataCase = [name: string, content: string | Buffer, ext: string, fragment: RegExp];
/** "file:N:" (coding loader) or "(line N)" (writing loader). */
const L = (n: number, rest: string) => new RegExp(`(:${n}:|line ${n}\\)).*${rest}`);
const humanEvalRow = { task_id: 't/0', prompt: 'def f():\n', test: 'def check(candidate):\n    assert candidate() == 1\n', entry_point: 'f' };
const DATA_CASES: DataCase[] = [
  ['empty file', '', 'jsonl', /no items|no rows/],
  ['only blank lines', '\n\n  \n', 'jsonl', /no items|no rows/],
  ['missing fields', `${JSON.stringify({ task_id: 'x' })}\n`, 'jsonl', L(1, '(needs|no ")')],
  ['wrong field type', `${JSON.stringify({ ...humanEvalRow, prompt: 7, abstract_text: 7 })}\n`, 'jsonl', L(1, '')],
  ['a JSON array row', '[1,2,3]\n', 'jsonl', L(1, 'expected (a JSON object|an object)')],
  ['invalid JSON', '{"prompt": "a",\n', 'jsonl', L(1, '(not valid JSON|invalid JSON)')],
  [
    'invalid UTF-8',
    Buffer.concat([Buffer.from(`${JSON.stringify({ ...humanEvalRow, abstract_text: 'ok' })}\n{"prompt": "`), Buffer.from([0xc3, 0x28]), Buffer.from('"}\n')]),
    'jsonl',
    L(2, 'invalid UTF-8 at byte'),
  ],
  ['huge row', `${JSON.stringify({ ...humanEvalRow, prompt: 'x'.repeat(MAX_ROW_BYTES + 10), abstract_text: 'x' })}\n`, 'jsonl', L(1, 'more than')],
  ['gzip bomb header (not gzip)', 'plain text, not gzip', 'jsonl.gz', /not valid gzip/],
  ['gzip of invalid UTF-8', gzipSync(Buffer.from([0x7b, 0xff, 0xfe, 0x7d, 0x0a])), 'jsonl.gz', /invalid UTF-8/],
];

/** Asserts `fn` throws one named error whose message starts with `file`; returns it. */
function expectNamed(fn: () => unknown, classes: (new (...a: never[]) => Error)[], file: string, fragment: RegExp): Error {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof Error, 'expected an error');
  assert.ok(
    classes.some((c) => caught instanceof c),
    `expected ${classes.map((c) => c.name).join('/')}, got ${(caught as Error).name}: ${(caught as Error).message}`,
  );
  assert.ok((caught as Error).message.startsWith(file), `message should start with ${file}: ${(caught as Error).message.slice(0, 300)}`);
  assert.match((caught as Error).message.slice(0, 2000), fragment);
  return caught as Error;
}

describe('bad model folders: one named error each', () => {
  for (const [name, make, file, fragment] of MODEL_CASES) {
    it(name, () => {
      const dir = make();
      const rss = process.memoryUsage().rss;
      expectNamed(() => LanguageModel.load(dir), [CheckpointError], join(dir, file), fragment);
      assert.ok(process.memoryUsage().rss - rss < 512 << 20, 'no huge allocation on the way to the error');
    });
  }
  it(`counts: ${MODEL_CASES.length} bad model folders`, () => assert.ok(MODEL_CASES.length >= 30));
});

describe('bad dataset files: one named error each', () => {
  for (const [name, content, ext, fragment] of DATA_CASES) {
    it(name, () => {
      const file = join(root, `d${n++}.${ext}`);
      writeFileSync(file, content);
      expectNamed(() => loadCodingJsonl(file), [CodingDataError], file, fragment);
      expectNamed(() => loadWritingItems(file), [WritingDataError], file, fragment);
    });
  }
});
