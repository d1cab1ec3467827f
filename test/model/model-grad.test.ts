/**
 * Whole-model gradients against central finite differences (float64, reference backend): the
 * cross-entropy of a left-padded batch w.r.t. a sample of every parameter of Llama and GPT-2.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { crossEntropy } from '../../src/engine/nn.js';
import { setBackend, setDType } from '../../src/engine/runtime.js';
import { backward, noGrad } from '../../src/engine/tensor.js';
import { loadModel } from '../../src/model/load.js';
import { prng } from '../helpers/gradcheck.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

describe('whole-model gradients vs finite differences (float64)', () => {
  const dirs: string[] = [];
  before(() => {
    setBackend('reference');
    setDType('float64');
  });
  after(() => {
    setDType('float32');
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  for (const arch of ['llama', 'gpt2'] as const) {
    it(`${arch}: every parameter tensor, sampled entries`, () => {
      const dir = makeTinyModel({ arch, hidden: 8, layers: 2, seed: 3 });
      dirs.push(dir);
      const model = loadModel(dir);
      // B = 2, T = 5; row 1 is left-padded by 2 (positions from 0 at its first real token)
      const ids = Int32Array.from([1, 2, 3, 4, 5, 0, 0, 6, 7, 8]);
      const keyMask = Uint8Array.from([1, 1, 1, 1, 1, 0, 0, 1, 1, 1]);
      const positions = Int32Array.from([0, 1, 2, 3, 4, 0, 0, 0, 1, 2]);
      const targets = Int32Array.from([2, 3, 4, 5, -1, -1, -1, 7, 8, -1]);
      const loss = () => crossEntropy(model.forward(ids, 2, 5, { keyMask, positions }), targets);
      backward(loss());
      const rand = prng(11);
      let worst = 0;
      noGrad(() => {
        for (const [name, p] of model.params) {
          assert.ok(p.grad, `${name} has a gradient`);
          for (let n = 0; n < 4; n++) {
            const i = Math.floor(rand() * p.size);
            const x0 = p.data[i];
            p.data[i] = x0 + 1e-6;
            const up = loss().item();
            p.data[i] = x0 - 1e-6;
            const down = loss().item();
            p.data[i] = x0;
            const numeric = (up - down) / 2e-6;
            worst = Math.max(worst, Math.abs(p.grad[i] - numeric) / Math.max(1e-4, Math.abs(numeric)));
          }
        }
      });
      assert.ok(worst < 1e-5, `worst relative error ${worst}`);
    });
  }
});
