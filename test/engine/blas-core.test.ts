/**
 * Choosing the OpenBLAS core: the decision on made-up probe results (a Sapphire Rapids where
 * OpenBLAS falls back to Prescott, wrong results, too little gain), the user's OPENBLAS_CORETYPE
 * winning untouched, the cache and what invalidates it; then the real probe on this machine.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { nativeAddonFile } from '../../src/engine/backends/native.js';
import { AUTO_MARKER, chooseCore, coresToTry, defaultCacheFile, lookup, selectBlasCore } from '../../src/engine/blas-core.js';
import { type CoreProbe, parseVerbose, probeCore, stamp, versionFromPath } from '../../src/engine/blas-probe.js';
import { cpuInfo, parseCpuInfo } from '../../src/engine/cpu.js';

const fixture = (name: string) => parseCpuInfo(readFileSync(join(import.meta.dirname, '..', 'fixtures', 'cpuinfo', `${name}.txt`), 'utf8'), 'x64', 2);
const spr = fixture('sapphire-rapids');
const zen3 = fixture('zen3');

const tmp = mkdtempSync(join(tmpdir(), 'magrpo-blas-core-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

/** A stand-in for the BLAS library and the addon, so their stamps can change. */
const lib = join(tmp, 'libopenblasp-r0.3.21.so');
const addon = join(tmp, 'magrpo.node');
writeFileSync(lib, 'lib');
writeFileSync(addon, 'addon');

/** Probe results of a Sapphire Rapids with Debian's OpenBLAS 0.3.21 (the numbers). */
function sprProbe(core: string | null): CoreProbe {
  const base = { maxError: 1e-7, correct: true, n: 512, lib: { path: lib, size: 3, mtimeMs: 0 }, version: '0.3.21' };
  const rate = (gflops: number) => ({ gflops, wallGflops: gflops });
  if (core === null) return { ...base, requested: null, core: 'Prescott', accepted: true, ...rate(32) };
  if (core === 'Cooperlake') return { ...base, requested: core, core: 'Prescott', accepted: false, ...rate(32) }; // "Core not found" in 0.3.21
  if (core === 'SkylakeX') return { ...base, requested: core, core, accepted: true, ...rate(135) };
  return { ...base, requested: core, core, accepted: true, ...rate(core === 'Haswell' ? 95 : 60) };
}

/** A probe function that records its calls; results carry the stand-in library's current stamp. */
function recorder(fn: (core: string | null) => CoreProbe) {
  const calls: (string | null)[] = [];
  const probe = (_addon: string, core: string | null) => {
    calls.push(core);
    return { ...fn(core), lib: stamp(lib) };
  };
  return { calls, probe };
}

describe('choosing a core from probe results', () => {
  it('tries the cores ranked above the one OpenBLAS picks (all of them when it picks an unranked one)', () => {
    assert.deepEqual(coresToTry(spr, 'Prescott'), ['Cooperlake', 'SkylakeX', 'Haswell', 'Zen', 'Sandybridge']);
    assert.deepEqual(coresToTry(spr, 'SkylakeX'), ['Cooperlake']);
    assert.deepEqual(coresToTry(spr, 'COOPERLAKE'), [], 'names compare case-insensitively');
    assert.deepEqual(coresToTry(zen3, 'Zen'), []);
  });

  it('Sapphire Rapids on OpenBLAS 0.3.21: SkylakeX, since Cooperlake is not accepted by that version', () => {
    const c = chooseCore(sprProbe(null), coresToTry(spr, 'Prescott').map(sprProbe));
    assert.equal(c.core, 'SkylakeX');
    assert.match(c.reason, /picks Prescott here \(32 GFLOP\/s.*SkylakeX runs 135/);
    assert.deepEqual(c.warnings, []);
  });

  it('a faster core with wrong results is not used, and says so', () => {
    const wrong = { ...sprProbe('SkylakeX'), maxError: 3e-3, correct: false };
    const c = chooseCore(sprProbe(null), [wrong, sprProbe('Haswell')]);
    assert.equal(c.core, 'Haswell');
    assert.equal(c.warnings.length, 1);
    assert.match(c.warnings[0], /SkylakeX disagrees with the reference backend \(error 3\.0e-3\); not using it/);
  });

  it("keeps OpenBLAS's own core unless a candidate is at least 10% faster", () => {
    const own = { ...sprProbe(null), core: 'Haswell', gflops: 100 };
    assert.equal(chooseCore(own, [{ ...sprProbe('SkylakeX'), gflops: 105 }]).core, null);
    assert.equal(chooseCore(own, [{ ...sprProbe('SkylakeX'), gflops: 115 }]).core, 'SkylakeX');
    assert.match(chooseCore(own, []).reason, /OpenBLAS picks Haswell, the first-ranked core/);
  });

  it('a failed probe is reported and chooses nothing', () => {
    const failed: CoreProbe = { ...sprProbe(null), error: 'probe of core (default) failed: boom', gflops: 0, correct: false };
    const c = chooseCore(failed, []);
    assert.equal(c.core, null);
    assert.deepEqual(c.warnings, ['probe of core (default) failed: boom']);
  });
});

describe('selectBlasCore', () => {
  const never = () => {
    throw new Error('must not probe');
  };

  it("never changes or removes a user's OPENBLAS_CORETYPE, and does not probe", () => {
    for (const value of ['Haswell', 'Prescott', '', 'NoSuchCore']) {
      const env: NodeJS.ProcessEnv = { OPENBLAS_CORETYPE: value };
      const s = selectBlasCore(addon, { env, cpu: spr, cacheFile: join(tmp, 'never.json'), probe: never });
      assert.equal(s.source, 'user');
      assert.equal(s.coretype, value);
      assert.deepEqual(env, { OPENBLAS_CORETYPE: value });
    }
    // a value that differs from magrpo's marker is the user's too
    const env: NodeJS.ProcessEnv = { OPENBLAS_CORETYPE: 'Haswell', [AUTO_MARKER]: 'SkylakeX' };
    assert.equal(selectBlasCore(addon, { env, cpu: spr, cacheFile: join(tmp, 'never.json'), probe: never }).source, 'user');
    assert.equal(env.OPENBLAS_CORETYPE, 'Haswell');
  });

  it('keeps a core a magrpo parent process chose, without probing', () => {
    const env: NodeJS.ProcessEnv = { OPENBLAS_CORETYPE: 'SkylakeX', [AUTO_MARKER]: 'SkylakeX' };
    const s = selectBlasCore(addon, { env, cpu: spr, cacheFile: join(tmp, 'never.json'), probe: never });
    assert.equal(s.source, 'auto');
    assert.equal(env.OPENBLAS_CORETYPE, 'SkylakeX');
  });

  it('MAGRPO_BLAS_PROBE=0 and worker threads leave OpenBLAS alone', () => {
    const env: NodeJS.ProcessEnv = { MAGRPO_BLAS_PROBE: '0' };
    assert.equal(selectBlasCore(addon, { env, cpu: spr, cacheFile: join(tmp, 'never.json'), probe: never }).source, 'disabled');
    assert.equal(selectBlasCore(addon, { env: {}, cpu: spr, cacheFile: join(tmp, 'never.json'), probe: never, mainThread: false }).source, 'worker');
    assert.equal(env.OPENBLAS_CORETYPE, undefined);
  });

  it('sets the better core with its marker, then answers from the cache until CPU, addon or library change', () => {
    const cacheFile = join(tmp, 'cache', 'blas-core.json');
    const { calls, probe } = recorder(sprProbe);
    const run = (cpu = spr) => {
      const env: NodeJS.ProcessEnv = {};
      const s = selectBlasCore(addon, { env, cpu, cacheFile, probe, warn: () => {} });
      return { s, env };
    };
    const first = run();
    assert.equal(first.s.source, 'auto');
    assert.equal(first.s.fromCache, false);
    assert.deepEqual(first.env, { OPENBLAS_CORETYPE: 'SkylakeX', [AUTO_MARKER]: 'SkylakeX' });
    assert.deepEqual(calls, [null, 'Cooperlake', 'SkylakeX', 'Haswell', 'Zen', 'Sandybridge']);

    calls.length = 0;
    const second = run();
    assert.equal(second.s.fromCache, true);
    assert.equal(second.env.OPENBLAS_CORETYPE, 'SkylakeX');
    assert.deepEqual(calls, [], 'cached: no probe');

    // Another CPU (other flags): probed again; both entries stay in the file.
    run({ ...spr, flags: spr.flags.filter((f) => f !== 'avx512_bf16'), isa: { ...spr.isa, avx512bf16: false } });
    assert.equal(calls.length > 0, true);
    calls.length = 0;
    run();
    assert.deepEqual(calls, [], 'the first CPU is still cached');

    // A rebuilt addon: probed again.
    utimesSync(addon, new Date(), new Date(Date.now() + 5000));
    run();
    assert.equal(calls[0], null);
    calls.length = 0;

    // An upgraded BLAS library (same key, other file): probed again.
    writeFileSync(lib, 'library v2');
    run();
    assert.equal(calls[0], null);
    calls.length = 0;

    // A corrupt cache file: probed again, and rewritten.
    writeFileSync(cacheFile, '{not json');
    run();
    assert.equal(calls[0], null);
    assert.equal(JSON.parse(readFileSync(cacheFile, 'utf8')).version, 1);
  });

  it('when OpenBLAS already picks the best core, sets nothing', () => {
    const env: NodeJS.ProcessEnv = {};
    const { calls, probe } = recorder((core) => ({ ...sprProbe(core), core: 'Zen', requested: core }));
    const s = selectBlasCore(addon, { env, cpu: zen3, cacheFile: join(tmp, 'zen3.json'), probe, warn: () => {} });
    assert.equal(s.source, 'default');
    assert.deepEqual(env, {});
    assert.deepEqual(calls, [null]);
  });

  it('a probe that failed is not cached: the next start tries again', () => {
    const cacheFile = join(tmp, 'failed.json');
    const { calls, probe } = recorder((core) => ({ ...sprProbe(core), error: 'probe of core (default) failed: timed out', correct: false, gflops: 0 }));
    const warnings: string[] = [];
    for (let i = 0; i < 2; i++) {
      const env: NodeJS.ProcessEnv = {};
      assert.equal(selectBlasCore(addon, { env, cpu: spr, cacheFile, probe, warn: (m) => warnings.push(m) }).source, 'default');
      assert.deepEqual(env, {});
    }
    assert.deepEqual(calls, [null, null]);
    assert.equal(warnings.length, 2);
    assert.match(warnings[0], /timed out/);
  });

  it('cache location follows XDG_CACHE_HOME', () => {
    assert.equal(defaultCacheFile({ XDG_CACHE_HOME: '/x/cache' }), '/x/cache/magrpo/blas-core.json');
    assert.match(defaultCacheFile({}), /\.cache\/magrpo\/blas-core\.json$/);
    assert.equal(lookup(join(tmp, 'absent.json'), 'k'), null);
  });
});

describe('the probe, for real', () => {
  it('parses what OpenBLAS prints at OPENBLAS_VERBOSE=2', () => {
    assert.deepEqual(parseVerbose('Core: Cooperlake\n'), { core: 'Cooperlake', notFound: false });
    assert.deepEqual(parseVerbose('Core not found: Cooperlake\nCore: Cooperlake\n'), { core: 'Cooperlake', notFound: true });
    assert.deepEqual(parseVerbose(''), { core: null, notFound: false });
    assert.equal(versionFromPath('/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblasp-r0.3.21.so'), '0.3.21');
    assert.equal(versionFromPath('/usr/lib/libblas.so.3'), null);
  });

  it("runs OpenBLAS's own core here: reported, correct against the reference, timed", () => {
    const p = probeCore(nativeAddonFile(), null, { n: 256, seconds: 0.02, reps: 1 });
    assert.equal(p.error, undefined);
    assert.ok(p.core !== null && p.core.length > 0, 'OpenBLAS names its core');
    assert.equal(p.correct, true, `max error ${p.maxError}`);
    assert.ok(p.maxError < 1e-5);
    assert.ok(p.gflops > 0 && p.wallGflops > 0);
  });

  it('an unknown core name is reported as not accepted', () => {
    const p = probeCore(nativeAddonFile(), 'NoSuchCore', { n: 64, seconds: 0.01, reps: 1 });
    assert.equal(p.accepted, false);
    assert.equal(p.correct, true, 'OpenBLAS falls back to its own choice');
  });

  it('selects for this machine with a fresh cache, and the second time from it', () => {
    const cacheFile = join(tmp, 'real.json');
    const env: NodeJS.ProcessEnv = {};
    const s = selectBlasCore(nativeAddonFile(), { env, cpu: cpuInfo(), cacheFile, warn: (m) => assert.fail(m) });
    assert.ok(s.source === 'default' || s.source === 'auto');
    assert.equal(s.entry?.defaultProbe.correct, true);
    assert.equal(env.OPENBLAS_CORETYPE, s.entry?.choice.core ?? undefined);
    const again = selectBlasCore(nativeAddonFile(), { env: {}, cpu: cpuInfo(), cacheFile, probe: () => assert.fail('cached') });
    assert.equal(again.fromCache, true);
  });
});
