/** The writing environments' fluency guard: degenerate text earns (almost) nothing in training. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fluencyFactor, type TldrItem, tldrEnvironment, tldrReward } from '../../../src/envs/writing/index.js';
import type { RewardFn } from '../../../src/rl/task.js';

const GUARD = { zero_at: 0.5, full_at: 0.85 };
const item: TldrItem = { prompt: 'SOURCE: test\n\nPOST: The whale rose beside the ship at dawn.\n\nTL;DR:' };
const summary = 'A whale rose beside the ship at dawn and the crew watched it in silence.';
const detail =
  'At dawn a great whale rose beside the ship. However, the crew did not panic; instead they watched it swim along the hull for an hour. Moreover, the captain wrote about the sight in his log, and the sailors talked about it for days.';

describe('fluency guard (env.options.fluency_guard)', () => {
  it('leaves fluent team outputs at the paper reward', async () => {
    const env = tldrEnvironment({ fluency_guard: GUARD });
    const r = (await (env.task().reward as RewardFn<TldrItem>)({ completions: [summary, detail], prompts: ['', ''], item, turn: 0 })) as {
      reward: number;
      components: Record<string, number>;
    };
    assert.equal(fluencyFactor([summary, detail], GUARD), 1);
    assert.equal(r.reward, tldrReward(summary, detail).reward);
    assert.equal(r.components.fluency_factor, 1);
  });

  it('takes the reward of letter soup and strings of initials to zero', async () => {
    const env = tldrEnvironment({ fluency_guard: GUARD });
    const reward = env.task().reward as RewardFn<TldrItem>;
    for (const hack of [
      'EDESE SOSUSSTESESERE AIS AIMOSECEESESE TESESE SOSE TRSTTNITTE OOCISOON COCIISUIS',
      'F. F. P. B. L. W. D. S. D. R. T. S. G. S. A. L. M.',
    ]) {
      const paper = tldrReward(hack, detail).reward;
      const r = (await reward({ completions: [hack, detail], prompts: ['', ''], item, turn: 0 })) as { reward: number };
      assert.ok(paper > 0.5, `the hack earns the paper reward (${paper})`);
      assert.equal(r.reward, 0, `${hack}: guarded ${r.reward} vs paper ${paper}`);
    }
  });

  it('is linear between zero_at and full_at, per agent, multiplied over agents', () => {
    // 'zqxv the cat sat': 9 of 13 letters valid = 0.692…
    const half = 'zqxv the cat sat';
    const f = (9 / 13 - 0.5) / 0.35;
    assert.ok(Math.abs(fluencyFactor([half, summary], GUARD) - f) < 1e-12);
    assert.ok(Math.abs(fluencyFactor([half, half], GUARD) - f * f) < 1e-12);
    assert.equal(fluencyFactor([half], { zero_at: 0, full_at: 0.5 }), 1);
  });

  it('with a distinct-2 ramp, repeated phrases of real words lose their reward', () => {
    const loop = "I'll you. I don't you. I'll you? I don't you. I'll you. I'll do.";
    const g = { ...GUARD, distinct_2: { zero_at: 0.7, full_at: 0.95 } };
    // the trigram rule of word validity already costs the exact loop part of its letters …
    assert.ok(fluencyFactor([loop], GUARD) > 0.3, String(fluencyFactor([loop], GUARD)));
    // … and the distinct-2 ramp takes the rest
    assert.equal(fluencyFactor([loop], g), 0);
    assert.equal(fluencyFactor([summary, detail], g), 1);
  });

  it('with a clause-length ramp, lists of fragments of real words lose their reward', () => {
    const list = 'the subject, a sort, the justice, the to come, the Government, in which,, such a completely, at a burn.';
    const g = { ...GUARD, clause_length: { zero_at: 2, full_at: 4 } };
    assert.equal(fluencyFactor([list, detail], GUARD), 1, 'word validity alone passes it');
    assert.ok(Math.abs(fluencyFactor([list, detail], g) - (19 / 8 - 2) / 2) < 1e-12);
    assert.equal(fluencyFactor([summary, detail], g), 1);
  });

  it('is off by default: the paper reward, no extra component', async () => {
    const r = (await (tldrEnvironment().task().reward as RewardFn<TldrItem>)({ completions: ['EDESE SOSE', detail], prompts: ['', ''], item, turn: 0 })) as {
      reward: number;
      components: Record<string, number>;
    };
    assert.equal(r.reward, tldrReward('EDESE SOSE', detail).reward);
    assert.equal('fluency_factor' in r.components, false);
  });

  it('evaluation metrics ignore the guard (the eval table keeps the paper reward)', () => {
    const plain = tldrEnvironment();
    const guarded = tldrEnvironment({ fluency_guard: GUARD });
    const episodes = [{ index: 0, completions: ['EDESE SOSE', detail], reward: 0, components: {}, responseSeconds: 0, outputTokens: 0 }];
    assert.equal(guarded.metrics(episodes, [item]).return, plain.metrics(episodes, [item]).return);
  });
});

describe('fluency guard: grammar ramp', () => {
  it('takes the reward of real words in no English order, and leaves English alone', () => {
    const chains = 'in this day, to th a time, and, and be filled and devourant, and in any moment,, in the time; and, and, did not.';
    const runOn = 'a jar is the only difference of the completely the was the first was the was suit of the terr was the he is still.';
    const g = { ...GUARD, grammar: { zero_at: 0.75, full_at: 0.92 } };
    assert.equal(fluencyFactor([summary, detail], g), 1);
    for (const t of [chains, runOn]) {
      const wordsOnly = fluencyFactor([t, detail], GUARD);
      assert.ok(wordsOnly > 0.7, `word validity alone mostly passes it (${wordsOnly})`);
      assert.ok(fluencyFactor([t, detail], g) < 0.8 * wordsOnly, `${t}: ${fluencyFactor([t, detail], g)}`);
    }
    assert.equal(fluencyFactor([runOn, detail], g), 0);
  });
});
