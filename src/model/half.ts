/**
 * IEEE half precision (f16) to f32, bit for bit as numpy's `astype(float32)`: exact for subnormals
 * and infinities, and NaN payloads kept (signalling NaNs are not quieted), which is why results
 * are written through a Uint32 view rather than as JavaScript numbers. One 65536-entry table
 * (256 KiB, built once) serves safetensors F16 tensors and GGUF's f16 scales.
 */
let table: Uint32Array | undefined;

/** f32 bit patterns indexed by f16 bit patterns. */
export function f16BitsTable(): Uint32Array {
  if (table !== undefined) return table;
  const bits = new Uint32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = (h & 0x8000) << 16;
    const exp = (h >>> 10) & 0x1f;
    let mant = h & 0x3ff;
    if (exp === 0x1f) bits[h] = sign | 0x7f800000 | (mant << 13);
    else if (exp !== 0) bits[h] = sign | ((exp + 112) << 23) | (mant << 13);
    else if (mant === 0) bits[h] = sign;
    else {
      // subnormal: normalise the mantissa, 2^-14 · mant/1024 = 2^(e-127) · 1.m
      let e = 113;
      while ((mant & 0x400) === 0) {
        mant <<= 1;
        e--;
      }
      bits[h] = sign | (e << 23) | ((mant & 0x3ff) << 13);
    }
  }
  table = bits;
  return bits;
}

/** f16 bit patterns → f32 values. */
export function f16ToF32(bits: Uint16Array): Float32Array {
  const t = f16BitsTable();
  const out = new Float32Array(bits.length);
  const o = new Uint32Array(out.buffer);
  for (let i = 0; i < bits.length; i++) o[i] = t[bits[i]];
  return out;
}
