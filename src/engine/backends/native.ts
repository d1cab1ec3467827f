/**
 * The native backend: the C addon of native/ (OpenBLAS sgemm + C loops), built by
 * `npm run build:native`. The addon's functions are the kernels themselves, with the argument
 * order of `Backend`, so calls go straight to C; the addon checks types and lengths.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Backend, KERNELS } from '../backend.js';
import { selectBlasCore } from '../blas-core.js';

/** The addon's functions beyond the kernels: which compiled variant of its loops runs (native/README.md). */
interface IsaInfo {
  isa(): NativeIsa;
  supportedIsas(): NativeIsa[];
}

type NativeAddon = Omit<Backend, 'name'> & IsaInfo;

/** A variant of the C kernels: x86-64 baseline (SSE2; the only one elsewhere), AVX2+FMA, AVX-512. */
export type NativeIsa = 'generic' | 'avx2' | 'avx512';

const ADDON_PATH = ['native', 'build', 'Release', 'magrpo.node'];
const SELECT_REFERENCE = 'Set MAGRPO_BACKEND=reference to use the (slower) TypeScript backend instead.';

/** The native addon cannot be loaded: not built, built for another Node, or missing OpenBLAS. */
export class NativeBackendUnavailable extends Error {
  readonly code = 'NATIVE_UNAVAILABLE';
  constructor(
    message: string,
    readonly file: string,
  ) {
    super(`${message}\n${SELECT_REFERENCE}`);
    this.name = 'NativeBackendUnavailable';
  }
}

/** The nearest folder at or above this module that holds package.json (src/ and dist/ alike). */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new NativeBackendUnavailable('could not find the magrpo package root above this module', fileURLToPath(import.meta.url));
    dir = parent;
  }
  return dir;
}

let loaded: Backend | null = null;

/** Where the built addon is (or would be). */
export function nativeAddonFile(): string {
  return join(packageRoot(), ...ADDON_PATH);
}

/** Loads the addon once per thread; throws NativeBackendUnavailable saying why it cannot. */
export function loadNativeBackend(): Backend {
  if (loaded !== null) return loaded;
  const file = nativeAddonFile();
  if (!existsSync(file)) {
    throw new NativeBackendUnavailable(`native addon not built: ${file} is missing; run \`npm run build:native\` (needs libopenblas-dev).`, file);
  }
  // libgomp reads OMP_WAIT_POLICY once, when the addon loads it. Its default spins idle threads
  // before they sleep, and on a machine shared with other jobs a spinning or descheduled thread
  // made two-thread runs 5-10x slower than one thread; passive threads sleep at once.
  process.env.OMP_WAIT_POLICY ??= 'passive';
  // OpenBLAS reads OPENBLAS_CORETYPE once, at load: choose its kernels first (a user's value wins).
  selectBlasCore(file);
  let addon: NativeAddon;
  try {
    addon = createRequire(import.meta.url)(file) as NativeAddon;
  } catch (err) {
    throw new NativeBackendUnavailable(`native addon ${file} failed to load: ${(err as Error).message}`, file);
  }
  // A stale build lacks newer kernels: say so now rather than fail mid-training.
  const missing = [...KERNELS, 'setNumThreads', 'getNumThreads', 'isa', 'supportedIsas'].filter(
    (k) => typeof (addon as unknown as Record<string, unknown>)[k] !== 'function',
  );
  if (missing.length > 0) {
    throw new NativeBackendUnavailable(`native addon ${file} lacks ${missing.join(', ')}; rebuild it with \`npm run build:native -- --force\`.`, file);
  }
  loaded = Object.freeze({ ...addon, name: 'native' as const });
  return loaded;
}

/**
 * The variant of the C kernels in use (the best this CPU runs, or MAGRPO_ISA's) and every variant
 * this CPU runs, best last. Loads the addon.
 */
export function nativeIsa(): { isa: NativeIsa; supported: NativeIsa[] } {
  const addon = loadNativeBackend() as unknown as IsaInfo;
  return { isa: addon.isa(), supported: addon.supportedIsas() };
}
