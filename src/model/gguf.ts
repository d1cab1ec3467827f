/**
 * GGUF v3 export, llama.cpp's model format (so trained agents run in llama.cpp and Ollama).
 *
 * File layout (little-endian): "GGUF", version u32 = 3, tensor count u64, metadata count u64;
 * metadata as (key string, type u32, value); tensor infos as (name, n_dims u32, dims u64 ×
 * n_dims innermost first, ggml type u32, data offset u64); zero padding to the alignment (32);
 * then each tensor's data at its offset, every one padded to the alignment. Strings are a u64
 * byte length then UTF-8 bytes.
 *
 * The metadata and tensor names are those llama.cpp's convert_hf_to_gguf.py writes for a HF
 * Llama, Qwen2 or GPT-2 checkpoint with a GPT-2-style byte-level BPE tokenizer, and the weights are
 * rewritten as that script does per architecture:
 * - `llama`: Q and K projection rows are permuted, since HF's rotary embedding pairs dimension i
 *   with i + D/2 of each head and llama.cpp's (non-NeoX) one pairs 2i with 2i + 1;
 * - `qwen2`: written as is (llama.cpp runs it with NeoX-style rope);
 * - `gpt2`: the Conv1D matrices (c_attn, c_proj, c_fc, stored [in, out]) are transposed to
 *   [out, in], and the tied LM head is also written as `output.weight`, a copy of `token_embd`,
 *   as the converter did before llama.cpp #12456 (March 2025): older llama.cpp refuses a GPT-2
 *   file without it, newer ones take either.
 */
import { join } from 'node:path';
import type { GgufArchitecture } from './architecture.js';
import { architectureOf } from './architectures/index.js';
import { writeFileAtomic } from './atomic-write.js';
import type { ModelConfig } from './config.js';
import { CheckpointError } from './errors.js';
import { type GgufValue, ggufPreTokenizer, ggufTensorName, PRE_TOKENIZERS } from './gguf-names.js';
import { loadLora, mergeLora } from './lora.js';
import { LanguageModel } from './pretrained.js';
import { f32ToF16 } from './safetensors.js';
import type { CausalLM } from './transformer.js';

/** GGUF metadata value types (gguf-py GGUFValueType). */
export const GGUF_TYPE = { u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10, i64: 11, f64: 12 } as const;
/** ggml tensor types written here. */
export const GGML_TYPE = { F32: 0, F16: 1 } as const;
/** llama.cpp token types (gguf-py TokenType). */
export const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, userDefined: 4, unused: 5, byte: 6 } as const;
export const GGUF_ALIGNMENT = 32;

export type { GgufValue } from './gguf-names.js';

export interface GgufTensor {
  name: string;
  /** Row-major shape, outermost first (as in PyTorch); written innermost first. */
  shape: number[];
  dtype: 'F32' | 'F16';
  data: Float32Array;
}

/** Little-endian byte writer that grows as needed. */
class Bytes {
  private buf = Buffer.alloc(1 << 16);
  length = 0;
  private room(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const next = Buffer.alloc(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
  u32(v: number): void {
    this.room(4);
    this.buf.writeUInt32LE(v, this.length);
    this.length += 4;
  }
  i32(v: number): void {
    this.room(4);
    this.buf.writeInt32LE(v, this.length);
    this.length += 4;
  }
  f32(v: number): void {
    this.room(4);
    this.buf.writeFloatLE(v, this.length);
    this.length += 4;
  }
  u64(v: number | bigint): void {
    this.room(8);
    this.buf.writeBigUInt64LE(BigInt(v), this.length);
    this.length += 8;
  }
  u8(v: number): void {
    this.room(1);
    this.buf[this.length++] = v;
  }
  string(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.room(b.length);
    b.copy(this.buf, this.length);
    this.length += b.length;
  }
  pad(alignment: number): void {
    const n = (alignment - (this.length % alignment)) % alignment;
    this.room(n);
    this.buf.fill(0, this.length, this.length + n);
    this.length += n;
  }
  bytes(): Buffer {
    return this.buf.subarray(0, this.length);
  }
}

function writeValue(b: Bytes, v: GgufValue): void {
  b.u32(v.type === 'array' ? GGUF_TYPE.array : GGUF_TYPE[v.type]);
  if (v.type === 'array') {
    b.u32(GGUF_TYPE[v.of]);
    b.u64(v.value.length);
    for (const x of v.value) {
      if (v.of === 'string') b.string(x as string);
      else if (v.of === 'i32') b.i32(x as number);
      else if (v.of === 'u32') b.u32(x as number);
      else b.f32(x as number);
    }
  } else if (v.type === 'bool') b.u8(v.value ? 1 : 0);
  else if (v.type === 'string') b.string(v.value);
  else if (v.type === 'u32') b.u32(v.value);
  else if (v.type === 'i32') b.i32(v.value);
  else if (v.type === 'f32') b.f32(v.value);
  else b.u64(v.value);
}

function tensorBytes(t: GgufTensor): Uint8Array {
  const expected = t.shape.reduce((a, b) => a * b, 1);
  if (t.data.length !== expected) throw new Error(`GGUF tensor ${t.name}: ${t.data.length} values for shape [${t.shape}]`);
  if (t.dtype === 'F32') return new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  const h = f32ToF16(t.data);
  return new Uint8Array(h.buffer, h.byteOffset, h.byteLength);
}

/** Writes a GGUF v3 file (atomically). Metadata keys keep the given order; general.alignment is added if absent. */
export function writeGguf(file: string, metadata: [string, GgufValue][], tensors: GgufTensor[], alignment = GGUF_ALIGNMENT): void {
  const meta: [string, GgufValue][] = metadata.some(([k]) => k === 'general.alignment')
    ? metadata
    : [...metadata, ['general.alignment', { type: 'u32', value: alignment }]];
  const head = new Bytes();
  head.u32(0x46554747); // "GGUF"
  head.u32(3);
  head.u64(tensors.length);
  head.u64(meta.length);
  for (const [key, value] of meta) {
    head.string(key);
    writeValue(head, value);
  }
  const datas = tensors.map(tensorBytes);
  let offset = 0;
  for (const [i, t] of tensors.entries()) {
    head.string(t.name);
    head.u32(t.shape.length);
    for (let d = t.shape.length - 1; d >= 0; d--) head.u64(t.shape[d]);
    head.u32(GGML_TYPE[t.dtype]);
    head.u64(offset);
    offset += datas[i].length;
    offset += (alignment - (offset % alignment)) % alignment;
  }
  head.pad(alignment);
  const headBytes = head.bytes();
  writeFileAtomic(file, [
    headBytes,
    ...(function* () {
      for (const d of datas) {
        yield d;
        const pad = (alignment - (d.length % alignment)) % alignment;
        if (pad) yield new Uint8Array(pad);
      }
    })(),
  ]);
}

interface HfTokenizerJson {
  model?: { type?: string; vocab?: Record<string, number>; merges?: (string | [string, string])[] };
  added_tokens?: { id: number; content: string; special?: boolean }[];
  pre_tokenizer?: { type?: string; use_regex?: boolean } | null;
}

/** tokenizer.ggml.* metadata of a byte-level BPE tokenizer.json, padded to the model's vocabulary. */
export function tokenizerMetadata(dir: string, lm: LanguageModel): [string, GgufValue][] {
  const file = join(dir, 'tokenizer.json');
  const json = JSON.parse(lm.tokenizer.fileText('tokenizer.json') ?? '{}') as HfTokenizerJson;
  if (json.model?.type !== 'BPE' || !json.model.vocab)
    throw new CheckpointError(
      'UNSUPPORTED_FEATURE',
      file,
      `GGUF export handles byte-level BPE tokenizers; this one is ${json.model?.type ?? 'unknown'}`,
      'export a model with a GPT-2-style BPE tokenizer',
    );
  const pre = ggufPreTokenizer(json.pre_tokenizer);
  if (pre === null)
    throw new CheckpointError(
      'UNSUPPORTED_FEATURE',
      file,
      `GGUF export knows the pre-tokenizers llama.cpp names ${Object.keys(PRE_TOKENIZERS).join(', ')}; this one (${JSON.stringify(json.pre_tokenizer?.type ?? null)}) is none of them`,
      "convert it with llama.cpp's convert_hf_to_gguf.py instead",
    );
  const V = lm.model.vocabSize;
  const tokens: string[] = Array.from({ length: V }, (_, i) => `[PAD${i}]`);
  const types: number[] = new Array(V).fill(TOKEN_TYPE.unused);
  for (const [tok, id] of Object.entries(json.model.vocab)) {
    if (id < V) {
      tokens[id] = tok;
      types[id] = TOKEN_TYPE.normal;
    }
  }
  for (const t of json.added_tokens ?? []) {
    if (t.id < V) {
      tokens[t.id] = t.content;
      types[t.id] = t.special ? TOKEN_TYPE.control : TOKEN_TYPE.userDefined;
    }
  }
  const merges = (json.model.merges ?? []).map((m) => (typeof m === 'string' ? m : m.join(' ')));
  const tk = lm.tokenizer;
  const meta: [string, GgufValue][] = [
    ['tokenizer.ggml.model', { type: 'string', value: 'gpt2' }],
    ['tokenizer.ggml.pre', { type: 'string', value: pre }],
    ['tokenizer.ggml.tokens', { type: 'array', of: 'string', value: tokens }],
    ['tokenizer.ggml.token_type', { type: 'array', of: 'i32', value: types }],
    ['tokenizer.ggml.merges', { type: 'array', of: 'string', value: merges }],
    ['tokenizer.ggml.eos_token_id', { type: 'u32', value: tk.eosId }],
    ['tokenizer.ggml.padding_token_id', { type: 'u32', value: tk.padId }],
  ];
  if (tk.bosId !== null) meta.push(['tokenizer.ggml.bos_token_id', { type: 'u32', value: tk.bosId }]);
  const addsBos = tk.bosId !== null && tk.encode('a')[0] === tk.bosId;
  meta.push(['tokenizer.ggml.add_bos_token', { type: 'bool', value: addsBos }], ['tokenizer.ggml.add_eos_token', { type: 'bool', value: false }]);
  const template = chatTemplateOf(lm);
  if (template) meta.push(['tokenizer.chat_template', { type: 'string', value: template }]);
  return meta;
}

function chatTemplateOf(lm: LanguageModel): string | null {
  const jinja = lm.tokenizer.fileText('chat_template.jinja');
  if (jinja !== undefined) return jinja;
  try {
    const cfg = JSON.parse(lm.tokenizer.fileText('tokenizer_config.json') ?? '{}') as { chat_template?: unknown };
    return typeof cfg.chat_template === 'string' ? cfg.chat_template : null;
  } catch {
    return null;
  }
}

export interface GgufExportOptions {
  /** A PEFT LoRA folder merged into the weights first. */
  adapter?: string;
  /** Matrices in F16 (norms and biases stay F32, as llama.cpp wants); default F32. */
  dtype?: 'F32' | 'F16';
  /** general.name (default: the folder's name). */
  name?: string;
}

/**
 * Why llama.cpp cannot take this model through this exporter, or null when it can (the
 * architecture entry's `gguf.unsupported`: e.g. a sliding window, or biases llama.cpp's `llama`
 * has no tensors for).
 */
export function ggufUnsupported(cfg: ModelConfig): string | null {
  return architectureOf(cfg).gguf.unsupported(cfg)?.why ?? null;
}

export type { GgufArchitecture };

/**
 * The GGUF metadata (architecture, name, file type, hyperparameters; no tokenizer) and tensors
 * of a Llama-family or GPT-2 model: llama.cpp tensor names and layouts (llamaCppLayout), GPT-2's
 * tied head also as `output.weight`, matrices in `dtype` (norms, biases and GPT-2's position
 * embedding stay F32, as the converter keeps them). `source` names the model in errors.
 */
export function ggufOfModel(
  model: CausalLM,
  opts: { dtype?: 'F32' | 'F16'; name: string; source: string },
): { architecture: GgufArchitecture; metadata: [string, GgufValue][]; tensors: GgufTensor[] } {
  const cfg = model.config;
  const entry = architectureOf(cfg);
  const no = entry.gguf.unsupported(cfg);
  if (no !== null) throw new CheckpointError('UNSUPPORTED_FEATURE', opts.source, no.why, no.fix);
  const arch = entry.gguf.nameOf(cfg);
  const dtype = opts.dtype ?? 'F32';
  const metadata: [string, GgufValue][] = [
    ['general.architecture', { type: 'string', value: arch }],
    ['general.name', { type: 'string', value: opts.name }],
    ['general.file_type', { type: 'u32', value: dtype === 'F16' ? 1 : 0 }],
    ...entry.gguf.hyperparameters(arch, cfg),
  ];
  const tensors: GgufTensor[] = [];
  for (const [hf, p] of model.params) {
    const name = ggufTensorName(hf, entry.gguf.tensorNames);
    if (name === null)
      throw new CheckpointError('UNSUPPORTED_FEATURE', opts.source, `tensor "${hf}" has no llama.cpp name`, 'export a plain Llama, Qwen2 or GPT-2 model');
    const { shape, data } = entry.gguf.toGguf(arch, cfg, name, [...p.shape], Float32Array.from(p.data));
    const f16 = dtype === 'F16' && shape.length === 2 && name !== 'position_embd.weight';
    tensors.push({ name, shape, dtype: f16 ? 'F16' : 'F32', data });
    // A tied head is written again as output.weight where the family's readers want it (GPT-2).
    if (name === 'token_embd.weight' && entry.gguf.droppable.includes('output.weight'))
      tensors.push({ name: 'output.weight', shape, dtype: f16 ? 'F16' : 'F32', data });
  }
  return { architecture: arch, metadata, tensors };
}

/** Writes the model folder `dir` (plus an optional merged adapter) as a GGUF file. Returns the tensor count. */
export function exportGguf(dir: string, out: string, opts: GgufExportOptions = {}): { tensors: number; architecture: GgufArchitecture } {
  const lm = LanguageModel.load(dir);
  const configFile = lm.source.endsWith('.gguf') ? lm.source : join(dir, 'config.json');
  const no = architectureOf(lm.model.config).gguf.unsupported(lm.model.config);
  if (no !== null) throw new CheckpointError('UNSUPPORTED_FEATURE', configFile, no.why, no.fix);
  if (opts.adapter) {
    loadLora(lm.model, opts.adapter);
    mergeLora(lm.model);
  }
  const name = opts.name ?? (dir.replace(/\/+$/, '').split('/').pop() || 'model');
  const g = ggufOfModel(lm.model, { dtype: opts.dtype, name, source: configFile });
  writeGguf(out, [...g.metadata, ...tokenizerMetadata(dir, lm)], g.tensors);
  return { tensors: g.tensors.length, architecture: g.architecture };
}

/**
 * Writes a model that has no tokenizer (token ids in, logits out, as `magrpo bench`'s random
 * models) as a GGUF file: tokenizer.ggml.model "none", for which llama.cpp makes
 * `<arch>.vocab_size` placeholder tokens, so any id below the vocabulary size is valid input.
 */
export function exportModelGguf(
  model: CausalLM,
  out: string,
  opts: { dtype?: 'F32' | 'F16'; name: string },
): { tensors: number; architecture: GgufArchitecture } {
  const g = ggufOfModel(model, { ...opts, source: out });
  writeGguf(out, [...g.metadata, ['tokenizer.ggml.model', { type: 'string', value: 'none' }]], g.tensors);
  return { tensors: g.tensors.length, architecture: g.architecture };
}
