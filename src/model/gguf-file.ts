/**
 * Reading GGUF files (llama.cpp's model format), v2 and v3: the header (metadata and tensor
 * infos) and each tensor's data, dequantized to fp32 by gguf-quants.ts.
 *
 * Layout (little-endian): "GGUF", version u32, tensor count u64, metadata count u64; metadata as
 * (key string, value type u32, value); tensor infos as (name, n_dims u32, dims u64 × n_dims
 * innermost first, ggml type u32, offset u64); padding to `general.alignment` (default 32); then
 * the tensor data, each tensor at its offset from the start of that section. Strings are a u64
 * byte length then UTF-8. Version 1 (u32 counts and lengths) predates every file in use and is
 * refused.
 *
 * Why not @huggingface/gguf for the header: it is async-only (model loading here is synchronous,
 * also in agent worker threads) and reads past the end of a truncated file as zeros instead of
 * failing. The test suite checks this reader's metadata and tensor infos against it.
 *
 * Every problem is a CheckpointError naming the file (and the tensor or key): a truncated file,
 * a wrong magic, an unknown value or tensor type, a tensor whose bytes run past the file's end.
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { CheckpointError } from './errors.js';
import { dequantize, GGML_TYPES, ggmlByteSize, ggmlTypeName } from './gguf-quants.js';

/** A metadata value as stored; u64/i64 become numbers when safe, else bigint. */
export type GgufScalar = number | bigint | boolean | string;
export type GgufMetaValue = GgufScalar | GgufScalar[];

export interface GgufTensorInfo {
  name: string;
  /** Outermost dimension first (PyTorch order): a [rows, cols] matrix is stored as ne = [cols, rows]. */
  shape: number[];
  /** ggml type id (gguf-quants.ts GGML_TYPES). */
  type: number;
  /** Absolute byte offset of the data in the file. */
  offset: number;
  /** Bytes of data (from the type's block size and the element count). */
  nbytes: number;
  /** Elements in the tensor. */
  numel: number;
}

export interface GgufFile {
  file: string;
  version: 2 | 3;
  alignment: number;
  metadata: Map<string, GgufMetaValue>;
  tensors: GgufTensorInfo[];
  /** Where the tensor data section starts. */
  dataOffset: number;
  fileSize: number;
}

const MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
/** Metadata value types (gguf-py GGUFValueType). */
const VALUE_TYPE_NAMES = ['u8', 'i8', 'u16', 'i16', 'u32', 'i32', 'f32', 'bool', 'string', 'array', 'u64', 'i64', 'f64'] as const;
/** Upper bounds that no real file reaches, so a corrupt count fails fast instead of allocating gigabytes. */
const LIMITS = { tensors: 1 << 20, metadata: 1 << 20, string: 1 << 28, array: 1 << 28, dims: 8 };

/** Buffered sequential reader over a file descriptor; every read past the end is a TRUNCATED error. */
class HeaderReader {
  private buf = Buffer.alloc(1 << 20);
  private start = 0; // file offset of buf[0]
  private end = 0; // valid bytes in buf
  pos = 0; // file offset of the next read

  constructor(
    private readonly fd: number,
    readonly size: number,
    private readonly file: string,
    public context = 'the header',
  ) {}

  private need(n: number): number {
    if (this.pos + n > this.size)
      throw new CheckpointError(
        'TRUNCATED',
        this.file,
        `the file ends inside ${this.context} (byte ${this.pos} + ${n} > ${this.size})`,
        'the file is incomplete: download or convert it again',
      );
    if (this.pos < this.start || this.pos + n > this.start + this.end) {
      if (n > this.buf.length) this.buf = Buffer.alloc(n);
      this.start = this.pos;
      this.end = readSync(this.fd, this.buf, 0, Math.min(this.buf.length, this.size - this.pos), this.pos);
    }
    const at = this.pos - this.start;
    this.pos += n;
    return at;
  }
  u8 = () => this.buf.readUInt8(this.need(1));
  i8 = () => this.buf.readInt8(this.need(1));
  u16 = () => this.buf.readUInt16LE(this.need(2));
  i16 = () => this.buf.readInt16LE(this.need(2));
  u32 = () => this.buf.readUInt32LE(this.need(4));
  i32 = () => this.buf.readInt32LE(this.need(4));
  f32 = () => this.buf.readFloatLE(this.need(4));
  f64 = () => this.buf.readDoubleLE(this.need(8));
  u64 = (): number | bigint => small(this.buf.readBigUInt64LE(this.need(8)));
  i64 = (): number | bigint => small(this.buf.readBigInt64LE(this.need(8)));
  /** A u64 that must be a safe integer below `max` (a count, a length, an offset). */
  count(max: number, what: string): number {
    const v = this.u64();
    if (typeof v === 'bigint' || v > max)
      throw new CheckpointError(
        'CORRUPT',
        this.file,
        `${what} is ${v}, beyond any real file (at byte ${this.pos - 8})`,
        'the file is damaged or not a GGUF file',
      );
    return v;
  }
  string(): string {
    const n = this.count(LIMITS.string, `a string length in ${this.context}`);
    const at = this.need(n);
    return this.buf.toString('utf8', at, at + n);
  }
}

function small(v: bigint): number | bigint {
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}

function readScalar(r: HeaderReader, type: number, file: string, key: string): GgufScalar {
  switch (type) {
    case 0:
      return r.u8();
    case 1:
      return r.i8();
    case 2:
      return r.u16();
    case 3:
      return r.i16();
    case 4:
      return r.u32();
    case 5:
      return r.i32();
    case 6:
      return r.f32();
    case 7: {
      const b = r.u8();
      if (b > 1) throw new CheckpointError('CORRUPT', file, `metadata "${key}": a bool holds ${b}`, 'the file is damaged');
      return b === 1;
    }
    case 8:
      return r.string();
    case 10:
      return r.u64();
    case 11:
      return r.i64();
    case 12:
      return r.f64();
    default:
      throw new CheckpointError(
        'CORRUPT',
        file,
        `metadata "${key}" has value type ${type}, which GGUF does not define`,
        'the file is damaged or from a newer GGUF version',
      );
  }
}

function readValue(r: HeaderReader, file: string, key: string): GgufMetaValue {
  const type = r.u32();
  if (type !== 9) return readScalar(r, type, file, key);
  const itemType = r.u32();
  if (itemType === 9)
    throw new CheckpointError('UNSUPPORTED_FEATURE', file, `metadata "${key}" is an array of arrays`, 'nested arrays are not used by any model metadata');
  const n = r.count(LIMITS.array, `the length of array "${key}"`);
  const out: GgufScalar[] = new Array(n);
  for (let i = 0; i < n; i++) out[i] = readScalar(r, itemType, file, key);
  return out;
}

/** Whether `file` starts with the GGUF magic (4 bytes read; false for anything unreadable). */
export function hasGgufMagic(file: string): boolean {
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    const b = Buffer.alloc(4);
    return readSync(fd, b, 0, 4, 0) === 4 && b.readUInt32LE(0) === MAGIC;
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Reads and checks a GGUF file's header; the tensor data is read later, tensor by tensor. */
export function readGgufHeader(file: string): GgufFile {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (e) {
    throw new CheckpointError(
      'FILE_MISSING',
      file,
      `cannot open (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
      'check the path to the .gguf file',
    );
  }
  try {
    const size = fstatSync(fd).size;
    const r = new HeaderReader(fd, size, file);
    if (size < 4 || r.u32() !== MAGIC)
      throw new CheckpointError(
        'CORRUPT',
        file,
        'does not start with the GGUF magic "GGUF"',
        'give a GGUF model file (llama.cpp format) or a Hugging Face model folder',
      );
    const version = r.u32();
    if (version !== 2 && version !== 3)
      throw new CheckpointError(
        'UNSUPPORTED_FEATURE',
        file,
        `GGUF version ${version}; versions 2 and 3 are supported`,
        version === 1 ? 'convert it again with a current llama.cpp (convert_hf_to_gguf.py)' : 'the file may be damaged or from a newer llama.cpp',
      );
    const nTensors = r.count(LIMITS.tensors, 'the tensor count');
    const nMeta = r.count(LIMITS.metadata, 'the metadata count');
    const metadata = new Map<string, GgufMetaValue>();
    for (let i = 0; i < nMeta; i++) {
      r.context = `metadata entry ${i} of ${nMeta}`;
      const key = r.string();
      r.context = `metadata "${key}"`;
      if (metadata.has(key)) throw new CheckpointError('CORRUPT', file, `metadata key "${key}" appears twice`, 'the file is damaged');
      metadata.set(key, readValue(r, file, key));
    }
    const alignValue = metadata.get('general.alignment') ?? 32;
    if (typeof alignValue !== 'number' || !Number.isInteger(alignValue) || alignValue <= 0 || alignValue % 8 !== 0)
      throw new CheckpointError('CORRUPT', file, `general.alignment is ${String(alignValue)}; it must be a positive multiple of 8`, 'the file is damaged');
    const alignment = alignValue;
    const raw: { name: string; shape: number[]; type: number; rel: number }[] = [];
    const names = new Set<string>();
    for (let i = 0; i < nTensors; i++) {
      r.context = `tensor info ${i} of ${nTensors}`;
      const name = r.string();
      r.context = `the info of tensor "${name}"`;
      const nDims = r.u32();
      if (nDims < 1 || nDims > LIMITS.dims) throw new CheckpointError('CORRUPT', file, `tensor "${name}" has ${nDims} dimensions`, 'the file is damaged');
      const ne: number[] = [];
      for (let d = 0; d < nDims; d++) ne.push(r.count(Number.MAX_SAFE_INTEGER, `dimension ${d} of tensor "${name}"`));
      const type = r.u32();
      if (GGML_TYPES[type] === undefined)
        throw new CheckpointError(
          'UNSUPPORTED_DTYPE',
          file,
          `tensor "${name}" has ggml type ${type}, which is unknown`,
          'the file may be from a newer llama.cpp; re-quantize it to a common type (Q8_0, Q4_K, F16)',
        );
      const rel = r.count(Number.MAX_SAFE_INTEGER, `the offset of tensor "${name}"`);
      if (names.has(name)) throw new CheckpointError('CORRUPT', file, `tensor "${name}" appears twice`, 'the file is damaged');
      names.add(name);
      raw.push({ name, shape: ne.reverse(), type, rel });
    }
    const dataOffset = Math.ceil(r.pos / alignment) * alignment;
    const tensors: GgufTensorInfo[] = raw.map(({ name, shape, type, rel }) => {
      const numel = shape.reduce((a, b) => a * b, 1);
      let nbytes: number;
      try {
        // Quantized blocks run along a row: the innermost dimension must hold whole blocks.
        const block = GGML_TYPES[type].blockSize;
        if (shape[shape.length - 1] % block !== 0) throw new Error(`rows of ${shape[shape.length - 1]} are not whole ${ggmlTypeName(type)} blocks of ${block}`);
        nbytes = ggmlByteSize(type, numel);
      } catch (e) {
        throw new CheckpointError('CORRUPT', file, `tensor "${name}" [${shape}]: ${(e as Error).message}`, 'the file is damaged');
      }
      if (rel % alignment !== 0)
        throw new CheckpointError(
          'CORRUPT',
          file,
          `tensor "${name}" starts at offset ${rel}, not a multiple of the alignment ${alignment}`,
          'the file is damaged',
        );
      const offset = dataOffset + rel;
      if (offset + nbytes > size)
        throw new CheckpointError(
          'TRUNCATED',
          file,
          `tensor "${name}" (${ggmlTypeName(type)} [${shape}], ${nbytes} bytes at ${offset}) runs past the end of the file (${size} bytes)`,
          'the file is incomplete: download or convert it again',
        );
      return { name, shape, type, offset, nbytes, numel };
    });
    // Tensors must not overlap: each one's bytes are its own.
    const byOffset = [...tensors].sort((a, b) => a.offset - b.offset);
    for (let i = 1; i < byOffset.length; i++) {
      const prev = byOffset[i - 1];
      if (prev.offset + prev.nbytes > byOffset[i].offset)
        throw new CheckpointError('CORRUPT', file, `tensors "${prev.name}" and "${byOffset[i].name}" overlap`, 'the file is damaged');
    }
    return { file, version, alignment, metadata, tensors, dataOffset, fileSize: size };
  } finally {
    closeSync(fd);
  }
}

/** Reads tensors' data from an open GGUF file, dequantized to fp32 (row-major, outermost first). */
export class GgufTensorReader {
  private readonly fd: number;
  constructor(readonly gguf: GgufFile) {
    this.fd = openSync(gguf.file, 'r');
  }
  read(info: GgufTensorInfo): Float32Array {
    const bytes = new Uint8Array(info.nbytes);
    let got = 0;
    while (got < info.nbytes) {
      const n = readSync(this.fd, bytes, got, info.nbytes - got, info.offset + got);
      if (n === 0)
        throw new CheckpointError('TRUNCATED', this.gguf.file, `tensor "${info.name}" ends early`, 'the file changed while reading, or is incomplete');
      got += n;
    }
    try {
      return dequantize(info.type, bytes, info.numel);
    } catch (e) {
      throw new CheckpointError(
        'UNSUPPORTED_DTYPE',
        this.gguf.file,
        `tensor "${info.name}": ${(e as Error).message}`,
        're-quantize the model to a supported type (Q8_0, Q4_K, Q6_K, F16)',
      );
    }
  }
  close(): void {
    closeSync(this.fd);
  }
}

/** The value of a metadata key, or undefined; typed lookups below give errors naming the key. */
export function metaString(g: GgufFile, key: string): string | undefined {
  const v = g.metadata.get(key);
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw new CheckpointError('BAD_CONFIG', g.file, `metadata "${key}" should be a string, got ${describe(v)}`, 'the file is damaged');
  return v;
}

export function metaNumber(g: GgufFile, key: string): number | undefined {
  const v = g.metadata.get(key);
  if (v === undefined) return undefined;
  if (typeof v !== 'number') throw new CheckpointError('BAD_CONFIG', g.file, `metadata "${key}" should be a number, got ${describe(v)}`, 'the file is damaged');
  return v;
}

export function metaBool(g: GgufFile, key: string): boolean | undefined {
  const v = g.metadata.get(key);
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') throw new CheckpointError('BAD_CONFIG', g.file, `metadata "${key}" should be a bool, got ${describe(v)}`, 'the file is damaged');
  return v;
}

export function metaArray<T extends GgufScalar>(g: GgufFile, key: string, of: 'string' | 'number'): T[] | undefined {
  const v = g.metadata.get(key);
  if (v === undefined) return undefined;
  if (!Array.isArray(v) || v.some((x) => typeof x !== of))
    throw new CheckpointError('BAD_CONFIG', g.file, `metadata "${key}" should be an array of ${of}s`, 'the file is damaged');
  return v as T[];
}

/** A required metadata key; absent is an error naming it. */
export function required<T>(g: GgufFile, key: string, v: T | undefined): T {
  if (v === undefined) throw new CheckpointError('BAD_CONFIG', g.file, `metadata "${key}" is missing`, 'the file is incomplete or not a model file');
  return v;
}

function describe(v: GgufMetaValue): string {
  return Array.isArray(v) ? `an array of ${v.length}` : `${typeof v} ${JSON.stringify(typeof v === 'bigint' ? String(v) : v)}`;
}

/** Names of the value types, for messages. */
export const GGUF_VALUE_TYPES = VALUE_TYPE_NAMES;
