/**
 * ggml tensor types and their dequantization to f32, bit for bit as gguf-py 0.19.0's
 * `gguf.quants.dequantize` (the spec here; llama.cpp's ggml-quants.c has the same block layouts).
 *
 * gguf-py computes in numpy float32, one rounded operation at a time, and each kernel below rounds
 * where numpy does (Math.fround, or the store into the Float32Array): `d * q` for the symmetric
 * types, `(d * q) + m` for Q4_1/Q5_1, and for the K-quants the sub-block scale first,
 * `dl = d * sc`, `ml = dmin * m`, then `dl * q - ml`. One f32 operation computed in f64 and rounded
 * once is the correctly rounded f32 result. The products are exact in f32 anyway (an f16 scale's 11
 * significant bits times at most 7 of the sub-block scale and 5 of the quant), so the rounding that
 * decides the bits is the final `+ m` or `- ml`: the test's fixtures catch a 1-ulp slip there.
 *
 * Block layouts (bytes, little-endian; QK_K = 256 elements per K-quant block):
 * - Q4_0 [d f16][qs 16]: element j < 16 is qs[j] & 15, element j + 16 is qs[j] >> 4; y = d * (q - 8)
 * - Q4_1 [d f16][m f16][qs 16]: y = d * q + m
 * - Q5_0 [d f16][qh u32][qs 16]: bit j of qh is bit 4 of element j; y = d * (q - 16)
 * - Q5_1 [d f16][m f16][qh u32][qs 16]: y = d * q + m
 * - Q8_0 [d f16][qs i8 × 32]: y = q * d
 * - Q2_K [scales 16][qs 64][d f16][dmin f16]: scale byte s holds sc (low 4) and m (high 4) of
 *   16-element sub-block s; element h·128 + j·32 + l is (qs[h·32 + l] >> 2j) & 3
 * - Q3_K [hmask 32][qs 64][scales 12][d f16]: 16 signed 6-bit scales - 32; element
 *   h·128 + j·32 + l is the 2-bit (qs[h·32 + l] >> 2j) & 3, less 4 when bit (4h + j) of hmask[l]
 *   is clear
 * - Q4_K [d f16][dmin f16][scales 12][qs 128]: 8 sub-blocks of 32 with 6-bit scale and min;
 *   sub-block 2c + k is (qs[c·32 + l] >> 4k) & 15
 * - Q5_K [d f16][dmin f16][scales 12][qh 32][qs 128]: as Q4_K, bit s of qh[l] is bit 4 of
 *   element l of sub-block s
 * - Q6_K [ql 128][qh 64][scales i8 × 16][d f16]: 6-bit q - 32, scale per 16 elements
 */
import { f16BitsTable } from './half.js';

/** One ggml tensor type: elements per block and bytes per block (gguf-py GGML_QUANT_SIZES). */
export interface GgmlType {
  readonly name: string;
  readonly blockSize: number;
  readonly typeSize: number;
}

const QK_K = 256;

/** Every type gguf-py 0.19.0 knows, by ggml type id; `dequantize` supports DEQUANTIZABLE_TYPES. */
export const GGML_TYPES: Readonly<Record<number, GgmlType>> = {
  0: { name: 'F32', blockSize: 1, typeSize: 4 },
  1: { name: 'F16', blockSize: 1, typeSize: 2 },
  2: { name: 'Q4_0', blockSize: 32, typeSize: 2 + 16 },
  3: { name: 'Q4_1', blockSize: 32, typeSize: 2 + 2 + 16 },
  6: { name: 'Q5_0', blockSize: 32, typeSize: 2 + 4 + 16 },
  7: { name: 'Q5_1', blockSize: 32, typeSize: 2 + 2 + 4 + 16 },
  8: { name: 'Q8_0', blockSize: 32, typeSize: 2 + 32 },
  9: { name: 'Q8_1', blockSize: 32, typeSize: 4 + 4 + 32 },
  10: { name: 'Q2_K', blockSize: QK_K, typeSize: 2 + 2 + QK_K / 16 + QK_K / 4 },
  11: { name: 'Q3_K', blockSize: QK_K, typeSize: 2 + QK_K / 4 + QK_K / 8 + 12 },
  12: { name: 'Q4_K', blockSize: QK_K, typeSize: 2 + 2 + QK_K / 2 + 12 },
  13: { name: 'Q5_K', blockSize: QK_K, typeSize: 2 + 2 + QK_K / 2 + QK_K / 8 + 12 },
  14: { name: 'Q6_K', blockSize: QK_K, typeSize: 2 + QK_K / 2 + QK_K / 4 + QK_K / 16 },
  15: { name: 'Q8_K', blockSize: QK_K, typeSize: 4 + QK_K + QK_K / 8 },
  16: { name: 'IQ2_XXS', blockSize: QK_K, typeSize: 2 + QK_K / 4 },
  17: { name: 'IQ2_XS', blockSize: QK_K, typeSize: 2 + QK_K / 4 + QK_K / 32 },
  18: { name: 'IQ3_XXS', blockSize: QK_K, typeSize: 2 + QK_K / 4 + QK_K / 8 },
  19: { name: 'IQ1_S', blockSize: QK_K, typeSize: 2 + QK_K / 8 + QK_K / 16 },
  20: { name: 'IQ4_NL', blockSize: 32, typeSize: 2 + 16 },
  21: { name: 'IQ3_S', blockSize: QK_K, typeSize: 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4 },
  22: { name: 'IQ2_S', blockSize: QK_K, typeSize: 2 + QK_K / 4 + QK_K / 16 },
  23: { name: 'IQ4_XS', blockSize: QK_K, typeSize: 2 + 2 + QK_K / 2 + QK_K / 64 },
  24: { name: 'I8', blockSize: 1, typeSize: 1 },
  25: { name: 'I16', blockSize: 1, typeSize: 2 },
  26: { name: 'I32', blockSize: 1, typeSize: 4 },
  27: { name: 'I64', blockSize: 1, typeSize: 8 },
  28: { name: 'F64', blockSize: 1, typeSize: 8 },
  29: { name: 'IQ1_M', blockSize: QK_K, typeSize: QK_K / 8 + QK_K / 16 + QK_K / 32 },
  30: { name: 'BF16', blockSize: 1, typeSize: 2 },
  34: { name: 'TQ1_0', blockSize: QK_K, typeSize: 2 + 4 * 13 },
  35: { name: 'TQ2_0', blockSize: QK_K, typeSize: 2 + 64 },
  39: { name: 'MXFP4', blockSize: 32, typeSize: 1 + 16 },
  40: { name: 'NVFP4', blockSize: 64, typeSize: 4 + 32 },
  41: { name: 'Q1_0', blockSize: 128, typeSize: 2 + 16 },
};

/** Why a tensor's bytes cannot be turned into f32; a GGUF reader adds the file (CheckpointError). */
export class GgmlQuantError extends Error {
  override readonly name = 'GgmlQuantError';

  constructor(
    readonly code: 'UNSUPPORTED_DTYPE' | 'SHAPE_MISMATCH',
    message: string,
  ) {
    super(message);
  }
}

/** The type's gguf-py name, or `unknown ggml type <id>`. */
export function ggmlTypeName(id: number): string {
  return GGML_TYPES[id]?.name ?? `unknown ggml type ${id}`;
}

function typeOf(id: number): GgmlType {
  const t = GGML_TYPES[id];
  if (t === undefined) {
    throw new GgmlQuantError('UNSUPPORTED_DTYPE', `unknown ggml type id ${id} — gguf-py 0.19.0 knows ids ${Object.keys(GGML_TYPES).join(', ')}`);
  }
  return t;
}

/** Bytes taken by nElements of a type; nElements must fill whole blocks. */
export function ggmlByteSize(type: number, nElements: number): number {
  const t = typeOf(type);
  if (!Number.isSafeInteger(nElements) || nElements < 0 || nElements % t.blockSize !== 0) {
    throw new GgmlQuantError('SHAPE_MISMATCH', `${t.name}: ${nElements} elements is not a whole number of ${t.name} blocks (${t.blockSize} elements each)`);
  }
  return (nElements / t.blockSize) * t.typeSize;
}

let f16Values: Float32Array | undefined;

/** The f16 table as f32 values, for scales (finite in any block worth decoding). */
function f16Scales(): Float32Array {
  f16Values ??= new Float32Array(f16BitsTable().buffer);
  return f16Values;
}

type Kernel = (b: Uint8Array, nBlocks: number, out: Float32Array) => void;

const fround = Math.fround;

function f32(b: Uint8Array, n: number, out: Float32Array): void {
  new Uint8Array(out.buffer, out.byteOffset, n * 4).set(b);
}

function f16(b: Uint8Array, n: number, out: Float32Array): void {
  const table = f16BitsTable();
  const o32 = new Uint32Array(out.buffer, out.byteOffset, n);
  for (let i = 0; i < n; i++) o32[i] = table[b[2 * i] | (b[2 * i + 1] << 8)];
}

function bf16(b: Uint8Array, n: number, out: Float32Array): void {
  const o32 = new Uint32Array(out.buffer, out.byteOffset, n);
  for (let i = 0; i < n; i++) o32[i] = (b[2 * i] | (b[2 * i + 1] << 8)) << 16;
}

function q8_0(b: Uint8Array, nb: number, out: Float32Array): void {
  const h = f16Scales();
  for (let blk = 0, o = 0, y = 0; blk < nb; blk++, o += 34, y += 32) {
    const d = h[b[o] | (b[o + 1] << 8)];
    for (let j = 0; j < 32; j++) out[y + j] = ((b[o + 2 + j] << 24) >> 24) * d;
  }
}

function q4_0(b: Uint8Array, nb: number, out: Float32Array): void {
  const h = f16Scales();
  for (let blk = 0, o = 0, y = 0; blk < nb; blk++, o += 18, y += 32) {
    const d = h[b[o] | (b[o + 1] << 8)];
    for (let j = 0; j < 16; j++) {
      const x = b[o + 2 + j];
      out[y + j] = d * ((x & 15) - 8);
      out[y + j + 16] = d * ((x >> 4) - 8);
    }
  }
}

function q4_1(b: Uint8Array, nb: number, out: Float32Array): void {
  const h = f16Scales();
  for (let blk = 0, o = 0, y = 0; blk < nb; blk++, o += 20, y += 32) {
    const d = h[b[o] | (b[o + 1] << 8)];
    const m = h[b[o + 2] | (b[o + 3] << 8)];
    for (let j = 0; j < 16; j++) {
      const x = b[o + 4 + j];
      out[y + j] = fround(d * (x & 15)) + m;
      out[y + j + 16] = fround(d * (x >> 4)) + m;
    }
  }
}

function q5_0(b: Uint8Array, nb: number, out: Float32Array): void {
  const h = f16Scales();
  for (let blk = 0, o = 0, y = 0; blk < nb; blk++, o += 22, y += 32) {
    const d = h[b[o] | (b[o + 1] << 8)];
    const qh = b[o + 2] | (b[o + 3] << 8) | (b[o + 4] << 16) | (b[o + 5] << 24);
    for (let j = 0; j < 16; j++) {
      const x = b[o + 6 + j];
      out[y + j] = d * (((x & 15) | (((qh >>> j) & 1) << 4)) - 16);
      out[y + j + 16] = d * (((x >> 4) | (((qh >>> (j + 16)) & 1) << 4)) - 16);
    }
  }
}

function q5_1(b: Uint8Array, nb: number, out: Float32Array): void {
  const h = f16Scales();
  for (let blk = 0, o = 0, y = 0; blk < nb; blk++, o += 24, y += 32) {
    const d = h[b[o] | (b[o + 1] << 8)];
    const m = h[b[o + 2] | (b[o + 3] << 8)];
    const qh = b[o + 4] | (b[o + 5] << 8) | (b[o + 6] << 16) | (b[o + 7] << 24);
    for (let j = 0; j < 16; j++) {
      const x = b[o + 8 + j];
      out[y + j] = fround(d * ((x & 15) | (((qh >>> j) & 1) << 4))) + m;
      out[y + j + 16] = fround(d * ((x >> 4) | (((qh >>> (j + 16)) & 1) << 4))) + m;
    }
  }
}

function q2_k(b: Uint8Array, nb: number, out: Float32Array): void {
  const h = f16Scales();
  for (let blk = 0, o = 0, y = 0; blk < nb; blk++, o += 84, y += QK_K) {
    const d = h[b[o + 80] | (b[o + 81] << 8)];
    const dmin = h[b[o + 82] | (b[o + 83] << 8)];
    for (let s = 0; s < 16; s++) {
      const sc = b[o + s];
      const dl = fround(d * (sc & 15));
      const ml = fround(dmin * (sc >> 4));
      // sub-block s = elements 16s..16s+15 = h·128 + j·32 + l with h = s >> 3, j = (s >> 1) & 3
      const qs = o + 16 + (s >> 3) * 32 + (s & 1) * 16;
      const shift = ((s >> 1) & 3) * 2;
      const ys = y + s * 16;
      for (let l = 0; l < 16; l++) out[ys + l] = fround(dl * ((b[qs + l] >> shift) & 3)) - ml;
    }
  }
}

function q3_k(b: Uint8Array, nb: number, out: Float32Array): void {
  const h = f16Scales();
  for (let blk = 0, o = 0, y = 0; blk < nb; blk++, o += 110, y += QK_K) {
    const d = h[b[o + 108] | (b[o + 109] << 8)];
    const sc = o + 96;
    for (let s = 0; s < 16; s++) {
      const low = s < 8 ? b[sc + s] & 15 : b[sc + s - 8] >> 4;
      const high = (b[sc + 8 + (s & 3)] >> (2 * (s >> 2))) & 3;
      const dl = fround(d * ((low | (high << 4)) - 32));
      const qs = o + 32 + (s >> 3) * 32 + (s & 1) * 16;
      const shift = ((s >> 1) & 3) * 2;
      const hm = o + (s & 1) * 16;
      const hbit = s >> 1;
      const ys = y + s * 16;
      for (let l = 0; l < 16; l++) {
        const q = ((b[qs + l] >> shift) & 3) - (((b[hm + l] >> hbit) & 1) ^ 1) * 4;
        out[ys + l] = dl * q;
      }
    }
  }
}

/** Q4_K/Q5_K 6-bit scale and min of sub-block s from the 12 scale bytes at sc (gguf-py get_scale_min). */
function kScale(b: Uint8Array, sc: number, s: number): number {
  return s < 4 ? b[sc + s] & 63 : (b[sc + 4 + s] & 15) | ((b[sc + s - 4] >> 2) & 0x30);
}

function kMin(b: Uint8Array, sc: number, s: number): number {
  return s < 4 ? b[sc + 4 + s] & 63 : (b[sc + 4 + s] >> 4) | ((b[sc + s] >> 2) & 0x30);
}

function q4_k(b: Uint8Array, nb: number, out: Float32Array): void {
  const h = f16Scales();
  for (let blk = 0, o = 0, y = 0; blk < nb; blk++, o += 144, y += QK_K) {
    const d = h[b[o] | (b[o + 1] << 8)];
    const dmin = h[b[o + 2] | (b[o + 3] << 8)];
    for (let s = 0; s < 8; s++) {
      const dl = fround(d * kScale(b, o + 4, s));
      const ml = fround(dmin * kMin(b, o + 4, s));
      const qs = o + 16 + (s >> 1) * 32;
      const shift = (s & 1) * 4;
      const ys = y + s * 32;
      for (let l = 0; l < 32; l++) out[ys + l] = fround(dl * ((b[qs + l] >> shift) & 15)) - ml;
    }
  }
}

function q5_k(b: Uint8Array, nb: number, out: Float32Array): void {
  const h = f16Scales();
  for (let blk = 0, o = 0, y = 0; blk < nb; blk++, o += 176, y += QK_K) {
    const d = h[b[o] | (b[o + 1] << 8)];
    const dmin = h[b[o + 2] | (b[o + 3] << 8)];
    for (let s = 0; s < 8; s++) {
      const dl = fround(d * kScale(b, o + 4, s));
      const ml = fround(dmin * kMin(b, o + 4, s));
      const qh = o + 16;
      const qs = o + 48 + (s >> 1) * 32;
      const shift = (s & 1) * 4;
      const ys = y + s * 32;
      for (let l = 0; l < 32; l++) {
        const q = ((b[qs + l] >> shift) & 15) | (((b[qh + l] >> s) & 1) << 4);
        out[ys + l] = fround(dl * q) - ml;
      }
    }
  }
}

function q6_k(b: Uint8Array, nb: number, out: Float32Array): void {
  const h = f16Scales();
  for (let blk = 0, o = 0, y = 0; blk < nb; blk++, o += 210, y += QK_K) {
    const d = h[b[o + 208] | (b[o + 209] << 8)];
    // sub-block s = elements 16s..16s+15 = half·128 + j·32 + l: low 4 bits from ql, nibble j >> 1
    // of byte half·64 + (j & 1)·32 + l; high 2 bits from qh[half·32 + l] >> 2j
    for (let s = 0; s < 16; s++) {
      const dl = fround(d * ((b[o + 192 + s] << 24) >> 24));
      const half = s >> 3;
      const j = (s >> 1) & 3;
      const l0 = (s & 1) * 16;
      const ql = o + half * 64 + (j & 1) * 32 + l0;
      const lshift = (j >> 1) * 4;
      const qh = o + 128 + half * 32 + l0;
      const hshift = j * 2;
      const ys = y + s * 16;
      for (let l = 0; l < 16; l++) {
        const q = ((b[ql + l] >> lshift) & 15) | (((b[qh + l] >> hshift) & 3) << 4);
        out[ys + l] = dl * (q - 32);
      }
    }
  }
}

/** Kernels by ggml type id; F32, F16 and BF16 take elements for blocks (block size 1). */
const DEQUANTIZERS: Readonly<Record<number, Kernel>> = {
  0: f32,
  1: f16,
  30: bf16,
  8: q8_0,
  2: q4_0,
  3: q4_1,
  6: q5_0,
  7: q5_1,
  10: q2_k,
  11: q3_k,
  12: q4_k,
  13: q5_k,
  14: q6_k,
};

/** Type ids `dequantize` supports. */
export const DEQUANTIZABLE_TYPES: readonly number[] = Object.keys(DEQUANTIZERS).map(Number);

/**
 * A tensor's raw ggml bytes (any byte offset) as f32, equal bit for bit to gguf-py 0.19.0's
 * `gguf.quants.dequantize` for finite scales (with an inf or NaN scale the result is NaN where
 * numpy's is, but its NaN bits are not pinned).
 */
export function dequantize(type: number, bytes: Uint8Array, nElements: number): Float32Array {
  const t = typeOf(type);
  const kernel = DEQUANTIZERS[type];
  if (kernel === undefined) {
    const names = DEQUANTIZABLE_TYPES.map((id) => GGML_TYPES[id].name).join(', ');
    throw new GgmlQuantError('UNSUPPORTED_DTYPE', `cannot dequantize ggml type ${t.name} (id ${type}) — supported: ${names}`);
  }
  const expected = ggmlByteSize(type, nElements);
  if (bytes.length !== expected) {
    throw new GgmlQuantError(
      'SHAPE_MISMATCH',
      `${t.name}: ${nElements} elements take ${expected} bytes, got ${bytes.length} bytes — the tensor data is truncated or its shape is wrong`,
    );
  }
  const out = new Float32Array(nElements);
  kernel(bytes, nElements / t.blockSize, out);
  return out;
}
