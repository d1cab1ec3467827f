/** The writing environments' faithfulness guard: text its post does not support, or pasted from it, earns less in training. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { faithfulnessFactor, postText, type TldrItem, tldrEnvironment, tldrReward } from '../../../src/envs/writing/index.js';
import type { RewardFn } from '../../../src/rl/task.js';
import { contentSupport, copiedRuns } from '../../../src/text/faithfulness.js';

const POST =
  'The old lighthouse keeper on the island retired after forty years. He kept a diary of every storm, and the town museum will now display it next to his brass lamp.';
const item: TldrItem = { prompt: `SOURCE: test\n\nPOST: ${POST}\n\nTL;DR:` };
const GUARD = { support: { zero_at: 0.25, full_at: 0.5 }, copied: { full_at: 0.25, zero_at: 0.75 } };
const faithful = 'A lighthouse keeper retired after forty years; the museum will display his storm diary and lamp.';
const invented = 'Brown University scholars debated the ethics of slavery at a famous conference in 1961.';
const pasted = POST;

describe('faithfulness guard (env.options.faithfulness_guard)', () => {
  it('keeps a supported summary at its reward and takes invented text to zero', () => {
    assert.ok(contentSupport(faithful, POST) >= 0.5, String(contentSupport(faithful, POST)));
    assert.ok(copiedRuns(faithful, POST) <= 0.25);
    assert.equal(faithfulnessFactor([faithful], POST, GUARD), 1);
    assert.ok(contentSupport(invented, POST) <= 0.25, String(contentSupport(invented, POST)));
    assert.equal(faithfulnessFactor([invented], POST, GUARD), 0);
    assert.equal(faithfulnessFactor([faithful, invented], POST, GUARD), 0, 'a product over agents');
  });

  it('is linear on content support between zero_at and full_at', () => {
    const half = 'The lighthouse keeper kept a diary; critics in Paris admired the novel and poems.';
    const s = contentSupport(half, POST);
    assert.ok(s > 0.25 && s < 0.5, `support ${s} between the ramp's ends`);
    const f = faithfulnessFactor([half], POST, { support: GUARD.support });
    assert.ok(Math.abs(f - (s - 0.25) / 0.25) < 1e-12, `${f}`);
    assert.ok(Math.abs(faithfulnessFactor([half, half], POST, { support: GUARD.support }) - f * f) < 1e-12);
  });

  it('with a copy ramp, pasting the post is not the way to support', () => {
    assert.equal(faithfulnessFactor([pasted], POST, { support: GUARD.support }), 1, 'support alone pays a copy in full');
    assert.equal(copiedRuns(pasted, POST), 1);
    assert.equal(faithfulnessFactor([pasted], POST, GUARD), 0);
    // half of the words copied in one 8-word run or longer: (0.75 - c) / 0.5
    const part = 'Forty years on the island ended: the old lighthouse keeper on the island retired after forty years.';
    const c = copiedRuns(part, POST);
    assert.ok(c > 0.25 && c < 0.75, String(c));
    assert.ok(Math.abs(faithfulnessFactor([part], POST, GUARD) - (0.75 - c) / 0.5) < 1e-12);
  });

  it('scores only the agents it names', () => {
    assert.equal(faithfulnessFactor([faithful, invented], POST, { ...GUARD, agents: [0] }), 1, 'agent 1 left to the paper reward');
    assert.equal(faithfulnessFactor([faithful, invented], POST, { ...GUARD, agents: [1] }), 0);
    assert.equal(faithfulnessFactor([invented, pasted], POST, { ...GUARD, agents: [0, 1] }), 0);
    assert.throws(() => tldrEnvironment({ faithfulness_guard: { ...GUARD, agents: [2] } }), /faithfulness_guard.*agents/s);
  });

  it('a list of guards gives each agent its own ramps: the product of their factors', async () => {
    const lax = { support: { zero_at: 0.1, full_at: 0.2 }, copied: { full_at: 0.75, zero_at: 1 }, agents: [1] };
    const list = [{ ...GUARD, agents: [0] }, lax];
    const part = 'Forty years on the island ended: the old lighthouse keeper on the island retired after forty years.';
    assert.equal(faithfulnessFactor([faithful, part], POST, list), 1, "agent 1's copying within its own ramp");
    assert.ok(faithfulnessFactor([part, faithful], POST, list) < 1, "agent 0's stricter copy ramp");
    assert.equal(faithfulnessFactor([faithful, pasted], POST, list), 0, 'a whole paste still earns nothing');
    for (const pair of [
      [part, invented],
      [faithful, part],
    ])
      assert.equal(faithfulnessFactor(pair, POST, list), faithfulnessFactor(pair, POST, list[0]) * faithfulnessFactor(pair, POST, lax));
    const reward = tldrEnvironment({ faithfulness_guard: list }).task().reward as RewardFn<TldrItem>;
    const r = (await reward({ completions: [faithful, part], prompts: ['', ''], item, turn: 0 })) as { reward: number; components: Record<string, number> };
    assert.equal(r.components.faithfulness_factor, 1);
    assert.equal(r.reward, tldrReward(faithful, part).reward);
    assert.throws(() => tldrEnvironment({ faithfulness_guard: [] }), /faithfulness_guard/);
  });

  it('multiplies the training reward against the item’s post and logs its factor; off by default', async () => {
    const guarded = tldrEnvironment({ faithfulness_guard: GUARD }).task().reward as RewardFn<TldrItem>;
    const plain = tldrEnvironment().task().reward as RewardFn<TldrItem>;
    assert.equal(postText(item.prompt), POST);
    for (const pair of [
      [faithful, faithful],
      [invented, faithful],
    ]) {
      const r = (await guarded({ completions: pair, prompts: ['', ''], item, turn: 0 })) as { reward: number; components: Record<string, number> };
      const f = faithfulnessFactor(pair, POST, GUARD);
      assert.equal(r.components.faithfulness_factor, f);
      assert.equal(r.reward, tldrReward(pair[0], pair[1]).reward * f);
      const p = (await plain({ completions: pair, prompts: ['', ''], item, turn: 0 })) as { reward: number; components: Record<string, number> };
      assert.equal('faithfulness_factor' in p.components, false);
      assert.equal(p.reward, tldrReward(pair[0], pair[1]).reward);
    }
  });

  it('refuses a ramp that does not rise (or, for copying, fall), naming the field', () => {
    assert.throws(() => tldrEnvironment({ faithfulness_guard: { support: { zero_at: 0.5, full_at: 0.4 } } }), /faithfulness_guard.*full_at/s);
    assert.throws(
      () => tldrEnvironment({ faithfulness_guard: { support: GUARD.support, copied: { full_at: 0.6, zero_at: 0.5 } } }),
      /faithfulness_guard.*copied.*zero_at/s,
    );
    assert.throws(() => tldrEnvironment({ faithfulness_guard: { zero_at: 0.2 } as never }), /faithfulness_guard/);
  });
});
