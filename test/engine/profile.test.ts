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
import { profiled } from '../../src/engine/profile.js';

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
});
