#!/usr/bin/env node
// Builds the native kernel addon: native/*.c -> native/build/Release/magrpo.node.
// Finds OpenBLAS (and libomp on macOS), then runs the node-gyp of node_modules against the local
// Node headers. Skips the build when the .node is newer than its inputs; `--force` rebuilds.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const nativeDir = join(root, 'native');
const output = join(nativeDir, 'build', 'Release', 'magrpo.node');
const sources = readdirSync(nativeDir).filter((f) => f.endsWith('.c') || f.endsWith('.h'));
const inputs = [...sources.map((f) => join(nativeDir, f)), join(nativeDir, 'binding.gyp'), fileURLToPath(import.meta.url)];
const force = process.argv.includes('--force');

function die(message) {
  console.error(`build-native: ${message}`);
  process.exit(1);
}

function run(cmd, args) {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
}

function upToDate() {
  if (!existsSync(output)) return false;
  const built = statSync(output).mtimeMs;
  return inputs.every((f) => statSync(f).mtimeMs < built);
}

// OpenBLAS's own cblas.h declares openblas_set_num_threads; netlib's does not.
const isOpenblasHeader = (dir) => existsSync(join(dir, 'cblas.h')) && readFileSync(join(dir, 'cblas.h'), 'utf8').includes('openblas_set_num_threads');
const hasOpenblasLib = (dir) => ['libopenblas.so', 'libopenblas.dylib', 'libopenblas.a'].some((f) => existsSync(join(dir, f)));

/**
 * (include, lib) folder pairs, best first. The OpenMP build of OpenBLAS comes first: it shares the
 * OpenMP thread pool of our loops, while the pthreads build brings a second pool whose spinning
 * threads compete with ours for the cores.
 */
function candidatePairs() {
  const multiarch = existsSync('/usr/include') ? readdirSync('/usr/include').filter((d) => /-linux-gnu/.test(d)) : [];
  const variant = (v) => multiarch.map((m) => [join('/usr/include', m, v), join('/usr/lib', m, v)]);
  const pkg = (flag) => (run('pkg-config', [flag, 'openblas']) ?? '').split(/\s+/).filter(Boolean)[0]?.slice(2) ?? '';
  return [
    ...variant('openblas-openmp'),
    [pkg('--cflags-only-I'), pkg('--libs-only-L')],
    ...variant('openblas-pthread'),
    ...['/opt/homebrew/opt/openblas', '/usr/local/opt/openblas'].map((b) => [join(b, 'include'), join(b, 'lib')]),
    ...['/usr/include/openblas', '/usr/local/include', '/usr/include'].flatMap((inc) => ['/usr/lib64', '/usr/local/lib', '/usr/lib'].map((lib) => [inc, lib])),
  ];
}

function findOpenblas() {
  const found = candidatePairs().find(([inc, lib]) => inc && lib && isOpenblasHeader(inc) && hasOpenblasLib(lib));
  if (!found) {
    const hint = process.platform === 'darwin' ? 'brew install openblas' : 'apt-get install libopenblas-dev';
    die(`OpenBLAS headers (cblas.h) and library not found. Install them with \`${hint}\` and rerun \`npm run build:native\`.`);
  }
  const [include, libdir] = found;
  if (process.platform === 'linux' && !libdir.includes('openmp')) {
    console.warn(
      'build-native: note: this OpenBLAS has its own thread pool; `apt-get install libopenblas-openmp-dev` lets it share ours (faster when both run).',
    );
  }
  return { include, libdir };
}

// macOS: Apple clang has no OpenMP runtime; use Homebrew's libomp when present, else build serial loops.
function libompPrefix() {
  if (process.platform !== 'darwin') return '';
  return (
    run('brew', ['--prefix', 'libomp']) ?? ['/opt/homebrew/opt/libomp', '/usr/local/opt/libomp'].find((d) => existsSync(join(d, 'include', 'omp.h'))) ?? ''
  );
}

if (!force && upToDate()) {
  console.log('build-native: native/build/Release/magrpo.node is up to date');
  process.exit(0);
}

const { include, libdir } = findOpenblas();
const ompPrefix = libompPrefix();
const openmp = process.platform !== 'darwin' || ompPrefix !== '';

// Node's own headers sit next to the binary (e.g. /usr/bin/node -> /usr/include/node); without
// them node-gyp would try to download headers, which needs the network.
const nodedir = resolve(dirname(process.execPath), '..');
const nodedirArgs = existsSync(join(nodedir, 'include', 'node', 'node_api.h')) ? [`--nodedir=${nodedir}`] : [];
if (nodedirArgs.length === 0) console.warn(`build-native: no Node headers under ${nodedir}/include/node; node-gyp will look for downloaded headers`);

const nodeGyp = join(root, 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
if (!existsSync(nodeGyp)) die('node-gyp is missing from node_modules; run `npm install` first.');

console.log(`build-native: OpenBLAS ${include} (lib ${libdir}), OpenMP ${openmp ? 'on' : 'off'}`);
const args = [
  nodeGyp,
  'rebuild',
  `--directory=${nativeDir}`,
  ...nodedirArgs,
  '--loglevel=warn',
  '--',
  `-Dopenblas_include=${include}`,
  `-Dopenblas_libdir=${libdir}`,
  `-Dopenmp=${openmp ? 1 : 0}`,
  `-Dlibomp_prefix=${ompPrefix}`,
];
const result = spawnSync(process.execPath, args, { stdio: 'inherit' });
if (result.status !== 0 || !existsSync(output)) die('node-gyp failed (see the output above).');
console.log('build-native: built native/build/Release/magrpo.node');
