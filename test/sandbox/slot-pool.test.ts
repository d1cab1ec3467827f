import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SlotPool } from '../../src/sandbox/slot-pool.js';

test('hands out distinct slots up to its size, then queues in arrival order', async () => {
  const pool = new SlotPool(2);
  const first = await pool.acquire();
  const second = await pool.acquire();
  assert.deepEqual([first, second], [0, 1]);
  const order: number[] = [];
  const third = pool.acquire().then((slot) => order.push(slot));
  const fourth = pool.acquire().then((slot) => order.push(slot));
  pool.release(second);
  pool.release(first);
  await Promise.all([third, fourth]);
  assert.deepEqual(order, [1, 0]);
});

test('with() releases the slot when the task throws', async () => {
  const pool = new SlotPool(1);
  await assert.rejects(
    pool.with(async () => Promise.reject(new Error('task failed'))),
    /task failed/,
  );
  assert.equal(await pool.with(async (slot) => slot), 0);
});
