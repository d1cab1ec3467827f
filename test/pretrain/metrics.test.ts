import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ema, MetricsLog, plotLoss, series } from '../../src/pretrain/metrics.js';

test('resetTo keeps entries up to the resumed step and drops the rest', () => {
  const log = new MetricsLog(mkdtempSync(join(tmpdir(), 'magrpo-metrics-')));
  log.resetTo(0);
  for (let s = 1; s <= 5; s++) log.append({ step: s, 'train/loss': 10 - s });
  log.append({ step: 4, 'val/loss': 6.5 });
  log.resetTo(3);
  assert.deepEqual(log.read(), [
    { step: 1, 'train/loss': 9 },
    { step: 2, 'train/loss': 8 },
    { step: 3, 'train/loss': 7 },
  ]);
  assert.deepEqual(series(log.read(), 'train/loss'), [
    [1, 9],
    [2, 8],
    [3, 7],
  ]);
  assert.deepEqual(series(log.read(), 'val/loss'), []);
});

test('ema is bias-corrected: a constant series stays constant, a step is smoothed', () => {
  assert.deepEqual(
    ema(
      [
        [1, 4],
        [2, 4],
        [3, 4],
      ],
      0.9,
    ).map(([, y]) => Math.round(y * 1e9) / 1e9),
    [4, 4, 4],
  );
  const smoothed = ema(
    [
      [1, 0],
      [2, 10],
    ],
    0.5,
  );
  assert.deepEqual(smoothed, [
    [1, 0],
    [2, 5 / 0.75],
  ]);
});

test('plotLoss writes loss.svg and loss.png', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'magrpo-metrics-'));
  const entries = Array.from({ length: 30 }, (_, i) => ({ step: i + 1, 'train/loss': 8 - i / 10 }));
  await plotLoss([...entries, { step: 30, 'val/loss': 5.5 }], dir, 'loss of a test run');
  assert.ok(readFileSync(join(dir, 'loss.svg'), 'utf8').includes('loss of a test run'));
  assert.ok(existsSync(join(dir, 'loss.png')));
  assert.equal(readFileSync(join(dir, 'loss.png')).subarray(1, 4).toString('latin1'), 'PNG');
});
