/** Runs a suite once per kernel backend, so model-level tests cover `native` and `reference`. */
import { describe } from 'node:test';
import { type BackendName, setBackend, setDType } from '../../src/engine/runtime.js';

export const BACKENDS: BackendName[] = ['reference', 'native'];

export function describeEachBackend(title: string, fn: (backend: BackendName) => void): void {
  for (const name of BACKENDS) {
    describe(`${title} [${name}]`, () => {
      // setBackend throws with an explanation if the native addon is not built: that is a failure.
      setDType('float32');
      setBackend(name);
      fn(name);
    });
  }
}
