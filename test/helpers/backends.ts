/** Runs a suite once per kernel backend, so model-level tests cover `native` and `reference`. */
import { before, describe } from 'node:test';
import { type BackendName, setBackend, setDType } from '../../src/engine/runtime.js';

export const BACKENDS: BackendName[] = ['reference', 'native'];

export function describeEachBackend(title: string, fn: (backend: BackendName) => void): void {
  for (const name of BACKENDS) {
    describe(`${title} [${name}]`, () => {
      // Runs when the suite starts (not when it is declared), so each suite really uses `name`.
      // setBackend throws with an explanation if the native addon is not built: that is a failure.
      before(() => {
        setDType('float32');
        setBackend(name);
      });
      fn(name);
    });
  }
}
