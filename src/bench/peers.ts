/**
 * The engines `magrpo bench` compares against, found on this machine: Debian's PyTorch
 * (/usr/bin/python3, `python3-torch`, on the same OpenBLAS), a PyPI PyTorch in a virtualenv
 * (MAGRPO_TORCH_PYTHON, a .venv, or the learner's .cache/venv-learner), and llama.cpp through
 * `llama-cpp-python` in any of those interpreters (sampling only, on the bench models written as
 * GGUF). Each is optional; the bench says which it found, which it could not, and with which
 * settings each ran.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** One way to run a peer; the bench keeps, per figure, the best variant. */
export interface PeerVariant {
  label: string;
  /** Environment added to the peer's own defaults. */
  env: Record<string, string>;
  /**
   * llama.cpp: the GGUF matrix type this variant loads. Variants of different weights are not
   * settings of one engine but different work: each weight type gets its own row (best of its
   * settings), never the best of both.
   */
  weights?: 'f32' | 'f16';
}

export interface Peer {
  id: 'torch-debian' | 'torch-pypi' | 'llama.cpp';
  name: string;
  /** Installed here. */
  found: boolean;
  /** Found and runnable by this bench. */
  runnable: boolean;
  /** Why it is not found or not runnable. */
  why?: string;
  python?: string;
  version?: string;
  variants: PeerVariant[];
}

interface PythonTorch {
  python: string;
  torch?: { version: string; file: string };
  llama?: { version: string; file: string };
}

/** What one Python interpreter has: torch and llama_cpp, with versions and where they live. */
function inspectPython(python: string): PythonTorch {
  const code = `import json
out = {}
for name in ("torch", "llama_cpp"):
    try:
        m = __import__(name)
        out[name] = {"version": getattr(m, "__version__", "?"), "file": m.__file__}
    except Exception:
        pass
print(json.dumps(out))`;
  const r = spawnSync(python, ['-c', code], { encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) return { python };
  try {
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '{}');
    return { python, torch: out.torch, llama: out.llama_cpp };
  } catch {
    return { python };
  }
}

/** Debian installs Python packages under /usr/lib/python3/dist-packages; pip never does. */
const isDebianPackage = (file: string) => file.startsWith('/usr/lib/python3/dist-packages/');

/**
 * Interpreters that may hold a PyPI torch or llama_cpp: MAGRPO_TORCH_PYTHON first, then common
 * virtualenvs (the learner's .cache/venv-learner among them, made by scripts/setup.sh), then `python3`.
 */
export function pypiCandidates(root: string, env: NodeJS.ProcessEnv = process.env): string[] {
  const list = [
    env.MAGRPO_TORCH_PYTHON,
    join(root, '.venv', 'bin', 'python'),
    join(root, 'venv', 'bin', 'python'),
    join(root, '.cache', 'venv-learner', 'bin', 'python'),
    join(root, '.cache', 'venv-llama', 'bin', 'python'),
    join(homedir(), '.venv', 'bin', 'python'),
    env.VIRTUAL_ENV ? join(env.VIRTUAL_ENV, 'bin', 'python') : undefined,
  ].filter((p): p is string => p !== undefined && p !== '' && existsSync(p));
  return [...new Set([...list, 'python3'])];
}

/**
 * Finds the peers. `python` is the interpreter of Debian's PyTorch (--python); `threads` the
 * bench's thread count (PyTorch runs torch.set_num_threads(threads) in every variant).
 */
export function findPeers(python: string, root: string, threads: number, env: NodeJS.ProcessEnv = process.env): Peer[] {
  const seen = new Map<string, PythonTorch>();
  const inspect = (p: string) => {
    if (!seen.has(p)) seen.set(p, inspectPython(p));
    return seen.get(p) as PythonTorch;
  };
  const peers: Peer[] = [];

  const deb = inspect(python);
  // Debian's torch calls the system OpenBLAS: try its BLAS on 1 thread and on all of them, with
  // PyTorch's OpenMP defaults; and magrpo's own settings (passive waiting), which win on a machine
  // busy with other jobs, where spinning OpenMP threads wait for descheduled ones.
  const debVariants: PeerVariant[] = [...new Set([1, threads])].map((b) => ({ label: `BLAS threads ${b}`, env: { OPENBLAS_NUM_THREADS: String(b) } }));
  if (env.OMP_WAIT_POLICY === undefined && threads > 1) {
    debVariants.push({ label: `BLAS threads ${threads}, OMP_WAIT_POLICY=passive`, env: { OPENBLAS_NUM_THREADS: String(threads), OMP_WAIT_POLICY: 'passive' } });
  }
  if (deb.torch && isDebianPackage(deb.torch.file)) {
    peers.push({
      id: 'torch-debian',
      name: `PyTorch ${deb.torch.version} (Debian)`,
      found: true,
      runnable: true,
      python,
      version: deb.torch.version,
      variants: debVariants,
    });
  } else {
    peers.push({
      id: 'torch-debian',
      name: "Debian's PyTorch",
      found: false,
      runnable: false,
      why: deb.torch ? `${python} has torch from ${deb.torch.file}, not Debian's` : `not found: ${python} cannot import torch (apt-get install python3-torch)`,
      variants: [],
    });
  }

  const pypi = [...(deb.torch && !isDebianPackage(deb.torch.file) ? [python] : []), ...pypiCandidates(root, env)]
    .map(inspect)
    .find((p) => p.torch && !isDebianPackage(p.torch.file));
  // PyPI's torch multiplies on its bundled MKL: its defaults, and MKL on one thread under PyTorch's
  // own threads (as Debian's BLAS threads 1), which won sampling by a few percent on 2 cores.
  // Measured and left out (1m, 2 threads, AMD EPYC Zen 4): OMP_WAIT_POLICY=passive (training
  // 9,783 tokens/s vs 14,216 at its defaults, sampling b8 1,312 vs 4,556) and
  // torch.set_num_threads(1) (training 8,336) lose everywhere.
  const pypiVariants: PeerVariant[] = [{ label: 'its defaults', env: {} }];
  if (env.MKL_NUM_THREADS === undefined && threads > 1) pypiVariants.push({ label: 'MKL threads 1', env: { MKL_NUM_THREADS: '1' } });
  if (pypi?.torch) {
    peers.push({
      id: 'torch-pypi',
      name: `PyTorch ${pypi.torch.version} (PyPI)`,
      found: true,
      runnable: true,
      python: pypi.python,
      version: pypi.torch.version,
      variants: pypiVariants,
    });
  } else {
    peers.push({
      id: 'torch-pypi',
      name: 'PyTorch from PyPI',
      found: false,
      runnable: false,
      why: 'not found: no MAGRPO_TORCH_PYTHON or virtualenv with a pip-installed torch (pip install torch --index-url https://download.pytorch.org/whl/cpu)',
      variants: [],
    });
  }

  // llama.cpp: the first interpreter that imports llama_cpp. The bench writes each size as GGUF
  // twice (F32 and F16 matrices); llama.cpp runs each with n_threads = n_threads_batch = threads,
  // with its OpenMP defaults and, as Debian's PyTorch, with passive waiting.
  const llama = [python, ...pypiCandidates(root, env)].map(inspect).find((p) => p.llama);
  const llamaVariants: PeerVariant[] = [];
  for (const weights of ['f32', 'f16'] as const) {
    llamaVariants.push({ label: `${weights} weights`, env: {}, weights });
    if (env.OMP_WAIT_POLICY === undefined && threads > 1)
      llamaVariants.push({ label: `${weights} weights, OMP_WAIT_POLICY=passive`, env: { OMP_WAIT_POLICY: 'passive' }, weights });
  }
  peers.push(
    llama?.llama
      ? {
          id: 'llama.cpp',
          name: `llama.cpp (llama-cpp-python ${llama.llama.version})`,
          found: true,
          runnable: true,
          python: llama.python,
          version: llama.llama.version,
          variants: llamaVariants,
        }
      : {
          id: 'llama.cpp',
          name: 'llama.cpp (llama-cpp-python)',
          found: false,
          runnable: false,
          why: 'not found: no Python here imports llama_cpp (pip install llama-cpp-python)',
          variants: [],
        },
  );
  return peers;
}
