/**
 * Installs magrpo as a user does: `npm pack` (its prepack compiles the TypeScript and puts the
 * prebuilt addon in native/prebuilds/), `npm install <tarball>` into a fresh project (dependencies
 * from the npm registry), trains 2 steps through the library API as in the README, then runs
 * `npx magrpo sample`; both must run the native backend from the installed package (the
 * MAGRPO_DEBUG=1 startup line names the addon). Also checks what the tarball holds and what the
 * prebuilt addon links.
 *
 * Slow (packing, a registry install): ~2-4 minutes on a quiet 2-core machine. MAGRPO_SKIP_PACK_TEST=1 skips it.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { optionalSkip } from '../helpers/skip.js';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const skip = optionalSkip('pack-opt-out', process.env.MAGRPO_SKIP_PACK_TEST === '1' && 'MAGRPO_SKIP_PACK_TEST=1');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const MINUTE = 60_000;

interface PackResult {
  filename: string;
  size: number;
  unpackedSize: number;
  files: { path: string; size: number }[];
}

/** The startup line of MAGRPO_DEBUG=1 (src/engine/runtime.ts). */
const STARTUP = /\[magrpo\] backend=native isa=(\S+) gemm=(.+?) addon=(\S+) threads=/;

describe('the npm package, installed as a user installs it', { skip, timeout: 20 * MINUTE }, () => {
  const work = mkdtempSync(join(tmpdir(), 'magrpo-pack-'));
  const project = join(work, 'project');
  after(() => rmSync(work, { recursive: true, force: true }));
  let pack: PackResult;

  it('npm pack: a lean tarball with the prebuilt addon, the compiled library, models and no tests', () => {
    const out = execFileSync(npm, ['pack', '--json', '--pack-destination', work], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    pack = (JSON.parse(out.slice(out.indexOf('['))) as PackResult[])[0];
    const paths = pack.files.map((f) => f.path);
    process.stderr.write(
      `# tarball ${pack.filename}: ${(pack.size / 1e6).toFixed(2)} MB packed, ${(pack.unpackedSize / 1e6).toFixed(2)} MB unpacked, ${paths.length} files\n`,
    );
    if (process.platform === 'linux' && process.arch === 'x64')
      assert.ok(paths.includes('native/prebuilds/linux-x64/magrpo.napi.glibc.node'), 'the linux-x64 prebuild');
    // The models the demos and tests start from; models/small (12 MB, used by neither) stays in the repository.
    for (const p of [
      'dist/src/index.js',
      'dist/src/cli/main.js',
      'native/binding.gyp',
      'scripts/build-native.mjs',
      'models/micro/model.safetensors',
      'models/base/model.safetensors',
      'models/coder/model.safetensors',
    ])
      assert.ok(paths.includes(p), p);
    assert.ok(!paths.some((p) => p.startsWith('models/small/')), 'models/small is not packed');
    const stray = paths.filter(
      (p) => /^(test|src\/.*\.ts$|native\/build\/|bench\/|results\/|data\/corpus\/|\.cache|\.stamps|test-artifacts)/.test(p) && !p.endsWith('.d.ts'),
    );
    assert.deepEqual(stray, [], 'no tests, TypeScript sources, native build folder, caches, results or pretraining corpus');
    assert.ok(pack.size < 20e6, `tarball ${pack.size} bytes`);
  });

  it('the prebuilt addon links only libc, libm, libdl and libpthread and needs glibc 2.28 at most', {
    skip: optionalSkip(
      'prebuild-linux-x64',
      (process.platform !== 'linux' || process.arch !== 'x64') && `no prebuilt addon for ${process.platform}-${process.arch}`,
    ),
  }, () => {
    const file = join(ROOT, 'native', 'prebuilds', 'linux-x64', 'magrpo.napi.glibc.node');
    const dyn = execFileSync('objdump', ['-p', '-T', file], { encoding: 'utf8' });
    const needed = [...dyn.matchAll(/NEEDED\s+(\S+)/g)].map((m) => m[1]).sort();
    assert.deepEqual(
      needed.filter((n) => !/^(lib(c|m|dl|pthread)\.so\.\d|ld-linux-x86-64\.so\.2)$/.test(n)),
      [],
      `NEEDED ${needed.join(' ')}`,
    );
    const versions = [...dyn.matchAll(/GLIBC_2\.(\d+)/g)].map((m) => Number(m[1]));
    assert.ok(Math.max(...versions) <= 28, `needs GLIBC_2.${Math.max(...versions)}`);
  });

  it('npm install <tarball> into a fresh project: the install step finds the prebuilt addon', () => {
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), `${JSON.stringify({ name: 'magrpo-user', private: true, type: 'module' }, null, 2)}\n`);
    const r = spawnSync(npm, ['install', '--no-audit', '--no-fund', '--foreground-scripts', join(work, pack.filename)], {
      cwd: project,
      encoding: 'utf8',
      timeout: 10 * MINUTE,
    });
    assert.equal(r.status, 0, `npm install failed:\n${r.stdout}\n${r.stderr}`);
    const log = r.stdout + r.stderr;
    if (process.platform === 'linux' && process.arch === 'x64')
      assert.match(log, /magrpo: native addon native\/prebuilds\/linux-x64\/magrpo\.napi\.glibc\.node loads here/);
    assert.ok(!existsSync(join(project, 'node_modules', 'magrpo', 'native', 'build')), 'nothing was compiled');
  });

  it('trains 2 steps through the library API and samples with `npx magrpo sample`, on the native backend of the package', () => {
    const pkg = join(project, 'node_modules', 'magrpo');
    const model = join(pkg, 'models', 'micro');
    writeFileSync(
      join(project, 'train.mjs'),
      `import { MAGRPOTrainer } from 'magrpo';
const items = [{ prompt: 'The cat sat on the mat.' }, { prompt: 'A ship sailed at dawn.' }];
const trainer = new MAGRPOTrainer({
  model: ${JSON.stringify(model)},
  task: {
    dataset: items,
    formatters: [(x) => \`Write a short summary:\\n\${x.prompt}\`, (x) => \`Write a detailed summary:\\n\${x.prompt}\`],
    reward: ({ completions: [short, long] }) => (long.length > 2 * short.length ? 1 : 0),
  },
  config: { num_generations: 2, max_new_tokens: 8, num_train_epochs: 1, agent_learning_rate: 1e-4, output_dir: 'runs/pack-test' },
});
await trainer.train();
console.log('trained');
`,
    );
    // No OpenBLAS in the child's search path is not something a test can arrange portably; the
    // addon reports which gemm it runs either way, and both are the package's addon.
    const env: NodeJS.ProcessEnv = { ...process.env, MAGRPO_DEBUG: '1', MAGRPO_NUM_THREADS: '2' };
    delete env.MAGRPO_BACKEND;
    const train = spawnSync(process.execPath, ['train.mjs'], { cwd: project, env, encoding: 'utf8', timeout: 10 * MINUTE });
    assert.equal(train.status, 0, `training failed:\n${train.stdout}\n${train.stderr}`);
    assert.match(train.stdout, /trained/);
    const line = train.stderr.match(STARTUP);
    assert.ok(line, `no native startup line in:\n${train.stderr.slice(0, 2000)}`);
    assert.ok(line[3].startsWith(join(pkg, 'native')), `addon ${line[3]} is the installed package's`);
    process.stderr.write(`# train: isa=${line[1]} gemm=${line[2]}\n# addon ${line[3]}\n`);
    assert.ok(
      readFileSync(join(project, 'runs', 'pack-test', 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n').length >= 1,
      'metrics were logged',
    );

    const sample = spawnSync(npm, ['exec', '--', 'magrpo', 'sample', '-m', model, '-p', 'Call me Ishmael.', '-n', '8', '--seed', '3'], {
      cwd: project,
      env,
      encoding: 'utf8',
      timeout: 5 * MINUTE,
    });
    assert.equal(sample.status, 0, `npx magrpo sample failed:\n${sample.stdout}\n${sample.stderr}`);
    assert.match(sample.stderr, STARTUP);
    assert.ok(sample.stdout.trim().length > 0, 'sample printed text');
  });

  it('with the builtin sgemm forced (a machine without OpenBLAS) the package still runs natively', () => {
    const pkg = join(project, 'node_modules', 'magrpo');
    const env: NodeJS.ProcessEnv = { ...process.env, MAGRPO_DEBUG: '1', MAGRPO_BLAS: 'builtin' };
    delete env.MAGRPO_BACKEND;
    const r = spawnSync(npm, ['exec', '--', 'magrpo', 'sample', '-m', join(pkg, 'models', 'micro'), '-p', 'Hello', '-n', '4'], {
      cwd: project,
      env,
      encoding: 'utf8',
      timeout: 5 * MINUTE,
    });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /backend=native isa=\S+ gemm=builtin (generic|avx2|avx512) \(MAGRPO_BLAS=builtin\)/);
  });
});
