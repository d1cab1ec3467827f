/** The problems resolveConfig reports for a trainer section, one `path: message` line each. */
import assert from 'node:assert/strict';
import { ConfigError, resolveConfig } from '../../src/rl/config.js';

export function configProblems(input: Record<string, unknown>): string[] {
  try {
    resolveConfig(input);
  } catch (e) {
    assert.ok(e instanceof ConfigError, String(e));
    return e.issues.map((i) => `${i.path}: ${i.message}`);
  }
  assert.fail('expected a ConfigError');
}
