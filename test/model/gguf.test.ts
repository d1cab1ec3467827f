/**
 * GGUF export: the file is parsed back by a reader written here from the format description
 * (not the writer's code), and, when a Python with the `gguf` package is around (.cache/venv-llama
 * from `scripts/setup.sh --with-llama`, or .cache/gguf-venv), by llama.cpp's own gguf-py reader too.
 * GPT-2 models are also run by llama.cpp itself (llama-cpp-python) when a Python here imports
 * llama_cpp: its logits and greedy tokens are magrpo's.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Rng } from '../../src/engine/rng.js';
import { noGrad } from '../../src/engine/tensor.js';
import { exportGguf, exportModelGguf } from '../../src/model/gguf.js';
import { parseModelConfig } from '../../src/model/hf-config.js';
import { createModel } from '../../src/model/load.js';
import { applyLora, mergeLora, saveLora } from '../../src/model/lora.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import { f16ToF32 } from '../../src/model/safetensors.js';
import { llamaLogits } from '../helpers/llama-cpp.js';
import { optionalSkip } from '../helpers/skip.js';

const ROOT = join(import.meta.dirname, '..', '..');
const MICRO = join(ROOT, 'models', 'micro');
const TINY_GPT2 = join(ROOT, 'test', 'fixtures', 'models', 'tiny-gpt2');
const tmp = mkdtempSync(join(tmpdir(), 'magrpo-gguf-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

interface Parsed {
  version: number;
  meta: Map<string, unknown>;
  tensors: Map<string, { name: string; dims: number[]; type: number; offset: number; data: Float32Array }>;
  dataStart: number;
}

/** A GGUF reader from the spec: header, typed KV pairs, tensor infos, aligned data section. */
function parseGguf(file: string): Parsed {
  const buf = readFileSync(file);
  let at = 0;
  const u32 = () => {
    const v = buf.readUInt32LE(at);
    at += 4;
    return v;
  };
  const u64 = () => {
    const v = Number(buf.readBigUInt64LE(at));
    at += 8;
    return v;
  };
  const str = () => {
    const n = u64();
    const s = buf.toString('utf8', at, at + n);
    at += n;
    return s;
  };
  const value = (type: number): unknown => {
    switch (type) {
      case 0:
        return buf.readUInt8(at++);
      case 4:
        return u32();
      case 5: {
        const v = buf.readInt32LE(at);
        at += 4;
        return v;
      }
      case 6: {
        const v = buf.readFloatLE(at);
        at += 4;
        return v;
      }
      case 7:
        return buf.readUInt8(at++) === 1;
      case 8:
        return str();
      case 9: {
        const t = u32();
        const n = u64();
        return Array.from({ length: n }, () => value(t));
      }
      case 10:
        return u64();
      default:
        throw new Error(`value type ${type} not expected in this file`);
    }
  };
  assert.equal(buf.toString('ascii', 0, 4), 'GGUF');
  at = 4;
  const version = u32();
  const nTensors = u64();
  const nKv = u64();
  const meta = new Map<string, unknown>();
  for (let i = 0; i < nKv; i++) {
    const k = str();
    meta.set(k, value(u32()));
  }
  const infos: { name: string; dims: number[]; type: number; offset: number }[] = [];
  for (let i = 0; i < nTensors; i++) {
    const name = str();
    const nd = u32();
    const dims = Array.from({ length: nd }, () => u64());
    infos.push({ name, dims, type: u32(), offset: u64() });
  }
  const align = (meta.get('general.alignment') as number | undefined) ?? 32;
  const dataStart = Math.ceil(at / align) * align;
  const tensors = new Map<string, { name: string; dims: number[]; type: number; offset: number; data: Float32Array }>();
  for (const t of infos) {
    const n = t.dims.reduce((a, b) => a * b, 1);
    const start = dataStart + t.offset;
    const bytes = buf.subarray(start, start + n * (t.type === 0 ? 4 : 2));
    const copy = Uint8Array.from(bytes);
    const data = t.type === 0 ? new Float32Array(copy.buffer) : f16ToF32(new Uint16Array(copy.buffer));
    tensors.set(t.name, { ...t, data });
  }
  return { version, meta, tensors, dataStart };
}

describe('GGUF export', () => {
  const lm = LanguageModel.load(MICRO);
  const cfg = lm.model.config as import('../../src/model/config.js').LlamaConfig;
  const file = join(tmp, 'micro.gguf');
  exportGguf(MICRO, file);
  const g = parseGguf(file);

  it('writes a v3 header with llama metadata from config.json', () => {
    assert.equal(g.version, 3);
    assert.equal(g.meta.get('general.architecture'), 'llama');
    assert.equal(g.meta.get('general.alignment'), 32);
    assert.equal(g.meta.get('general.file_type'), 0);
    assert.equal(g.meta.get('llama.context_length'), 256);
    assert.equal(g.meta.get('llama.embedding_length'), 16);
    assert.equal(g.meta.get('llama.block_count'), 2);
    assert.equal(g.meta.get('llama.feed_forward_length'), 48);
    assert.equal(g.meta.get('llama.attention.head_count'), 2);
    assert.equal(g.meta.get('llama.attention.head_count_kv'), 2);
    assert.equal(g.meta.get('llama.rope.freq_base'), 10000);
    assert.equal(g.meta.get('llama.rope.dimension_count'), 8);
    assert.ok(Math.abs((g.meta.get('llama.attention.layer_norm_rms_epsilon') as number) - 1e-5) < 1e-10);
  });

  it('carries the tokenizer: gpt2 BPE tokens, types, merges, special ids, chat template', () => {
    assert.equal(g.meta.get('tokenizer.ggml.model'), 'gpt2');
    assert.equal(g.meta.get('tokenizer.ggml.pre'), 'gpt-2');
    const tokens = g.meta.get('tokenizer.ggml.tokens') as string[];
    const types = g.meta.get('tokenizer.ggml.token_type') as number[];
    assert.equal(tokens.length, 4096);
    assert.equal(types.length, 4096);
    const json = JSON.parse(readFileSync(join(MICRO, 'tokenizer.json'), 'utf8'));
    for (const [tok, id] of Object.entries(json.model.vocab as Record<string, number>).slice(0, 500)) assert.equal(tokens[id], tok);
    assert.equal(tokens[0], '<|bos|>');
    assert.equal(types[0], 3, 'special tokens are CONTROL');
    assert.equal(types[300], 1);
    const merges = g.meta.get('tokenizer.ggml.merges') as string[];
    assert.equal(merges.length, json.model.merges.length);
    assert.equal(merges[0], typeof json.model.merges[0] === 'string' ? json.model.merges[0] : json.model.merges[0].join(' '));
    assert.equal(g.meta.get('tokenizer.ggml.bos_token_id'), 0);
    assert.equal(g.meta.get('tokenizer.ggml.eos_token_id'), 1);
    assert.equal(g.meta.get('tokenizer.ggml.padding_token_id'), 2);
    assert.equal(g.meta.get('tokenizer.ggml.add_bos_token'), false);
    assert.match(g.meta.get('tokenizer.chat_template') as string, /add_generation_prompt/);
  });

  it("names tensors as llama.cpp, dims innermost first, data aligned and equal (Q/K rows in llama.cpp's rope order)", () => {
    const names = [...g.tensors.keys()];
    assert.equal(names.length, 1 + 2 * 9 + 1, 'tied embeddings: no output.weight');
    assert.ok(!g.tensors.has('output.weight'));
    assert.deepEqual(g.tensors.get('token_embd.weight')?.dims, [16, 4096]);
    assert.deepEqual(g.tensors.get('blk.0.ffn_gate.weight')?.dims, [16, 48]);
    assert.deepEqual(g.tensors.get('blk.1.ffn_down.weight')?.dims, [48, 16]);
    for (const t of g.tensors.values()) assert.equal((g.dataStart + t.offset) % 32, 0, `${t.name} aligned`);
    const same = (gg: string, hf: string) => assert.deepEqual(g.tensors.get(gg)?.data, lm.model.param(hf).data, gg);
    same('token_embd.weight', 'model.embed_tokens.weight');
    same('output_norm.weight', 'model.norm.weight');
    same('blk.1.attn_norm.weight', 'model.layers.1.input_layernorm.weight');
    same('blk.1.attn_v.weight', 'model.layers.1.self_attn.v_proj.weight');
    same('blk.1.attn_output.weight', 'model.layers.1.self_attn.o_proj.weight');
    same('blk.0.ffn_up.weight', 'model.layers.0.mlp.up_proj.weight');
    // Q/K: llama.cpp row h·D + 2i + j holds HF row h·D + j·D/2 + i (rotate-half → interleaved pairs).
    const D = cfg.headDim;
    const C = cfg.hiddenSize;
    for (const [gg, hf] of [
      ['blk.0.attn_q.weight', 'model.layers.0.self_attn.q_proj.weight'],
      ['blk.1.attn_k.weight', 'model.layers.1.self_attn.k_proj.weight'],
    ]) {
      const ours = g.tensors.get(gg)?.data as Float32Array;
      const theirs = lm.model.param(hf).data;
      assert.notDeepEqual(ours, theirs, 'permuted');
      for (let h = 0; h < 2; h++)
        for (let i = 0; i < D / 2; i++)
          for (let j = 0; j < 2; j++) for (let c = 0; c < C; c++) assert.equal(ours[(h * D + 2 * i + j) * C + c], theirs[(h * D + j * (D / 2) + i) * C + c]);
    }
  });

  it('f16: matrices as F16 (norms F32), values within f16 rounding', () => {
    const f16 = join(tmp, 'micro-f16.gguf');
    exportGguf(MICRO, f16, { dtype: 'F16' });
    const h = parseGguf(f16);
    assert.equal(h.meta.get('general.file_type'), 1);
    assert.equal(h.tensors.get('blk.0.ffn_up.weight')?.type, 1);
    assert.equal(h.tensors.get('blk.0.ffn_norm.weight')?.type, 0);
    const a = h.tensors.get('blk.0.ffn_up.weight')?.data as Float32Array;
    const b = lm.model.param('model.layers.0.mlp.up_proj.weight').data;
    for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i] - b[i]) <= Math.abs(b[i]) * 1e-3 + 1e-7);
  });

  it('merges a LoRA adapter before writing', () => {
    const trained = LanguageModel.load(MICRO);
    applyLora(trained.model, { r: 2, alpha: 4, targetModules: ['v_proj', 'up_proj'] }, new Rng(1));
    const rng = new Rng(2);
    for (const ad of trained.model.lora.values()) for (let i = 0; i < ad.B.size; i++) ad.B.data[i] = rng.normal() * 0.1;
    const adapter = join(tmp, 'adapter');
    saveLora(trained.model, adapter, MICRO);
    mergeLora(trained.model);
    const out = join(tmp, 'merged.gguf');
    exportGguf(MICRO, out, { adapter });
    const m = parseGguf(out);
    const got = m.tensors.get('blk.1.attn_v.weight')?.data as Float32Array;
    const want = trained.model.param('model.layers.1.self_attn.v_proj.weight').data;
    assert.notDeepEqual(want, lm.model.param('model.layers.1.self_attn.v_proj.weight').data, 'the adapter changes the weight');
    for (let i = 0; i < got.length; i++) assert.ok(Math.abs(got[i] - want[i]) < 1e-6);
  });

  // gguf-py comes with scripts/setup.sh --with-llama (CI), or any venv with `pip install gguf`.
  const py = ['venv-llama', 'gguf-venv']
    .map((v) => join(ROOT, '.cache', v, 'bin', 'python'))
    .find((p) => existsSync(p) && spawnSync(p, ['-c', 'import gguf'], { stdio: 'ignore' }).status === 0);
  it("llama.cpp's gguf-py reads the same file", {
    skip: optionalSkip('llama', !py && 'no Python with the gguf package (bash scripts/setup.sh --with-llama, or pip install gguf in .cache/gguf-venv)'),
  }, () => {
    const script = `
import sys, json
from gguf import GGUFReader
r = GGUFReader(sys.argv[1])
f = r.fields
def s(k): return bytes(f[k].parts[f[k].data[0]]).decode()
def n(k): return f[k].parts[f[k].data[0]].tolist()[0]
t = {x.name: (list(map(int, x.shape)), int(x.tensor_type), float(x.data.flatten()[5])) for x in r.tensors}
print(json.dumps({"arch": s("general.architecture"), "blocks": n("llama.block_count"), "ntok": len(f["tokenizer.ggml.tokens"].data), "tensors": t}))
`;
    const r = spawnSync(py as string, ['-c', script, file], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.equal(out.arch, 'llama');
    assert.equal(out.blocks, 2);
    assert.equal(out.ntok, 4096);
    assert.deepEqual(out.tensors['token_embd.weight'][0], [16, 4096]);
    assert.ok(Math.abs(out.tensors['blk.0.ffn_up.weight'][2] - lm.model.param('model.layers.0.mlp.up_proj.weight').data[5]) < 1e-7);
  });
});

/** MAGRPO_LLAMA_PYTHON, else the venvs scripts/setup.sh makes, else python3: the first that imports llama_cpp. */
const llamaPython = [
  process.env.MAGRPO_LLAMA_PYTHON,
  join(ROOT, '.cache', 'venv-llama', 'bin', 'python'),
  join(ROOT, '.cache', 'venv-learner', 'bin', 'python'),
  'python3',
]
  .filter((p): p is string => p !== undefined && (p === 'python3' || existsSync(p)))
  .find((p) => spawnSync(p, ['-c', 'import llama_cpp'], { stdio: 'ignore', timeout: 60_000 }).status === 0);
const noLlama = optionalSkip(
  'llama',
  llamaPython === undefined && 'no Python here imports llama_cpp (bash scripts/setup.sh --with-llama, or pip install llama-cpp-python)',
);
if (noLlama) console.log(`# gguf: skipping the llama.cpp runs: ${noLlama}`);

describe('GGUF export of a GPT-2 model', () => {
  // Every parameter random (biases and norms too, so a misplaced or untransposed tensor shows), and
  // no two sizes equal: V 80, C 32, 3C 96, F 48 (n_inner ≠ 4C), 24 positions. Seed 3's greedy
  // continuation varies, with its top two logits at least 0.28 apart at every step.
  const model = createModel(
    parseModelConfig({ model_type: 'gpt2', vocab_size: 80, n_embd: 32, n_layer: 2, n_head: 4, n_inner: 48, n_positions: 24, layer_norm_epsilon: 1e-5 }),
  );
  const rng = new Rng(3);
  for (const [name, p] of model.params) {
    const [mean, std] = name.includes('.ln_') && name.endsWith('.weight') ? [1, 0.1] : [0, p.shape.length === 1 ? 0.1 : 0.5];
    for (let i = 0; i < p.size; i++) p.data[i] = mean + rng.normal() * std;
  }
  const files = { f32: join(tmp, 'gpt2.gguf'), f16: join(tmp, 'gpt2-f16.gguf') };
  exportModelGguf(model, files.f32, { name: 'tiny-gpt2' });
  exportModelGguf(model, files.f16, { name: 'tiny-gpt2', dtype: 'F16' });
  const g = parseGguf(files.f32);
  const param = (name: string) => model.param(`transformer.${name}`);
  const CONV1D = ['attn.c_attn', 'attn.c_proj', 'mlp.c_fc', 'mlp.c_proj'];

  it("writes llama.cpp's gpt2 metadata: hyperparameters, no rope or RMSNorm keys, vocab_size for the tokenizer-less file", () => {
    assert.equal(g.version, 3);
    assert.equal(g.meta.get('general.architecture'), 'gpt2');
    assert.equal(g.meta.get('general.name'), 'tiny-gpt2');
    assert.equal(g.meta.get('general.file_type'), 0);
    assert.equal(g.meta.get('gpt2.vocab_size'), 80);
    assert.equal(g.meta.get('gpt2.context_length'), 24);
    assert.equal(g.meta.get('gpt2.embedding_length'), 32);
    assert.equal(g.meta.get('gpt2.feed_forward_length'), 48);
    assert.equal(g.meta.get('gpt2.block_count'), 2);
    assert.equal(g.meta.get('gpt2.attention.head_count'), 4);
    assert.ok(Math.abs((g.meta.get('gpt2.attention.layer_norm_epsilon') as number) - 1e-5) < 1e-10);
    assert.equal(g.meta.get('tokenizer.ggml.model'), 'none');
    assert.deepEqual(
      [...g.meta.keys()].filter((k) => /rope|head_count_kv|rms/.test(k)),
      [],
    );
  });

  it('names tensors as convert_hf_to_gguf.py, Conv1D weights transposed to [out, in], the tied head copied to output.weight', () => {
    const block = ['attn_norm', 'attn_qkv', 'attn_output', 'ffn_norm', 'ffn_up', 'ffn_down'].flatMap((t) => [`${t}.weight`, `${t}.bias`]);
    assert.deepEqual(
      [...g.tensors.keys()].sort(),
      [
        'token_embd.weight',
        'output.weight',
        'position_embd.weight',
        ...[0, 1].flatMap((l) => block.map((t) => `blk.${l}.${t}`)),
        'output_norm.weight',
        'output_norm.bias',
      ].sort(),
    );
    const dims = (name: string) => g.tensors.get(name)?.dims;
    assert.deepEqual(dims('token_embd.weight'), [32, 80]);
    assert.deepEqual(dims('output.weight'), [32, 80]);
    assert.deepEqual(dims('position_embd.weight'), [32, 24]);
    assert.deepEqual(dims('blk.0.attn_qkv.weight'), [32, 96], 'llama.cpp wants {n_embd, 3·n_embd}');
    assert.deepEqual(dims('blk.0.attn_qkv.bias'), [96]);
    assert.deepEqual(dims('blk.0.attn_output.weight'), [32, 32]);
    assert.deepEqual(dims('blk.1.ffn_up.weight'), [32, 48]);
    assert.deepEqual(dims('blk.1.ffn_up.bias'), [48]);
    assert.deepEqual(dims('blk.1.ffn_down.weight'), [48, 32]);
    assert.deepEqual(dims('output_norm.bias'), [32]);
    for (const t of g.tensors.values()) assert.equal((g.dataStart + t.offset) % 32, 0, `${t.name} aligned`);

    const data = (name: string) => g.tensors.get(name)?.data;
    assert.deepEqual(data('token_embd.weight'), param('wte.weight').data);
    assert.deepEqual(data('output.weight'), param('wte.weight').data);
    assert.deepEqual(data('position_embd.weight'), param('wpe.weight').data);
    assert.deepEqual(data('output_norm.weight'), param('ln_f.weight').data);
    assert.deepEqual(data('output_norm.bias'), param('ln_f.bias').data);
    const ggufPart = { 'attn.c_attn': 'attn_qkv', 'attn.c_proj': 'attn_output', 'mlp.c_fc': 'ffn_up', 'mlp.c_proj': 'ffn_down' } as Record<string, string>;
    for (const l of [0, 1]) {
      assert.deepEqual(data(`blk.${l}.attn_norm.weight`), param(`h.${l}.ln_1.weight`).data);
      assert.deepEqual(data(`blk.${l}.attn_norm.bias`), param(`h.${l}.ln_1.bias`).data);
      assert.deepEqual(data(`blk.${l}.ffn_norm.weight`), param(`h.${l}.ln_2.weight`).data);
      assert.deepEqual(data(`blk.${l}.ffn_norm.bias`), param(`h.${l}.ln_2.bias`).data);
      for (const part of CONV1D) {
        const w = param(`h.${l}.${part}.weight`); // Conv1D [in, out]
        const [n, m] = w.shape;
        const ours = data(`blk.${l}.${ggufPart[part]}.weight`) as Float32Array;
        for (let i = 0; i < n; i++) for (let o = 0; o < m; o++) assert.equal(ours[o * n + i], w.data[i * m + o], `${part} [${i}, ${o}]`);
        assert.deepEqual(data(`blk.${l}.${ggufPart[part]}.bias`), param(`h.${l}.${part}.bias`).data);
      }
    }
  });

  it('f16: matrices F16; norms, biases and position_embd F32 (as the converter keeps them), values within f16 rounding', () => {
    const h = parseGguf(files.f16);
    assert.equal(h.meta.get('general.file_type'), 1);
    for (const [name, t] of h.tensors) {
      const f16 = t.dims.length === 2 && name !== 'position_embd.weight';
      assert.equal(t.type, f16 ? 1 : 0, name);
      const want = g.tensors.get(name)?.data as Float32Array;
      for (let i = 0; i < want.length; i++) assert.ok(Math.abs(t.data[i] - want[i]) <= Math.abs(want[i]) * 1e-3 + 1e-7, `${name}[${i}]`);
    }
  });

  it('a GPT-2 model folder exports with its byte-level BPE tokenizer', () => {
    const out = join(tmp, 'tiny-gpt2.gguf');
    const r = exportGguf(TINY_GPT2, out);
    assert.deepEqual(r, { tensors: 3 + 2 * 12 + 2, architecture: 'gpt2' }, 'token_embd, output, position_embd, 12 per block, output_norm weight and bias');
    const h = parseGguf(out);
    assert.equal(h.meta.get('general.architecture'), 'gpt2');
    assert.equal(h.meta.get('gpt2.feed_forward_length'), 128, 'n_inner null: 4 · n_embd');
    assert.equal(h.meta.get('tokenizer.ggml.model'), 'gpt2');
    assert.equal((h.meta.get('tokenizer.ggml.tokens') as string[]).length, 288);
  });

  it('llama.cpp runs the files as magrpo’s model: its logits at every position, its greedy tokens', { skip: noLlama }, (t) => {
    const ids = [3, 17, 79, 0, 42, 8, 61];
    const V = 80;
    const N = 8;
    const ours = noGrad(() => model.forward(Int32Array.from(ids), 1, ids.length).data);
    const seq = [...ids];
    let margin = Number.POSITIVE_INFINITY;
    for (let s = 0; s < N; s++) {
      const logits = noGrad(() => model.forward(Int32Array.from(seq), 1, seq.length).data).subarray((seq.length - 1) * V);
      const [top, second] = [...logits].sort((a, b) => b - a);
      margin = Math.min(margin, top - second);
      seq.push(logits.indexOf(top));
    }
    const greedy = seq.slice(ids.length);
    assert.ok(new Set(greedy).size >= 3, `a varied continuation: ${greedy}`);
    assert.ok(margin > 0.1, `top two logits ${margin} apart: llama.cpp's roundings could pick the other`);
    const scale = Math.max(...ours.map(Math.abs));
    for (const [w, tol] of [
      ['f32', 1e-3],
      ['f16', 3e-3],
    ] as const) {
      const theirs = llamaLogits(llamaPython as string, files[w], ids, { newTokens: N, f32Kv: true });
      assert.equal(theirs.logits.length, ids.length);
      let worst = 0;
      for (let t = 0; t < ids.length; t++) {
        assert.equal(theirs.logits[t].length, V);
        for (let v = 0; v < V; v++) worst = Math.max(worst, Math.abs(theirs.logits[t][v] - ours[t * V + v]));
      }
      assert.ok(worst <= tol * scale, `${w}: largest logit difference ${worst}, largest logit ${scale}`);
      assert.deepEqual(theirs.greedy, greedy, w);
      t.diagnostic(`${w}: largest logit difference ${worst.toExponential(2)} (largest logit ${scale.toFixed(2)}); greedy ${greedy}`);
    }
  });

  it('llama.cpp loads a GPT-2 folder exported with its tokenizer, with magrpo’s logits', { skip: noLlama }, (t) => {
    const out = join(tmp, 'tiny-gpt2-tok.gguf');
    exportGguf(TINY_GPT2, out);
    const lm = LanguageModel.load(TINY_GPT2);
    const ids = lm.tokenizer.encode('hello world, hello');
    const V = lm.model.vocabSize;
    const ours = noGrad(() => lm.model.forward(Int32Array.from(ids), 1, ids.length).data);
    const theirs = llamaLogits(llamaPython as string, out, ids, { f32Kv: true });
    const scale = Math.max(...ours.map(Math.abs));
    let worst = 0;
    for (let t = 0; t < ids.length; t++) for (let v = 0; v < V; v++) worst = Math.max(worst, Math.abs(theirs.logits[t][v] - ours[t * V + v]));
    assert.ok(worst <= 1e-3 * scale, `largest logit difference ${worst}, largest logit ${scale}`);
    t.diagnostic(`${ids.length} tokens: largest logit difference ${worst.toExponential(2)} (largest logit ${scale.toFixed(2)})`);
  });
});
