import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SandboxError } from '../../src/sandbox/errors.js';
import { defaultOptions, resolveOptions } from '../../src/sandbox/options.js';

test('fills every default, keeping given values', () => {
  const options = resolveOptions({ cpuSeconds: 5, concurrency: undefined });
  assert.deepEqual(options, { ...defaultOptions(), cpuSeconds: 5 });
  assert.equal(options.perTestTimeoutSeconds, 10);
  assert.equal(options.maxTimeouts, 3);
});

test('reports every bad or unknown key at once, by path', () => {
  const bad = { cpuSeconds: 1.5, network: 'none', wallSecs: 3 } as unknown as Parameters<typeof resolveOptions>[0];
  assert.throws(
    () => resolveOptions(bad),
    (error: unknown) => {
      assert.ok(error instanceof SandboxError);
      assert.equal(error.code, 'BAD_OPTIONS');
      assert.deepEqual(
        error.issues.map((i) => i.message),
        [
          'cpuSeconds: got 1.5, expected a positive integer',
          "network: got \"none\", expected 'auto' | 'namespace' | 'socket-patch'",
          'wallSecs: got 3, expected no such option (known: python, cpuSeconds, wallSeconds, memoryMb, maxProcesses, maxFileBytes, tmpMb, maxOutputBytes, perTestTimeoutSeconds, maxTimeouts, concurrency, network)',
        ],
      );
      assert.deepEqual(
        error.issues.map((i) => i.path),
        ['cpuSeconds', 'network', 'wallSecs'],
      );
      return true;
    },
  );
});
