/**
 * The native backend: the C addon of native/ (its own sgemm or a user's OpenBLAS, found at load,
 * and C loops). The addon is a prebuilt one shipped in the package (native/prebuilds/<platform>-
 * <arch>/, found by node-gyp-build) or one built from source at install time or by
 * `npm run build:native` (native/build/Release/, preferred when present). The addon's functions
 * are the kernels themselves, with the argument order of `Backend`, so calls go straight to C;
 * the addon checks types and lengths.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packageRoot as findPackageRoot } from '../../data/package-root.js';
import { type Backend, KERNELS, type Precision } from '../backend.js';
import { selectBlasCore } from '../blas-core.js';

/** The addon's functions beyond the kernels: which compiled variant of its loops runs, which BLAS (native/README.md). */
interface AddonInfo {
  isa(): NativeIsa;
  supportedIsas(): NativeIsa[];
  blas(): NativeBlas;
  fmaPeak(milliseconds: number): number;
  precision(): NativePrecision;
  bf16Kernel(): NativeBf16Kernel;
}

type NativeAddon = Omit<Backend, 'name'> & AddonInfo;

/** A variant of the C kernels: x86-64 baseline (SSE2; the only one elsewhere), AVX2+FMA, AVX-512. */
export type NativeIsa = 'generic' | 'avx2' | 'avx512';

/** The sgemm the addon runs: a user's OpenBLAS found at load, or its own (native/sgemm.c). */
export interface NativeBlas {
  kind: 'openblas' | 'builtin';
  /** The OpenBLAS library file (symlinks resolved); empty for the builtin sgemm. */
  path: string;
  /** OpenBLAS's core (`openblas_get_corename`) and build (`openblas_get_config`); empty for the builtin sgemm. */
  corename: string;
  config: string;
  /** Why this one, e.g. `MAGRPO_BLAS=builtin` or `no OpenBLAS found (...)`. */
  reason: string;
}

const require = createRequire(import.meta.url);
const BUILD_PATH = ['native', 'build', 'Release', 'magrpo.node'];
/** The Node-API version the addon is built for (NAPI_VERSION in native/binding.gyp). */
export const NAPI_VERSION = 8;

/** The native addon cannot be loaded: none for this platform, built for another Node, or broken. */
export class NativeBackendUnavailable extends Error {
  readonly code = 'NATIVE_UNAVAILABLE';
  constructor(
    message: string,
    readonly file: string,
  ) {
    super(message);
    this.name = 'NativeBackendUnavailable';
  }
}

/** The package root (data/package-root.ts), which must hold package.json to find native/ in. */
function packageRoot(): string {
  const dir = findPackageRoot();
  if (!existsSync(join(dir, 'package.json')))
    throw new NativeBackendUnavailable('could not find the magrpo package root above this module', fileURLToPath(import.meta.url));
  return dir;
}

let loaded: Backend | null = null;

/** A clone of the repository (sources and tsconfig) rather than an installed package. */
function isClone(root: string): boolean {
  return existsSync(join(root, 'tsconfig.json')) && existsSync(join(root, 'src', 'index.ts'));
}

/** How to get an addon here, in one clause (for the one-line error). */
export function buildHint(root: string): string {
  const tools =
    process.platform === 'darwin'
      ? 'the Xcode command line tools (`xcode-select --install`)'
      : 'a C compiler and Python 3 (`apt-get install build-essential python3`)';
  const rebuild = isClone(root) ? '`npm run build:native`' : '`npm rebuild magrpo`';
  return `install ${tools}, then run ${rebuild} (or set MAGRPO_BACKEND=reference for the slow TypeScript backend)`;
}

/**
 * The addon file node-gyp-build picks: native/build/Release/magrpo.node when built here, else the
 * prebuilt one for this platform, arch and libc; null when there is neither.
 */
export function resolveAddonFile(): string | null {
  const ngb = require('node-gyp-build') as { resolve(dir: string): string };
  try {
    return ngb.resolve(join(packageRoot(), 'native'));
  } catch {
    return null;
  }
}

/** Where the addon in use is (or, when there is none, where a local build would put it). */
export function nativeAddonFile(): string {
  return resolveAddonFile() ?? join(packageRoot(), ...BUILD_PATH);
}

/** Loads the addon once per thread; throws NativeBackendUnavailable saying, in one line, why it cannot and what to install. */
export function loadNativeBackend(): Backend {
  if (loaded !== null) return loaded;
  const root = packageRoot();
  const file = resolveAddonFile();
  const where = `${process.platform}-${process.arch}`;
  if (file === null) {
    throw new NativeBackendUnavailable(
      `no native addon for ${where} (Node-API ${NAPI_VERSION}): none ships prebuilt for it and none was built; ${buildHint(root)}.`,
      join(root, ...BUILD_PATH),
    );
  }
  // An OpenMP build of OpenBLAS brings libgomp, which reads OMP_WAIT_POLICY once, when it loads.
  // Its default spins idle threads before they sleep, and on a machine shared with other jobs a
  // spinning or descheduled thread made two-thread runs 5-10x slower than one; passive threads
  // sleep at once (as the addon's own pool does).
  process.env.OMP_WAIT_POLICY ??= 'passive';
  // OpenBLAS (when the addon finds one) reads OPENBLAS_CORETYPE once, as the addon loads it:
  // choose its kernels first (a user's value wins).
  selectBlasCore(file);
  let addon: NativeAddon;
  try {
    addon = require(file) as NativeAddon;
  } catch (err) {
    const e = err as Error & { code?: string };
    const why = e.message.split('\n')[0];
    // A bad MAGRPO_ISA / MAGRPO_BLAS says itself what to change.
    if (e.code === 'NATIVE_BAD_ISA' || e.code === 'NATIVE_BAD_BLAS') throw new NativeBackendUnavailable(why, file);
    throw new NativeBackendUnavailable(`native addon ${file} failed to load (${why}); ${buildHint(root)}.`, file);
  }
  // A stale build lacks newer kernels: say so now rather than fail mid-training.
  const missing = [...KERNELS, 'setNumThreads', 'getNumThreads', 'isa', 'supportedIsas', 'blas', 'fmaPeak', 'setPrecision', 'precision', 'bf16Kernel'].filter(
    (k) => typeof (addon as unknown as Record<string, unknown>)[k] !== 'function',
  );
  if (missing.length > 0) {
    throw new NativeBackendUnavailable(`native addon ${file} lacks ${missing.join(', ')}; rebuild it with \`npm run build:native -- --force\`.`, file);
  }
  let precision: Precision = 'fp32';
  loaded = Object.freeze({
    ...addon,
    name: 'native' as const,
    setPrecision(p: Precision) {
      addon.setPrecision(p);
      precision = p;
    },
    getPrecision: () => precision,
  });
  return loaded;
}

/**
 * A function of the addon outside the kernel interface, or null when this addon has none by that
 * name (a stale build): a model's fused fast path, such as native/decode.c's `llamaDecodeStep`,
 * which model code calls with a fallback composed of kernels. Loads the addon.
 */
export function nativeFunction<F>(name: string): F | null {
  const f = (loadNativeBackend() as unknown as Record<string, unknown>)[name];
  return typeof f === 'function' ? (f as F) : null;
}

/** The sgemm in use: a user's OpenBLAS or the builtin one, and why. Loads the addon. */
export function nativeBlas(): NativeBlas {
  return (loadNativeBackend() as unknown as AddonInfo).blas();
}

/**
 * The variant of the C kernels in use (the best this CPU runs, or MAGRPO_ISA's) and every variant
 * this CPU runs, best last. Loads the addon.
 */
/**
 * One thread's FP32 peak in GFLOP/s, measured by a loop of independent FMAs in the widest vectors
 * this CPU runs (best of bursts over `milliseconds`). Loads the addon.
 */
export function nativeFmaPeak(milliseconds = 150): number {
  return (loadNativeBackend() as unknown as AddonInfo).fmaPeak(milliseconds);
}

/** Whether bf16 products are on, run on VDPBF16PS (`native`), and whether the CPU has AVX-512 BF16. */
export interface NativePrecision {
  bf16: boolean;
  native: boolean;
  cpu: boolean;
}

/** The addon's precision state. Loads the addon. */
export function nativePrecision(): NativePrecision {
  return (loadNativeBackend() as unknown as AddonInfo).precision();
}

/**
 * What bf16 products run on: AMX tiles (`amx`, Sapphire Rapids and later, on Linux), VDPBF16PS
 * (`avx512bf16`), or `emulated` (bf16 rounding, fp32 products: no bf16 hardware, or precision
 * `bf16-emulated`). Chosen at load, the best this machine runs unless MAGRPO_BF16_KERNEL names one
 * (docs/precision.md). Loads the addon.
 */
export type NativeBf16Kernel = 'amx' | 'avx512bf16' | 'emulated';
export function nativeBf16Kernel(): NativeBf16Kernel {
  return (loadNativeBackend() as unknown as AddonInfo).bf16Kernel();
}

export function nativeIsa(): { isa: NativeIsa; supported: NativeIsa[] } {
  const addon = loadNativeBackend() as unknown as AddonInfo;
  return { isa: addon.isa(), supported: addon.supportedIsas() };
}
