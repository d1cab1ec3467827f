/**
 * Safetensors reading and writing (https://github.com/huggingface/safetensors, "Format").
 *
 * File layout: [u64 LE header length N][N bytes of JSON header, space padded][tensor bytes].
 * The header maps each tensor name to {dtype, shape, data_offsets: [begin, end]}, offsets
 * relative to the first byte after the header, plus an optional "__metadata__" string map.
 * Floats come back as Float32Array and integers as Int32Array: that is all the engine computes in.
 * Typed-array views assume a little-endian host, as every platform Node supports is.
 */

import { closeSync, existsSync, fstatSync, openSync, readFileSync, readSync } from 'node:fs';
import { basename, join } from 'node:path';
import { writeFileAtomic } from './atomic-write.js';
import { CheckpointError } from './errors.js';
import { f16ToF32 } from './half.js';

export type FloatDtype = 'F64' | 'F32' | 'F16' | 'BF16';
export type IntDtype = 'I64' | 'I32' | 'I16' | 'I8' | 'U8' | 'BOOL';
export type Dtype = FloatDtype | IntDtype;

/** A tensor as read: float dtypes widened/narrowed to f32, integer dtypes to i32. */
export type Tensor = { dtype: FloatDtype; shape: number[]; data: Float32Array } | { dtype: IntDtype; shape: number[]; data: Int32Array };

/** A tensor to write: `data` is always f32 (or i32); `dtype` is how it is stored on disk. */
export type WritableTensor = { dtype: 'F32' | 'F16' | 'BF16'; shape: number[]; data: Float32Array } | { dtype: 'I32'; shape: number[]; data: Int32Array };

/** Where one tensor lives in the file, as declared by the (validated) header. */
export interface TensorEntry {
  dtype: Dtype;
  shape: number[];
  /** Absolute byte position of the tensor's first byte in the file. */
  offset: number;
  byteLength: number;
}

export interface SafetensorsHeader {
  tensors: Map<string, TensorEntry>;
  metadata: Record<string, string>;
}

const DTYPE_BYTES: Record<Dtype, number> = { F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, BOOL: 1 };
const WRITE_DTYPE_BYTES: Record<WritableTensor['dtype'], number> = { F32: 4, F16: 2, BF16: 2, I32: 4 };
/** Same cap as the reference Rust reader: a larger "header" means the file is not safetensors. */
const MAX_HEADER_BYTES = 100_000_000;
/** readSync/writeSync take an int32 length, so big tensors move in chunks. */
const IO_CHUNK = 1 << 30;

const REFETCH = 're-download or re-export the checkpoint';

export function readSafetensorsHeader(file: string): SafetensorsHeader {
  const fd = openForRead(file);
  try {
    return parseHeader(fd, file);
  } finally {
    closeSync(fd);
  }
}

export function readSafetensors(file: string): Map<string, Tensor> {
  const fd = openForRead(file);
  try {
    const header = parseHeader(fd, file);
    const tensors = new Map<string, Tensor>();
    for (const [name, entry] of header.tensors) {
      // A fresh Uint8Array starts at byte 0 of its own buffer, so every typed view over it is aligned.
      const bytes = new Uint8Array(entry.byteLength);
      readExactly(fd, bytes, entry.offset, file);
      tensors.set(name, decodeTensor(entry, bytes, name, file));
    }
    return tensors;
  } finally {
    closeSync(fd);
  }
}

/**
 * Reads `dir/model.safetensors`, or every shard named by `dir/model.safetensors.index.json`
 * (whose `weight_map` maps tensor name -> shard file name), into one map.
 */
export function readShardedSafetensors(dir: string): Map<string, Tensor> {
  const single = join(dir, 'model.safetensors');
  if (existsSync(single)) return readSafetensors(single);
  const indexFile = join(dir, 'model.safetensors.index.json');
  if (!existsSync(indexFile)) throw noWeights(dir);
  const weightMap = readWeightMap(indexFile);
  const tensors = new Map<string, Tensor>();
  const shardOf = new Map<string, string>();
  for (const shard of [...new Set(Object.values(weightMap))].sort()) {
    const shardFile = join(dir, shard);
    if (!existsSync(shardFile)) {
      throw new CheckpointError('FILE_MISSING', shardFile, `shard listed in ${indexFile} does not exist`, `download ${shard} into ${dir}`);
    }
    for (const [name, tensor] of readSafetensors(shardFile)) {
      if (tensors.has(name)) {
        throw new CheckpointError('CORRUPT', shardFile, `tensor "${name}" also appears in another shard`, REFETCH);
      }
      tensors.set(name, tensor);
      shardOf.set(name, shard);
    }
  }
  for (const [name, shard] of Object.entries(weightMap)) {
    if (shardOf.get(name) !== shard) {
      throw new CheckpointError('MISSING_TENSOR', join(dir, shard), `tensor "${name}" is listed in ${indexFile} but not stored in this shard`, REFETCH);
    }
  }
  return tensors;
}

/**
 * The headers of `dir/model.safetensors` or of every shard its index names, without reading any
 * tensor data: what a loader checks against the config before allocating parameters.
 */
export function readShardedSafetensorsHeader(dir: string): Map<string, TensorEntry & { file: string }> {
  const single = join(dir, 'model.safetensors');
  const indexFile = join(dir, 'model.safetensors.index.json');
  if (!existsSync(single) && !existsSync(indexFile)) throw noWeights(dir);
  const files = existsSync(single) ? [single] : [...new Set(Object.values(readWeightMap(indexFile)))].sort().map((s) => join(dir, s));
  const out = new Map<string, TensorEntry & { file: string }>();
  for (const file of files) {
    if (!existsSync(file))
      throw new CheckpointError('FILE_MISSING', file, `shard listed in ${indexFile} does not exist`, `download ${basename(file)} into ${dir}`);
    for (const [name, entry] of readSafetensorsHeader(file).tensors) if (!out.has(name)) out.set(name, { ...entry, file });
  }
  return out;
}

/**
 * Writes tensors with keys sorted and the header padded to 8 bytes. Atomic: a failure at any
 * point (bad tensor, full disk) leaves an existing `file` untouched and no temp file behind.
 */
export function writeSafetensors(
  file: string,
  tensors: Record<string, WritableTensor> | Map<string, WritableTensor>,
  metadata: Record<string, string> = {},
): void {
  const entries = [...(tensors instanceof Map ? tensors : Object.entries(tensors))].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const header = encodeHeader(file, entries, metadata);
  writeFileAtomic(file, tensorChunks(file, header, entries));
}

function noWeights(dir: string): CheckpointError {
  const fix = existsSync(join(dir, 'pytorch_model.bin'))
    ? 'this folder only has pytorch_model.bin; re-save the model with save_pretrained(dir, safe_serialization=True)'
    : 'point to a Hugging Face model folder that contains safetensors weights';
  return new CheckpointError('FILE_MISSING', join(dir, 'model.safetensors'), 'neither model.safetensors nor model.safetensors.index.json exists', fix);
}

// ---------------------------------------------------------------------------------------------
// dtype conversions (exported for the engine and for tests)

/** bf16 is the top half of an f32, so widening is a 16-bit shift. */
export function bf16ToF32(bits: Uint16Array): Float32Array {
  const out = new Uint32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = bits[i] << 16;
  return new Float32Array(out.buffer);
}

/** Round-to-nearest-even on the dropped 16 bits; NaN stays NaN (quiet) instead of rounding to inf. */
export function f32ToBf16(values: Float32Array): Uint16Array {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < bits.length; i++) {
    const b = bits[i];
    out[i] = (b & 0x7fffffff) > 0x7f800000 ? (b >>> 16) | 0x40 : (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
  }
  return out;
}

export { f16ToF32 };

/** Round-to-nearest-even; overflow -> ±inf, underflow -> f16 subnormals or ±0, NaN stays quiet NaN. */
export function f32ToF16(values: Float32Array): Uint16Array {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < bits.length; i++) out[i] = f32BitsToF16Bits(bits[i]);
  return out;
}

function f32BitsToF16Bits(b: number): number {
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  let mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 112; // rebias 127 -> 15
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign; // below half the smallest subnormal
    mant |= 0x800000;
    const shift = 14 - e; // 13 mantissa bits dropped plus the denormalising shift
    const half = 1 << (shift - 1);
    return sign | ((mant + half - 1 + ((mant >>> shift) & 1)) >>> shift);
  }
  // A carry out of the mantissa bumps the exponent, which is exactly right (up to inf).
  return sign | ((e << 10) + ((mant + 0xfff + ((mant >>> 13) & 1)) >>> 13));
}

// ---------------------------------------------------------------------------------------------
// reading internals

function openForRead(file: string): number {
  if (!existsSync(file)) throw new CheckpointError('FILE_MISSING', file, 'file does not exist', 'check the model folder path');
  return openSync(file, 'r');
}

function readExactly(fd: number, into: Uint8Array, position: number, file: string): void {
  for (let done = 0; done < into.length; ) {
    const n = readSync(fd, into, done, Math.min(into.length - done, IO_CHUNK), position + done);
    if (n === 0) throw new CheckpointError('TRUNCATED', file, `file ended at byte ${position + done} while reading`, REFETCH);
    done += n;
  }
}

function parseHeader(fd: number, file: string): SafetensorsHeader {
  const size = fstatSync(fd).size;
  if (size < 8) throw new CheckpointError('TRUNCATED', file, `file is ${size} bytes, too short for the 8-byte header length`, REFETCH);
  const prefix = new Uint8Array(8);
  readExactly(fd, prefix, 0, file);
  const view = new DataView(prefix.buffer);
  const headerLength = view.getUint32(4, true) * 2 ** 32 + view.getUint32(0, true);
  if (headerLength < 2 || headerLength > MAX_HEADER_BYTES) {
    throw new CheckpointError(
      'CORRUPT',
      file,
      `header length ${headerLength} is not between 2 and ${MAX_HEADER_BYTES} bytes; this is not a safetensors file`,
      REFETCH,
    );
  }
  const dataStart = 8 + headerLength;
  if (dataStart > size) {
    throw new CheckpointError('TRUNCATED', file, `header needs ${dataStart} bytes but the file has ${size}`, REFETCH);
  }
  const headerBytes = new Uint8Array(headerLength);
  readExactly(fd, headerBytes, 8, file);
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(headerBytes));
  } catch (err) {
    throw new CheckpointError('CORRUPT', file, `header is not valid UTF-8 JSON (${(err as Error).message})`, REFETCH);
  }
  if (!isRecord(json)) throw new CheckpointError('CORRUPT', file, 'header is not a JSON object', REFETCH);

  const metadata = parseMetadata(json.__metadata__, file);
  const spans: { name: string; begin: number; end: number }[] = [];
  const tensors = new Map<string, TensorEntry>();
  for (const name of Object.keys(json).sort()) {
    if (name === '__metadata__') continue;
    const { entry, begin, end } = parseEntry(name, json[name], dataStart, file);
    tensors.set(name, entry);
    spans.push({ name, begin, end });
  }

  // Tensors must tile the data area exactly: no gaps, no overlaps, nothing past the end.
  spans.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let cursor = 0;
  for (const { name, begin, end } of spans) {
    if (begin !== cursor) {
      const what = begin < cursor ? 'overlaps the previous tensor' : 'leaves a gap after the previous tensor';
      throw new CheckpointError('CORRUPT', file, `tensor "${name}" data_offsets [${begin}, ${end}] ${what} (expected to start at ${cursor})`, REFETCH);
    }
    cursor = end;
  }
  const expectedSize = dataStart + cursor;
  if (size < expectedSize) {
    throw new CheckpointError('TRUNCATED', file, `header describes ${expectedSize} bytes but the file has ${size}`, REFETCH);
  }
  if (size > expectedSize) {
    throw new CheckpointError('CORRUPT', file, `file has ${size - expectedSize} bytes after the last tensor`, REFETCH);
  }
  return { tensors, metadata };
}

function parseEntry(name: string, raw: unknown, dataStart: number, file: string): { entry: TensorEntry; begin: number; end: number } {
  const bad = (problem: string) => new CheckpointError('CORRUPT', file, `tensor "${name}": ${problem}`, REFETCH);
  if (!isRecord(raw)) throw bad('header entry is not an object');
  const { dtype, shape, data_offsets: offsets } = raw;
  if (typeof dtype !== 'string') throw bad('dtype is missing');
  if (!(dtype in DTYPE_BYTES)) {
    throw new CheckpointError(
      'UNSUPPORTED_DTYPE',
      file,
      `tensor "${name}" has dtype ${dtype}; supported: ${Object.keys(DTYPE_BYTES).join(', ')}`,
      're-save the checkpoint in float32, float16 or bfloat16',
    );
  }
  if (!Array.isArray(shape) || !shape.every(isCount)) throw bad(`shape ${JSON.stringify(shape)} is not a list of non-negative integers`);
  if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every(isCount) || offsets[0] > offsets[1]) {
    throw bad(`data_offsets ${JSON.stringify(offsets)} is not [begin, end] with 0 <= begin <= end`);
  }
  const [begin, end] = offsets as [number, number];
  const byteLength = numel(shape) * DTYPE_BYTES[dtype as Dtype];
  if (end - begin !== byteLength) {
    throw bad(`data_offsets [${begin}, ${end}] span ${end - begin} bytes but ${dtype} shape [${shape.join(', ')}] needs ${byteLength}`);
  }
  return { entry: { dtype: dtype as Dtype, shape: [...shape], offset: dataStart + begin, byteLength }, begin, end };
}

function parseMetadata(raw: unknown, file: string): Record<string, string> {
  if (raw === undefined) return {};
  if (!isRecord(raw) || !Object.values(raw).every((v) => typeof v === 'string')) {
    throw new CheckpointError('CORRUPT', file, '__metadata__ is not a map of strings to strings', REFETCH);
  }
  return { ...(raw as Record<string, string>) };
}

function decodeTensor(entry: TensorEntry, bytes: Uint8Array, name: string, file: string): Tensor {
  const { shape } = entry;
  const buf = bytes.buffer;
  switch (entry.dtype) {
    case 'F32':
      return { dtype: 'F32', shape, data: new Float32Array(buf) };
    case 'F64':
      return { dtype: 'F64', shape, data: Float32Array.from(new Float64Array(buf)) };
    case 'F16':
      return { dtype: 'F16', shape, data: f16ToF32(new Uint16Array(buf)) };
    case 'BF16':
      return { dtype: 'BF16', shape, data: bf16ToF32(new Uint16Array(buf)) };
    case 'I64':
      return { dtype: 'I64', shape, data: i64ToI32(new Int32Array(buf), name, file) };
    case 'I32':
      return { dtype: 'I32', shape, data: new Int32Array(buf) };
    case 'I16':
      return { dtype: 'I16', shape, data: Int32Array.from(new Int16Array(buf)) };
    case 'I8':
      return { dtype: 'I8', shape, data: Int32Array.from(new Int8Array(buf)) };
    case 'U8':
    case 'BOOL':
      return { dtype: entry.dtype, shape, data: Int32Array.from(bytes) };
  }
}

/** `words` holds (low, high) int32 pairs; a value fits in int32 iff high is low's sign extension. */
function i64ToI32(words: Int32Array, name: string, file: string): Int32Array {
  const out = new Int32Array(words.length / 2);
  for (let i = 0; i < out.length; i++) {
    const low = words[2 * i];
    if (words[2 * i + 1] !== low >> 31) {
      const value = (BigInt(words[2 * i + 1]) << 32n) | BigInt(low >>> 0);
      throw new CheckpointError(
        'UNSUPPORTED_DTYPE',
        file,
        `tensor "${name}" (I64) element ${i} = ${value} does not fit in int32`,
        'store this tensor as I32 values within ±2^31',
      );
    }
    out[i] = low;
  }
  return out;
}

function readWeightMap(indexFile: string): Record<string, string> {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(indexFile, 'utf8'));
  } catch (err) {
    throw new CheckpointError('CORRUPT', indexFile, `not valid JSON (${(err as Error).message})`, REFETCH);
  }
  const weightMap = isRecord(json) ? json.weight_map : undefined;
  if (!isRecord(weightMap) || !Object.values(weightMap).every((v) => typeof v === 'string' && v === basename(v) && v !== '..')) {
    throw new CheckpointError('CORRUPT', indexFile, '"weight_map" is not a map of tensor names to shard file names in the same folder', REFETCH);
  }
  return weightMap as Record<string, string>;
}

// ---------------------------------------------------------------------------------------------
// writing internals

function encodeHeader(file: string, entries: [string, WritableTensor][], metadata: Record<string, string>): Uint8Array {
  if (!Object.values(metadata).every((v) => typeof v === 'string')) {
    throw new CheckpointError('BAD_CONFIG', file, 'metadata values must be strings', 'stringify metadata values before saving');
  }
  // Built by hand because JSON.stringify would move integer-like tensor names to the front.
  const fields = Object.keys(metadata).length > 0 ? [`"__metadata__":${JSON.stringify(metadata)}`] : [];
  let offset = 0;
  for (const [name, { dtype, shape }] of entries) {
    const bad = (problem: string) => new CheckpointError('SHAPE_MISMATCH', file, `tensor "${name}": ${problem}`, 'fix the tensor before saving');
    if (name === '' || name === '__metadata__') throw bad('this name is reserved or empty');
    if (!(dtype in WRITE_DTYPE_BYTES)) throw bad(`cannot write dtype ${dtype}; writable: ${Object.keys(WRITE_DTYPE_BYTES).join(', ')}`);
    if (!Array.isArray(shape) || !shape.every(isCount)) throw bad(`shape ${JSON.stringify(shape)} is not a list of non-negative integers`);
    const end = offset + numel(shape) * WRITE_DTYPE_BYTES[dtype];
    fields.push(`${JSON.stringify(name)}:${JSON.stringify({ dtype, shape, data_offsets: [offset, end] })}`);
    offset = end;
  }
  const json = Buffer.from(`{${fields.join(',')}}`, 'utf8');
  const padded = Math.ceil(json.length / 8) * 8;
  const out = new Uint8Array(8 + padded).fill(0x20, 8 + json.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(padded), true);
  out.set(json, 8);
  return out;
}

/** Yields the header then each tensor's bytes; data is checked against its shape as it is reached. */
function* tensorChunks(file: string, header: Uint8Array, entries: [string, WritableTensor][]): Generator<Uint8Array> {
  yield header;
  for (const [name, tensor] of entries) {
    const expected = numel(tensor.shape);
    const wantInt = tensor.dtype === 'I32';
    if (wantInt ? !(tensor.data instanceof Int32Array) : !(tensor.data instanceof Float32Array)) {
      throw new CheckpointError(
        'SHAPE_MISMATCH',
        file,
        `tensor "${name}": ${tensor.dtype} data must be a ${wantInt ? 'Int32Array' : 'Float32Array'}`,
        'pass the matching typed array',
      );
    }
    if (tensor.data.length !== expected) {
      throw new CheckpointError(
        'SHAPE_MISMATCH',
        file,
        `tensor "${name}": shape [${tensor.shape.join(', ')}] needs ${expected} values but data has ${tensor.data.length}`,
        'fix the tensor before saving',
      );
    }
    yield encodeData(tensor);
  }
}

function encodeData(tensor: WritableTensor): Uint8Array {
  switch (tensor.dtype) {
    case 'F16':
      return bytesOf(f32ToF16(tensor.data));
    case 'BF16':
      return bytesOf(f32ToBf16(tensor.data));
    case 'F32':
    case 'I32':
      return bytesOf(tensor.data);
  }
}

function bytesOf(a: Float32Array | Int32Array | Uint16Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

function numel(shape: number[]): number {
  return shape.reduce((n, d) => n * d, 1);
}

function isCount(x: unknown): x is number {
  return Number.isSafeInteger(x) && (x as number) >= 0;
}

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}
