/**
 * ISA variants of the native kernels: the addon runs the best variant this CPU supports unless
 * MAGRPO_ISA names another, rejects variants the CPU cannot run, and every kernel test of
 * backends.test.ts passes under every variant this machine runs (the default one runs in-process
 * there; the others in child processes here).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type NativeIsa, nativeAddonFile, nativeIsa } from '../../src/engine/backends/native.js';

const ALL: NativeIsa[] = ['generic', 'avx2', 'avx512'];
const { isa, supported } = nativeIsa();
const KERNEL_TESTS = fileURLToPath(new URL('./backends.test.ts', import.meta.url));

/** Loads the addon in a fresh process with MAGRPO_ISA = `value`: its isa(), or why it failed to load. */
function loadWith(value: string): { isa?: string; error?: string } {
  const code = `try { console.log(JSON.stringify({ isa: require(${JSON.stringify(nativeAddonFile())}).isa() })); }
    catch (e) { console.log(JSON.stringify({ error: e.message })); }`;
  const r = spawnSync(process.execPath, ['-e', code], { env: { ...process.env, MAGRPO_ISA: value }, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

describe('native ISA dispatch', () => {
  it('runs the best variant this CPU supports, or the one MAGRPO_ISA names', () => {
    assert.equal(supported[0], 'generic');
    assert.deepEqual(supported, ALL.slice(0, supported.length)); // each variant needs the features of those before it
    const forced = process.env.MAGRPO_ISA;
    assert.equal(isa, forced && forced !== 'auto' ? forced : supported.at(-1));
  });

  it('MAGRPO_ISA selects each supported variant; an unknown or unsupported one fails the load, naming the variable', () => {
    for (const v of supported) assert.deepEqual(loadWith(v), { isa: v });
    assert.deepEqual(loadWith('auto'), { isa: supported.at(-1) });
    assert.match(loadWith('sse9').error ?? '', /MAGRPO_ISA=sse9 is not one of generic, avx2, avx512/);
    for (const v of ALL.filter((a) => !supported.includes(a))) {
      assert.match(loadWith(v).error ?? '', new RegExp(`MAGRPO_ISA=${v}: this CPU cannot run it`));
    }
  });

  for (const v of supported.filter((s) => s !== isa)) {
    it(`every kernel matches the reference backend with MAGRPO_ISA=${v}`, () => {
      // NODE_TEST_CONTEXT would make the child report to this runner instead of printing TAP.
      const { NODE_TEST_CONTEXT: _, ...env } = process.env;
      const r = spawnSync(process.execPath, [...process.execArgv, '--test', '--test-reporter=tap', KERNEL_TESTS], {
        env: { ...env, MAGRPO_ISA: v },
        encoding: 'utf8',
      });
      const failed = r.stdout
        .split('\n')
        .filter((l) => /^\s*not ok|error:/.test(l))
        .join('\n');
      assert.equal(r.status, 0, `backends.test.ts under MAGRPO_ISA=${v} failed:\n${failed || r.stderr}`);
      assert.match(r.stdout, /^# pass [1-9]/m);
      assert.match(r.stdout, /^# fail 0$/m);
    });
  }
});
