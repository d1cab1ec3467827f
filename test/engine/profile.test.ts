/** MAGRPO_DEBUG=2: the timing wrapper computes what the backend computes and reports every kernel it saw. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { KERNELS } from '../../src/engine/backend.js';
import { referenceBackend } from '../../src/engine/backends/reference.js';
import { kernelClock, profiled, timedNative } from '../../src/engine/profile.js';

const tmp = mkdtempSync(join(tmpdir(), 'magrpo-profile-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

describe('per-kernel timings', () => {
  it('wraps every kernel and leaves results unchanged', () => {
    const be = profiled(referenceBackend);
    assert.equal(be.name, 'reference');
    for (const k of KERNELS) assert.notEqual(be[k], referenceBackend[k], k);
    const y = Float32Array.from([1, 2, 3]);
    be.axpy(3, 2, Float32Array.from([1, 1, 1]), y);
    assert.deepEqual(Array.from(y), [3, 4, 5]);
    // Kernels that call other kernels through the backend object still work unbound.
    const P = new Float32Array(2);
    const out = new Float32Array(2);
    be.attention(1, 1, 2, 2, 1, 1, 2, Float32Array.from([1, 0]), Float32Array.from([1, 0, 0, 1]), Float32Array.from([1, 2, 3, 4]), P, out, null, false, 1, 1);
    assert.ok(Math.abs(P[0] + P[1] - 1) < 1e-6);
  });

  it('prints a table of the kernels a process called when MAGRPO_DEBUG=2, and of gemm shapes at 3', () => {
    const script = join(tmp, 'run.ts');
    const runtime = fileURLToPath(new URL('../../src/engine/runtime.ts', import.meta.url));
    writeFileSync(
      script,
      `import { backend } from ${JSON.stringify(runtime)};\nconst C = new Float32Array(4);\nbackend().gemm(false, false, 2, 2, 2, 1, new Float32Array(4), 0, 2, new Float32Array(4), 0, 2, 0, C, 0, 2);\n`,
    );
    const run = (debug: string) =>
      spawnSync(process.execPath, [...process.execArgv, script], {
        env: { ...process.env, MAGRPO_DEBUG: debug, MAGRPO_BACKEND: 'reference' },
        encoding: 'utf8',
      });
    const on = run('2');
    assert.equal(on.status, 0, on.stderr);
    assert.match(on.stderr, /kernel timings \(MAGRPO_DEBUG=2\)/);
    assert.match(on.stderr, /^ {2}gemm +1 /m);
    assert.doesNotMatch(on.stderr, /gemm shapes/);
    assert.doesNotMatch(run('1').stderr, /kernel timings/);
    const shapes = run('3');
    assert.equal(shapes.status, 0, shapes.stderr);
    assert.match(shapes.stderr, /gemm shapes/);
    assert.match(shapes.stderr, /^ {2}NN 2×2×2 +1 /m);
  });

  it('MAGRPO_DEBUG_SKIP_S leaves out the calls of the first seconds, and rejects what is not a number of seconds', () => {
    const script = join(tmp, 'skip.mts');
    const runtime = fileURLToPath(new URL('../../src/engine/runtime.ts', import.meta.url));
    // One product at once, then two more 1 s later: a 0.3 s skip counts only the two. The clock is
    // the script's own (performance.now, which the profiler reads, replaced before the engine
    // loads), so how long loading takes on a busy machine cannot move a call across the 0.3 s.
    writeFileSync(
      script,
      [
        'let now = 0;',
        'performance.now = () => now;',
        `const { backend } = await import(${JSON.stringify(runtime)});`,
        'const C = new Float32Array(4);',
        'const g = () => backend().gemm(false, false, 2, 2, 2, 1, new Float32Array(4), 0, 2, new Float32Array(4), 0, 2, 0, C, 0, 2);',
        'g();',
        'now = 1000;',
        'g();',
        'g();',
        '',
      ].join('\n'),
    );
    const run = (skip: string) =>
      spawnSync(process.execPath, [...process.execArgv, script], {
        env: { ...process.env, MAGRPO_DEBUG: '2', MAGRPO_BACKEND: 'reference', MAGRPO_DEBUG_SKIP_S: skip },
        encoding: 'utf8',
      });
    const all = run('');
    assert.equal(all.status, 0, all.stderr);
    assert.match(all.stderr, /^ {2}gemm +3 /m);
    const skipped = run('0.3');
    assert.equal(skipped.status, 0, skipped.stderr);
    assert.match(skipped.stderr, /after the first 0\.3 s \(MAGRPO_DEBUG_SKIP_S\)/);
    assert.match(skipped.stderr, /^ {2}gemm +2 /m);
    const none = run('60');
    assert.equal(none.status, 0, none.stderr);
    assert.match(none.stderr, /ended within MAGRPO_DEBUG_SKIP_S \(60\.0 s\); nothing was counted/);
    for (const bad of ['soon', '-1']) {
      const r = run(bad);
      assert.notEqual(r.status, 0, `MAGRPO_DEBUG_SKIP_S=${bad} was accepted`);
      assert.match(r.stderr, /MAGRPO_DEBUG_SKIP_S must be a number of seconds ≥ 0/);
    }
  });
});

describe('timedNative', () => {
  it("counts a native call outside the kernel interface (a model's fused step) as kernel time once kernels are timed", () => {
    const busy = (ms: number) => () => {
      const t = performance.now();
      while (performance.now() - t < ms);
      return 7;
    };
    profiled(referenceBackend, false);
    const before = kernelClock();
    assert.equal(timedNative('fusedStep', busy(20)), 7);
    assert.ok(kernelClock() - before >= 20, `counted ${kernelClock() - before} ms of a 20 ms call`);
  });
});
