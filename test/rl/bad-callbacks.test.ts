/**
 * User callbacks that misbehave (reward, reward components, reward processor, formatter,
 * transition): throw, hang (a promise that never settles), or return NaN, strings, objects,
 * promises or the wrong number of prompts. Each stops with one TaskError naming the callback, the
 * item and the turn: never a TypeError deep in the trainer, never a silent hang.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resolveConfig } from '../../src/rl/config.js';
import { callTransition, computeReward, formatPrompt, type RolloutContext } from '../../src/rl/rollout.js';
import { type Task, TaskError } from '../../src/rl/task.js';

type Item = { prompt: string };
const item: Item = { prompt: 'go' };
const input = { completions: ['a', 'b'], prompts: ['go', 'go'], item, turn: 0 };
const ctx = (task: Partial<Task<Item>>, formatters: ((i: Item, e?: string) => string)[] = [(i) => i.prompt, (i) => i.prompt]): RolloutContext<Item> => ({
  task: { dataset: [item], reward: () => 0, callbackTimeoutSeconds: 0.2, ...task } as Task<Item>,
  config: resolveConfig({ num_agents: 2 }),
  agents: [],
  formatters,
  itemIndex: 3,
});
const never = () => new Promise<never>(() => {});

type Case = [name: string, run: () => unknown, field: string, fragment: RegExp];
const CASES: Case[] = [
  [
    'reward throws',
    () =>
      computeReward(
        ctx({
          reward: () => {
            throw new Error('boom');
          },
        }),
        input,
      ),
    'reward',
    /threw on item 3, turn 0: boom/,
  ],
  [
    'reward throws a non-Error',
    () =>
      computeReward(
        ctx({
          reward: () => {
            throw 'str';
          },
        }),
        input,
      ),
    'reward',
    /threw on item 3, turn 0: str/,
  ],
  ['reward rejects', () => computeReward(ctx({ reward: async () => Promise.reject(new Error('async boom')) }), input), 'reward', /async boom/],
  ['reward never settles', () => computeReward(ctx({ reward: never }), input), 'reward', /did not settle within 0.2 s on item 3, turn 0/],
  ['reward NaN', () => computeReward(ctx({ reward: () => Number.NaN }), input), 'reward', /returned NaN on item 3, turn 0; rewards must be finite/],
  ['reward Infinity', () => computeReward(ctx({ reward: () => Number.POSITIVE_INFINITY }), input), 'reward', /returned Infinity/],
  ['reward a string', () => computeReward(ctx({ reward: () => '1' as unknown as number }), input), 'reward', /returned the string "1"/],
  ['reward null', () => computeReward(ctx({ reward: () => null as unknown as number }), input), 'reward', /returned null/],
  [
    'reward an object without reward',
    () => computeReward(ctx({ reward: () => ({ score: 1 }) as unknown as number }), input),
    'reward',
    /returned undefined|return a number/,
  ],
  ['reward component NaN', () => computeReward(ctx({ reward: () => ({ reward: 1, components: { x: Number.NaN } }) }), input), 'reward', /component "x" is NaN/],
  [
    'reward component a string',
    () => computeReward(ctx({ reward: () => ({ reward: 1, components: { x: 'high' as unknown as number } }) }), input),
    'reward',
    /component "x" is the string "high"/,
  ],
  [
    'weighted component throws',
    () =>
      computeReward(
        ctx({
          reward: [
            {
              name: 'c',
              weight: 1,
              fn: () => {
                throw new Error('bad c');
              },
            },
          ],
        }),
        input,
      ),
    'reward component "c"',
    /bad c/,
  ],
  ['weighted component hangs', () => computeReward(ctx({ reward: [{ name: 'c', weight: 1, fn: never }] }), input), 'reward component "c"', /did not settle/],
  [
    'weighted component a string',
    () => computeReward(ctx({ reward: [{ name: 'c', weight: 1, fn: () => 'x' as unknown as number }] }), input),
    'reward component "c"',
    /returned the string "x"/,
  ],
  ['reward processor NaN', () => computeReward(ctx({ rewardProcessor: () => Number.NaN }), input), 'rewardProcessor', /returned NaN/],
  [
    'reward processor throws',
    () =>
      computeReward(
        ctx({
          rewardProcessor: () => {
            throw new Error('pp');
          },
        }),
        input,
      ),
    'rewardProcessor',
    /threw on item 3, turn 0: pp/,
  ],
  [
    'formatter throws',
    () =>
      formatPrompt(
        ctx({}, [
          () => {
            throw new Error('fmt');
          },
          (i) => i.prompt,
        ]),
        0,
        item,
        null,
      ),
    'formatters',
    /threw on agent 0, item 3: fmt/,
  ],
  [
    'formatter returns a number',
    () => formatPrompt(ctx({}, [(i) => i.prompt, () => 42 as unknown as string]), 1, item, null),
    'formatters',
    /returned 42 on agent 1, item 3/,
  ],
  [
    'formatter returns a promise',
    () => formatPrompt(ctx({}, [(() => Promise.resolve('x')) as unknown as (i: Item) => string, (i) => i.prompt]), 0, item, null),
    'formatters',
    /a Promise \(formatters must be synchronous\)/,
  ],
  [
    'formatter returns undefined at turn 2',
    () => formatPrompt(ctx({}, [() => undefined as unknown as string, (i) => i.prompt]), 0, item, 'next'),
    'formatters',
    /returned undefined/,
  ],
  [
    'transition throws',
    () =>
      callTransition(
        ctx({
          transition: () => {
            throw new Error('tr');
          },
        }),
        item,
        0,
        ['a', 'b'],
        [[], []],
        [[], []],
      ),
    'transition',
    /threw on item 3, turn 0: tr/,
  ],
  [
    'transition never settles',
    () => callTransition(ctx({ transition: never }), item, 0, ['a', 'b'], [[], []], [[], []]),
    'transition',
    /did not settle within 0.2 s/,
  ],
  [
    'transition wrong length',
    () => callTransition(ctx({ transition: () => ['only one'] }), item, 0, ['a', 'b'], [[], []], [[], []]),
    'transition',
    /must return 2 prompt strings .*got \[the string "only one"\]/,
  ],
  [
    'transition non-strings',
    () => callTransition(ctx({ transition: () => [1, null] as unknown as string[] }), item, 0, ['a', 'b'], [[], []], [[], []]),
    'transition',
    /got \[1, null\]/,
  ],
  [
    'transition a string',
    () => callTransition(ctx({ transition: () => 'ab' as unknown as string[] }), item, 0, ['a', 'b'], [[], []], [[], []]),
    'transition',
    /got the string "ab"/,
  ],
];

describe('misbehaving callbacks: one TaskError each, naming the callback', () => {
  for (const [name, run, field, fragment] of CASES) {
    it(name, async () => {
      await assert.rejects((async () => run())(), (e: unknown) => {
        assert.ok(e instanceof TaskError, `expected TaskError, got ${e}`);
        assert.equal(e.field, field);
        assert.ok(e.message.startsWith(`${field}: `), e.message);
        assert.match(e.message, fragment);
        return true;
      });
    });
  }
  it('a well-behaved async reward within the timeout is unaffected', async () => {
    const r = await computeReward(ctx({ reward: async () => ({ reward: 0.5, components: { a: 1 } }) }), input);
    assert.deepEqual(r, { reward: 0.5, components: { a: 1 } });
  });
});
