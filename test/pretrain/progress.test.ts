import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createProgress } from '../../src/pretrain/progress.js';

function captureStderr(fn: () => void): string {
  const original = process.stderr.write.bind(process.stderr);
  let out = '';
  process.stderr.write = ((chunk: string | Uint8Array) => {
    out += String(chunk);
    return true;
  }) as typeof process.stderr.write;
  try {
    fn();
  } finally {
    process.stderr.write = original;
  }
  return out;
}

test('lines mode logs every logEvery steps and the last one, with tokens/s and ETA', () => {
  const out = captureStderr(() => {
    const p = createProgress('lines', 0, 25, 10, 1000);
    for (let step = 1; step <= 25; step++) p.update({ step, loss: 5 - step / 100, valLoss: step >= 20 ? 4.5 : null, lr: 1e-3, tokensPerSecond: 500 });
    p.note('step 20: checkpoint saved');
    p.stop();
  });
  const lines = out.trim().split('\n');
  assert.deepEqual(
    lines.map((l) => l.split(' ')[1]),
    ['10/25', '20/25', '25/25', '20:'],
  );
  // 15 steps left × 1000 tokens at 500 tokens/s = 30 s
  assert.equal(lines[0], 'step 10/25 loss 4.9000 val - lr 1.00e-3 500 tok/s ETA 0m30s');
  assert.match(lines[1], /val 4\.5000 .* ETA 0m10s$/);
});

test('silent mode writes nothing', () => {
  const out = captureStderr(() => {
    const p = createProgress('silent', 0, 5, 1, 10);
    p.update({ step: 1, loss: 1, valLoss: null, lr: 1, tokensPerSecond: 1 });
    p.note('x');
    p.stop();
  });
  assert.equal(out, '');
});
