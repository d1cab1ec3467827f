/**
 * GGUF import: files written by the exporter (Llama, Qwen2, GPT-2) come back as the same model
 * (every weight bit for bit, the same logits, the same token ids and chat template); the header
 * reader agrees with @huggingface/gguf's; `convert` writes a loadable folder atomically; bad files
 * fail with errors naming the file and the tensor or key.
 */
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { gguf as hfGguf } from '@huggingface/gguf';
import { Rng } from '../../src/engine/rng.js';
import { noGrad } from '../../src/engine/tensor.js';
import { CheckpointError } from '../../src/model/errors.js';
import { exportGguf, type GgufValue, writeGguf } from '../../src/model/gguf.js';
import { readGgufHeader } from '../../src/model/gguf-file.js';
import { convertGguf, readGgufModel } from '../../src/model/gguf-import.js';
import { parseModelConfig } from '../../src/model/hf-config.js';
import { createModel } from '../../src/model/load.js';
import { LanguageModel, loadTokenizer } from '../../src/model/pretrained.js';

const ROOT = join(import.meta.dirname, '..', '..');
const MICRO = join(ROOT, 'models', 'micro');
const TINY_GPT2 = join(ROOT, 'test', 'fixtures', 'models', 'tiny-gpt2');
const tmp = mkdtempSync(join(tmpdir(), 'magrpo-gguf-import-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

const TEXTS = [
  'Call me Ishmael. Some years ago, never mind how long precisely',
  "I'll say it's 12345 dollars, isn't it?\n\n  indented\tand tabs",
  'def add(a, b):\n    return a + b  # café, naïve, 東京',
];

/** The folder with every weight made random (norms near 1), so a misplaced tensor changes logits. */
function randomized(dir: string, seed: number): string {
  const lm = LanguageModel.load(dir);
  const rng = new Rng(seed);
  for (const [name, p] of lm.model.params) {
    const norm = /norm|ln_/.test(name) && name.endsWith('.weight');
    for (let i = 0; i < p.size; i++) p.data[i] = (norm ? 1 : 0) + rng.normal() * (norm ? 0.1 : 0.3);
  }
  const out = join(tmp, `random-${seed}`);
  rmSync(out, { recursive: true, force: true });
  lm.save(out);
  return out;
}

function logits(lm: LanguageModel, ids: number[]): Float32Array | Float64Array {
  return noGrad(() => lm.model.forward(Int32Array.from(ids), 1, ids.length).data.slice());
}

/**
 * A random Qwen2 (q/k/v biases) or Llama of hidden size 32 (rows of whole 32-element blocks) with
 * models/micro's byte-level BPE tokenizer and chat template.
 */
function smallFolder(modelType: 'qwen2' | 'llama', seed: number): string {
  const dir = join(tmp, `${modelType}-${seed}`);
  const config = parseModelConfig({
    model_type: modelType,
    vocab_size: 4096,
    hidden_size: 32,
    intermediate_size: 64,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    max_position_embeddings: 64,
    tie_word_embeddings: modelType === 'qwen2',
    bos_token_id: 0,
    eos_token_id: 1,
  });
  const micro = LanguageModel.load(MICRO);
  new LanguageModel(createModel(config), micro.tokenizer, micro.generation).save(dir);
  return randomized(dir, seed);
}

for (const [arch, source] of [
  ['llama', () => randomized(MICRO, 5)],
  ['qwen2', () => smallFolder('qwen2', 6)],
  ['gpt2', () => randomized(TINY_GPT2, 7)],
] as const) {
  describe(`GGUF import of an exported ${arch} model`, () => {
    const folder = source();
    const file = join(tmp, `${arch}.gguf`);
    exportGguf(folder, file);
    const original = LanguageModel.load(folder);
    const imported = LanguageModel.load(file);

    it('gives back every parameter bit for bit (Q/K permutation and Conv1D transposes undone)', () => {
      assert.deepEqual([...imported.model.params.keys()].sort(), [...original.model.params.keys()].sort());
      for (const [name, p] of original.model.params) {
        const q = imported.model.params.get(name);
        assert.ok(q, name);
        assert.deepEqual(q.shape, p.shape, name);
        assert.ok(
          Buffer.from(q.data.buffer, q.data.byteOffset, q.data.byteLength).equals(Buffer.from(p.data.buffer, p.data.byteOffset, p.data.byteLength)),
          `${name} differs`,
        );
      }
      // The exporter writes the tokenizer's pad id (EOS when it has none), so a null pad comes back set.
      const pad = { torchDtype: null, padTokenId: original.model.config.padTokenId ?? imported.model.config.padTokenId };
      assert.deepEqual({ ...imported.model.config, ...pad }, { ...original.model.config, ...pad });
    });

    it('gives the same logits and the same token ids', () => {
      for (const text of TEXTS) {
        const ids = original.encode(text);
        assert.deepEqual(imported.encode(text), ids, JSON.stringify(text));
        assert.equal(imported.tokenizer.decode(ids), original.tokenizer.decode(ids));
        const max = Math.min(ids.length, imported.model.maxPositions);
        assert.deepEqual(logits(imported, ids.slice(0, max)), logits(original, ids.slice(0, max)));
      }
      assert.deepEqual(imported.stopIds(), original.stopIds());
      assert.equal(imported.tokenizer.bosId, original.tokenizer.bosId);
    });

    it("carries the chat template (or its absence) and the special tokens' ids", () => {
      const messages = [{ role: 'user', content: 'Summarise this post.' }];
      let want: string | Error;
      try {
        want = original.tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true });
      } catch (e) {
        want = e as Error;
      }
      if (want instanceof Error) assert.throws(() => imported.tokenizer.applyChatTemplate(messages), /no chat_template/);
      else {
        const got = imported.tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true });
        assert.equal(got, want);
        assert.deepEqual(imported.tokenizer.encode(got, { addSpecialTokens: false }), original.tokenizer.encode(want, { addSpecialTokens: false }));
      }
    });

    it("reads the same header as @huggingface/gguf's parser", async () => {
      const ours = readGgufHeader(file);
      const theirs = await hfGguf(file, { allowLocalFile: true });
      assert.equal(ours.version, Number(theirs.metadata.version));
      const { version: _v, tensor_count: _t, kv_count: _k, ...meta } = theirs.metadata;
      assert.deepEqual([...ours.metadata.keys()].sort(), Object.keys(meta).sort());
      for (const [key, value] of ours.metadata) {
        const v = (meta as Record<string, unknown>)[key];
        assert.deepEqual(value, typeof v === 'bigint' ? Number(v) : v, key);
      }
      assert.equal(ours.dataOffset, Number(theirs.tensorDataOffset));
      assert.deepEqual(
        ours.tensors.map((t) => [t.name, t.shape, t.type, t.offset]),
        theirs.tensorInfos.map((t) => [t.name, t.shape.map(Number).reverse(), t.dtype, Number(theirs.tensorDataOffset + t.offset)]),
      );
    });
  });
}

describe('magrpo convert', () => {
  const file = join(tmp, 'micro.gguf');
  exportGguf(MICRO, file);

  it('writes a folder that loads as the GGUF file does, with a model card naming the source', () => {
    const out = join(tmp, 'converted');
    convertGguf(file, out);
    assert.deepEqual(readdirSync(out).sort(), [
      'README.md',
      'config.json',
      'generation_config.json',
      'model.safetensors',
      'tokenizer.json',
      'tokenizer_config.json',
    ]);
    const a = LanguageModel.load(out);
    const b = LanguageModel.load(file);
    const ids = b.encode(TEXTS[0]);
    assert.deepEqual(logits(a, ids), logits(b, ids));
    assert.deepEqual(a.encode(TEXTS[1]), b.encode(TEXTS[1]));
    const card = readFileSync(join(out, 'README.md'), 'utf8');
    assert.match(card, /micro\.gguf/);
    assert.match(card, /architecture: llama/);
  });

  it('refuses a folder that is not empty, and leaves nothing behind when the file is bad', () => {
    const busy = join(tmp, 'busy');
    mkdirSync(busy);
    writeFileSync(join(busy, 'keep.txt'), 'x');
    assert.throws(() => convertGguf(file, busy), /not an empty folder/);
    assert.deepEqual(readdirSync(busy), ['keep.txt']);
    const bad = join(tmp, 'cut.gguf');
    copyFileSync(file, bad);
    truncateSync(bad, readFileSync(file).length - 100);
    const out = join(tmp, 'never');
    assert.throws(() => convertGguf(bad, out), CheckpointError);
    assert.equal(existsSync(out), false);
    assert.deepEqual(
      readdirSync(tmp).filter((f) => f.includes('converting')),
      [],
    );
  });
});

describe('bad GGUF files: errors name the file and the tensor or key', () => {
  const good = join(tmp, 'good.gguf');
  exportGguf(smallFolder('llama', 8), good);
  const bytes = readFileSync(good);
  const header = readGgufHeader(good);
  const variant = (name: string, edit: (b: Buffer) => Buffer) => {
    const f = join(tmp, name);
    writeFileSync(f, edit(Buffer.from(bytes)));
    return f;
  };
  const fails = (f: string, pattern: RegExp) => {
    assert.throws(
      () => LanguageModel.load(f),
      (e: Error) => {
        assert.ok(e instanceof CheckpointError, `${e.name}: ${e.message}`);
        assert.ok(e.message.startsWith(f), e.message);
        assert.match(e.message, pattern);
        return true;
      },
    );
  };

  it('a wrong magic', () => {
    fails(
      variant('magic.gguf', (b) => {
        b.write('GGUX', 0);
        return b;
      }),
      /GGUF magic/,
    );
  });

  it('truncated: inside the metadata, inside the tensor infos, inside the data', () => {
    fails(
      variant('cut-meta.gguf', (b) => b.subarray(0, 200)),
      /ends inside metadata/,
    );
    fails(
      variant('cut-infos.gguf', (b) => b.subarray(0, header.dataOffset - 40)),
      /ends inside (the info of tensor|tensor info)/,
    );
    const last = header.tensors.reduce((a, t) => (t.offset > a.offset ? t : a));
    fails(
      variant('cut-data.gguf', (b) => b.subarray(0, last.offset + 8)),
      new RegExp(`tensor "${last.name.replace(/\./g, '\\.')}".*runs past the end`),
    );
  });

  it('an unknown tensor type, and one that cannot be dequantized', () => {
    // The type id sits right before the tensor's u64 offset in its info: find the first info by name.
    const name = header.tensors[0].name;
    const at = bytes.indexOf(Buffer.from(name)) + name.length;
    const nDims = bytes.readUInt32LE(at);
    const typeAt = at + 4 + 8 * nDims;
    fails(
      variant('type99.gguf', (b) => {
        b.writeUInt32LE(99, typeAt);
        return b;
      }),
      new RegExp(`tensor "${name.replace(/\./g, '\\.')}" has ggml type 99`),
    );
    // IQ4_NL (20): a type ggml knows (32 elements in 18 bytes, so it fits where the F32 data was) but
    // that is not dequantized here.
    const matrix = header.tensors.find((t) => t.type === 0 && t.shape.length === 2 && t.shape[1] % 32 === 0);
    assert.ok(matrix);
    const mAt = bytes.indexOf(Buffer.from(matrix.name)) + matrix.name.length;
    fails(
      variant('iq4nl.gguf', (b) => {
        b.writeUInt32LE(20, mAt + 4 + 8 * bytes.readUInt32LE(mAt));
        return b;
      }),
      new RegExp(`tensor "${matrix.name.replace(/\./g, '\\.')}".*IQ4_NL`),
    );
  });

  it('a tensor whose shape needs more bytes than the file has', () => {
    const name = header.tensors[0].name;
    const at = bytes.indexOf(Buffer.from(name)) + name.length;
    fails(
      variant('shape.gguf', (b) => {
        b.writeBigUInt64LE(BigInt(header.tensors[0].shape.at(-1) ?? 1) * 1000n, at + 4);
        return b;
      }),
      new RegExp(`tensor "${name.replace(/\./g, '\\.')}"`),
    );
  });

  /** Rewrites the good file's metadata and tensors through the exporter's writer. */
  function rewrite(
    name: string,
    edit: (meta: [string, GgufValue][], tensors: { name: string; shape: number[]; dtype: 'F32'; data: Float32Array }[]) => void,
  ): string {
    const m = readGgufModel(good);
    const meta: [string, GgufValue][] = [];
    for (const [k, v] of m.gguf.metadata) {
      if (k === 'general.alignment') continue;
      if (typeof v === 'string') meta.push([k, { type: 'string', value: v }]);
      else if (typeof v === 'boolean') meta.push([k, { type: 'bool', value: v }]);
      else if (typeof v === 'number') meta.push([k, Number.isInteger(v) ? { type: 'u32', value: v } : { type: 'f32', value: v }]);
      else if (Array.isArray(v) && typeof v[0] === 'string') meta.push([k, { type: 'array', of: 'string', value: v as string[] }]);
      else if (Array.isArray(v)) meta.push([k, { type: 'array', of: 'i32', value: v as number[] }]);
    }
    const raw = readFileSync(good);
    const tensors = m.gguf.tensors.map((t) => ({
      name: t.name,
      shape: t.shape,
      dtype: 'F32' as const,
      data: new Float32Array(raw.buffer.slice(raw.byteOffset + t.offset, raw.byteOffset + t.offset + t.nbytes)),
    }));
    edit(meta, tensors);
    const f = join(tmp, name);
    writeGguf(f, meta, tensors);
    return f;
  }

  it('a missing tensor is named', () => {
    const f = rewrite('missing.gguf', (_m, t) => {
      t.splice(
        t.findIndex((x) => x.name === 'blk.0.ffn_up.weight'),
        1,
      );
    });
    fails(f, /tensor "blk\.0\.ffn_up\.weight" .*is missing/);
  });

  it('an extra tensor that would change the model is refused by name', () => {
    const f = rewrite('extra.gguf', (_m, t) => {
      t.push({ name: 'rope_freqs.weight', shape: [4], dtype: 'F32', data: new Float32Array(4).fill(1) });
    });
    fails(f, /rope_freqs\.weight/);
  });

  it('an unsupported architecture names what is supported', () => {
    const f = rewrite('falcon.gguf', (m) => {
      const i = m.findIndex(([k]) => k === 'general.architecture');
      m[i] = ['general.architecture', { type: 'string', value: 'falcon' }];
    });
    fails(f, /architecture "falcon" is not supported; supported: llama, qwen2, gpt2/);
  });

  it('a SentencePiece tokenizer is refused with a clear reason', () => {
    const f = rewrite('spm.gguf', (m) => {
      const i = m.findIndex(([k]) => k === 'tokenizer.ggml.model');
      m[i] = ['tokenizer.ggml.model', { type: 'string', value: 'llama' }];
    });
    fails(f, /SentencePiece/);
  });

  it('a file with no tokenizer loads weights but not a LanguageModel', () => {
    const f = rewrite('notok.gguf', (m) => {
      const i = m.findIndex(([k]) => k === 'tokenizer.ggml.model');
      m[i] = ['tokenizer.ggml.model', { type: 'string', value: 'none' }];
    });
    fails(f, /has no tokenizer/);
    assert.throws(() => loadTokenizer(f), /has no tokenizer/);
  });
});
