#!/usr/bin/env node
// The native kernel addon: native/*.c -> native/build/Release/magrpo.node, with node-gyp.
//   node scripts/build-native.mjs             build when the .node is older than its inputs
//   node scripts/build-native.mjs --force     rebuild anyway
//   node scripts/build-native.mjs --install   npm's install step: nothing when an addon (prebuilt
//                                             or built) already loads here, else build; a failed
//                                             build warns in one line and leaves the install working
//   node scripts/build-native.mjs --prebuild  rebuild and copy the stripped addon to
//                                             native/prebuilds/<platform>-<arch>/magrpo.napi.<libc>.node
//                                             (the node-gyp-build convention; `npm pack` runs it)
// The addon links no BLAS and no OpenMP runtime (native/README.md), so a build needs only a C
// compiler and Python 3; node-gyp comes from magrpo's dependencies (or npm's own copy).
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const nativeDir = join(root, 'native');
const output = join(nativeDir, 'build', 'Release', 'magrpo.node');
const sources = readdirSync(nativeDir).filter((f) => f.endsWith('.c') || f.endsWith('.h'));
const inputs = [...sources.map((f) => join(nativeDir, f)), join(nativeDir, 'binding.gyp'), fileURLToPath(import.meta.url)];
const args = process.argv.slice(2);
const mode = args.includes('--install') ? 'install' : args.includes('--prebuild') ? 'prebuild' : 'build';
const force = args.includes('--force');
const require = createRequire(import.meta.url);

const say = (m) => console.error(`magrpo: ${m}`);
const tools =
  process.platform === 'darwin'
    ? 'the Xcode command line tools (`xcode-select --install`)'
    : 'a C compiler and Python 3 (`apt-get install build-essential python3`)';

function upToDate() {
  if (!existsSync(output)) return false;
  const built = statSync(output).mtimeMs;
  return inputs.every((f) => statSync(f).mtimeMs < built);
}

/** The addon node-gyp-build picks here, if it loads (in a child: a crash must not end this script). */
function loadableAddon() {
  let file;
  try {
    file = require('node-gyp-build').resolve(nativeDir);
  } catch {
    return null;
  }
  const r = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(file)}).isa()`], { stdio: 'ignore', env: { ...process.env, MAGRPO_BLAS: 'builtin' } });
  return r.status === 0 ? file : null;
}

function nodeGyp() {
  try {
    return require.resolve('node-gyp/bin/node-gyp.js');
  } catch {
    // npm runs install scripts with its own node-gyp's path here.
    const npmGyp = process.env.npm_config_node_gyp;
    return npmGyp && existsSync(npmGyp) ? npmGyp : null;
  }
}

function build() {
  const gyp = nodeGyp();
  if (gyp === null) return 'node-gyp is not installed (run `npm install` first)';
  // Node's own headers sit next to the binary in distribution packages (e.g. /usr/bin/node ->
  // /usr/include/node); without them node-gyp downloads the headers of this Node version.
  const nodedir = resolve(dirname(process.execPath), '..');
  const nodedirArgs = existsSync(join(nodedir, 'include', 'node', 'node_api.h')) ? [`--nodedir=${nodedir}`] : [];
  const r = spawnSync(process.execPath, [gyp, 'rebuild', `--directory=${nativeDir}`, ...nodedirArgs, '--loglevel=warn'], { stdio: 'inherit' });
  if (r.status !== 0 || !existsSync(output)) return 'node-gyp failed (see its output above)';
  return null;
}

if (mode === 'install') {
  const found = loadableAddon();
  if (found !== null) {
    console.log(`magrpo: native addon ${found.slice(root.length + 1)} loads here`);
    process.exit(0);
  }
  say(`no prebuilt native addon for ${process.platform}-${process.arch}: building it from source`);
  const err = build();
  if (err !== null) {
    // Not fatal: MAGRPO_BACKEND=reference still works, and the runtime error says the same.
    say(`could not build the native addon (${err}); install ${tools}, then run \`npm rebuild magrpo\``);
  }
  process.exit(0);
}

if (!force && upToDate()) {
  console.log('build-native: native/build/Release/magrpo.node is up to date');
} else {
  const err = build();
  if (err !== null) {
    console.error(`build-native: ${err}; needs ${tools}.`);
    process.exit(1);
  }
  console.log('build-native: built native/build/Release/magrpo.node');
}

if (mode === 'prebuild') {
  const libc = process.platform === 'linux' ? (existsSync('/etc/alpine-release') ? '.musl' : '.glibc') : '';
  const dir = join(nativeDir, 'prebuilds', `${process.platform}-${process.arch}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const dest = join(dir, `magrpo.napi${libc}.node`);
  copyFileSync(output, dest);
  if (process.platform === 'linux') {
    try {
      execFileSync('strip', ['--strip-unneeded', dest]);
    } catch {
      console.warn('build-native: `strip` failed; the prebuilt addon keeps its symbols');
    }
  }
  // The copy in build/ would shadow the prebuilt one in this checkout (node-gyp-build looks there
  // first); keep it, since it is the same code, and say where the prebuilt one went.
  console.log(`build-native: prebuilt ${dest.slice(root.length + 1)} (${(statSync(dest).size / 1024).toFixed(0)} KiB)`);
}
