/**
 * Which kernel backend and float type the engine runs on. Selected explicitly (option or the
 * MAGRPO_BACKEND env var), default `native`; asking for `native` where it cannot load is an error
 * that says why, never a silent fallback to the slower backend.
 */
import type { Backend, FloatArray, Precision } from './backend.js';
import { loadNativeBackend, nativeAddonFile, nativeBf16Kernel, nativeBlas, nativeIsa } from './backends/native.js';
import { referenceBackend } from './backends/reference.js';
import { gemmDescription } from './blas-core.js';
import { takeFloat32 } from './buffer-pool.js';
import { profiled } from './profile.js';

export type BackendName = 'native' | 'reference';
export type DType = 'float32' | 'float64';

let active: Backend | null = null;
let dtype: DType = 'float32';
let precision: Precision = 'fp32';
/** Kernel timing asked for by `timeKernels` (MAGRPO_DEBUG=2 times them anyway). */
let kernelTiming = false;

/** Selects the kernel backend. Throws if `native` is requested but cannot be loaded. */
export function setBackend(name: BackendName): Backend {
  let chosen: Backend;
  if (name === 'native') chosen = loadNativeBackend();
  else if (name === 'reference') chosen = referenceBackend;
  else throw new Error(`unknown backend "${name as string}": expected "native" or "reference" (MAGRPO_BACKEND)`);
  if (dtype === 'float64' && chosen.name !== 'reference') {
    throw new Error('float64 tensors are only supported by the reference backend');
  }
  const threads = Number(process.env.MAGRPO_NUM_THREADS ?? '');
  if (Number.isInteger(threads) && threads > 0) chosen.setNumThreads(threads);
  const debug = Number(process.env.MAGRPO_DEBUG ?? 0);
  if (debug >= 1) {
    let native = '';
    if (chosen.name === 'native') {
      const { isa } = nativeIsa();
      native = ` isa=${isa} gemm=${gemmDescription(nativeBlas(), isa)} addon=${nativeAddonFile()}`;
    }
    process.stderr.write(`[magrpo] backend=${chosen.name}${native} threads=${chosen.getNumThreads()} dtype=${dtype}\n`);
  }
  chosen.setPrecision(precision);
  if (debug >= 2) chosen = profiled(chosen);
  else if (kernelTiming) chosen = profiled(chosen, false);
  active = chosen;
  return chosen;
}

/**
 * Times every kernel call from now on (engine/profile.ts), without MAGRPO_DEBUG's exit table: for
 * callers that print their own figures from the phase and kernel clocks (`magrpo bench --step`).
 */
export function timeKernels(): void {
  if (kernelTiming) return;
  kernelTiming = true;
  if (active !== null && Number(process.env.MAGRPO_DEBUG ?? 0) < 2) active = profiled(active, false);
}

/** The active backend, selecting it from MAGRPO_BACKEND (default `native`) on first use. */
export function backend(): Backend {
  return active ?? setBackend((process.env.MAGRPO_BACKEND ?? 'native') as BackendName);
}

/**
 * Precision of matrix products from now on (Backend.setPrecision): `bf16` rounds the inputs of
 * products of 16 rows or more (and of attention over 16 query rows or more) to bfloat16 and
 * accumulates in fp32; weights, gradients, optimizer state and every other kernel stay fp32. Runs on AVX-512 BF16 where the CPU has it, else
 * emulated (same numbers, fp32 speed).
 */
export function setPrecision(p: Precision): void {
  if (p !== 'fp32' && p !== 'bf16' && p !== 'bf16-emulated') throw new Error(`unknown precision "${p as string}": expected fp32 or bf16`);
  precision = p;
  active?.setPrecision(p);
}

/**
 * What precision `auto` means here: bf16 where the active backend runs bf16 products on bf16
 * hardware (the native backend on a CPU with AMX or AVX-512 BF16), else fp32, since emulated bf16
 * gives bf16's numbers at fp32's speed or slower.
 */
export function autoPrecision(): 'fp32' | 'bf16' {
  return backend().name === 'native' && precision !== 'bf16-emulated' && nativeBf16Kernel() !== 'emulated' ? 'bf16' : 'fp32';
}

/** A config's precision as setPrecision takes it: `auto` resolved here (autoPrecision). */
export function resolvePrecision(p: 'fp32' | 'bf16' | 'auto'): 'fp32' | 'bf16' {
  return p === 'auto' ? autoPrecision() : p;
}

export function getPrecision(): Precision {
  return precision;
}

/** Float type of new tensors. float64 exists for finite-difference gradient checks. */
export function setDType(d: DType): void {
  if (d === 'float64' && active !== null && active.name !== 'reference') {
    throw new Error('float64 tensors are only supported by the reference backend');
  }
  dtype = d;
}

export function getDType(): DType {
  return dtype;
}

/**
 * A zero-filled buffer of the active float type that outlives training steps (parameters,
 * optimizer moments, KV caches): never taken from or given to a buffer pool.
 */
export function allocPersistent(n: number): FloatArray {
  return dtype === 'float64' ? new Float64Array(n) : new Float32Array(n);
}

/** A zero-filled buffer of the active float type (from the active buffer pool, if any: buffer-pool.ts). */
export function alloc(n: number): FloatArray {
  if (dtype === 'float64') return new Float64Array(n);
  return takeFloat32(n) ?? new Float32Array(n);
}

/**
 * A buffer whose contents are unspecified (zeros when fresh, an old activation when recycled):
 * only for outputs the kernel writes entirely, which saves refilling recycled buffers with zeros.
 */
export function allocOverwritten(n: number): FloatArray {
  if (dtype === 'float64') return new Float64Array(n);
  return takeFloat32(n, false) ?? new Float32Array(n);
}
