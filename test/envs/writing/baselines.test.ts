/**
 * Writing baselines: the paragraph split, each baseline's wiring (which prompts each agent sees,
 * what gets scored) with scripted models, and every baseline end to end on a tiny real model.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { Rng } from '../../../src/engine/rng.js';
import { setBackend } from '../../../src/engine/runtime.js';
import type { InferenceSampling } from '../../../src/envs/environment.js';
import { splitTwoParagraphs } from '../../../src/envs/writing/baselines.js';
import { arxivEnvironment, type TldrItem, tldrEnvironment, tldrReward } from '../../../src/envs/writing/index.js';
import { sequentialArxivTarget, TLDR_BASELINE_PROMPTS, tldrElaborationPrompt, tldrSummaryPrompt } from '../../../src/envs/writing/prompts.js';
import { LanguageModel, type TextSample } from '../../../src/model/pretrained.js';
import { makeTinyWriter } from './tiny-writer.js';

const SAMPLING: InferenceSampling = { maxNewTokens: 4, temperature: 0.7, topP: 0.9, seed: 3 };
const items: TldrItem[] = [
  { prompt: 'SOURCE: test\n\nPOST: The whale rose beside the ship at dawn and the crew watched it swim away.\n\nTL;DR:' },
  { prompt: 'SOURCE: test\n\nPOST: Congress met in December and discussed the budget, the army and the post office.\n\nTL;DR:' },
];

/** A stand-in model that answers each prompt with `reply(prompt)` and records every batch. */
function scripted(reply: (prompt: string) => string) {
  const batches: string[][] = [];
  const lm = {
    sample(prompts: readonly string[]): TextSample[] {
      batches.push([...prompts]);
      return prompts.map((p) => ({ promptIds: [], completionIds: [1, 2, 3], text: reply(p), logprobs: [], finishReason: 'stop_token' as const }));
    },
  };
  return { lm: lm as unknown as LanguageModel, batches };
}

const baseline = (name: string) => {
  const b = tldrEnvironment().baselines.find((x) => x.name === name);
  assert.ok(b, name);
  return b;
};

describe('splitTwoParagraphs', () => {
  it('splits at the first delimiter, strips whitespace and "Paragraph 1:/2:" prefixes (any case)', () => {
    const s = splitTwoParagraphs('\n paragraph 1:  short one. [PARAGRAPH_SPLIT] PARAGRAPH 2:\tlonger [PARAGRAPH_SPLIT] two.  ', [2, 3], new Rng(1));
    assert.deepEqual(s, { first: 'short one.', second: 'longer [PARAGRAPH_SPLIT] two.', delimiter: true });
  });

  it('without the delimiter cuts at len / (1 + ratio) code points, ratio uniform in the range', () => {
    const text = '😀'.repeat(30);
    const r = 2 + new Rng(7).next();
    const s = splitTwoParagraphs(text, [2, 3], new Rng(7));
    assert.equal(s.delimiter, false);
    assert.equal(Array.from(s.first).length, Math.floor(30 / (1 + r)));
    assert.equal(s.first + s.second, text);
    for (let seed = 0; seed < 20; seed++) {
      const cut = Array.from(splitTwoParagraphs(text, [1.0, 1.3], new Rng(seed)).first).length;
      assert.ok(cut >= 13 && cut <= 15, `arXiv ratio 1.0–1.3: cut ${cut}`);
    }
  });
});

describe('baseline wiring (scripted models)', () => {
  it('single_agent: one prompt asking for [PARAGRAPH_SPLIT], the two parts scored as agents 1 and 2', async () => {
    const p1 = Array.from({ length: 10 }, (_, i) => `w${i + 1}`).join(' ');
    const p2 = ['w1', ...Array.from({ length: 19 }, (_, i) => `w${101 + i}`)].join(' ');
    const { lm, batches } = scripted(() => ` ${p1.padEnd(100)}[PARAGRAPH_SPLIT]Paragraph 2: ${p2.padEnd(200)}`);
    const out = await baseline('single_agent').run(items, [lm], SAMPLING);
    assert.deepEqual(batches, [items.map((it) => TLDR_BASELINE_PROMPTS.single(it.prompt))]);
    assert.ok(batches[0][0].endsWith('Summary:\nParagraph 1:') && batches[0][0].includes('[PARAGRAPH_SPLIT]'));
    assert.deepEqual(out[0].completions, [p1, p2]);
    const expected = tldrReward(p1, p2);
    assert.equal(out[0].reward, expected.reward);
    assert.deepEqual(out[0].components, expected.components);
    assert.equal(out[1].index, 1);
    assert.equal(out[0].outputTokens, 3);
  });

  it('naive_parallel: each agent gets its MAGRPO prompt; responses are stripped before scoring', async () => {
    const a = scripted(() => '  concise  ');
    const b = scripted(() => '\ndetailed\n');
    const out = await baseline('naive_parallel').run(items, [a.lm, b.lm], SAMPLING);
    assert.deepEqual(a.batches, [items.map((it) => tldrSummaryPrompt(it.prompt))]);
    assert.deepEqual(b.batches, [items.map((it) => tldrElaborationPrompt(it.prompt))]);
    assert.deepEqual(out[1].completions, ['concise', 'detailed']);
    assert.equal(out[0].outputTokens, 6);
  });

  it('sequential: agent 2 sees agent 1’s stripped response and a target of max(2 × words, 80)', async () => {
    const a = scripted(() => ' five words from agent one ');
    const b = scripted(() => 'longer');
    const out = await baseline('sequential').run(items, [a.lm, b.lm], SAMPLING);
    assert.deepEqual(a.batches, [items.map((it) => TLDR_BASELINE_PROMPTS.sequential[0](it.prompt))]);
    const seen = b.batches[0][0];
    assert.ok(seen.includes("Agent 1's Response:\nfive words from agent one\n"), seen);
    assert.ok(seen.includes('Is approximately 80 words long'));
    assert.ok(seen.includes(items[0].prompt));
    assert.deepEqual(out[0].completions, ['five words from agent one', 'longer']);
    assert.equal(out[0].outputTokens, 6);
  });

  it('one_round_discussion: round 2 shows each agent the other’s round-1 response; round 2 is scored', async () => {
    const round = (p: string) => (p.includes("Other Agent's Response") ? 2 : 1);
    const a = scripted((p) => ` A${round(p)} `);
    const b = scripted((p) => ` B${round(p)} `);
    const out = await baseline('one_round_discussion').run(items, [a.lm, b.lm], SAMPLING);
    assert.equal(a.batches.length, 2);
    assert.deepEqual(
      a.batches[0],
      items.map((it) => TLDR_BASELINE_PROMPTS.discussRound1[0](it.prompt)),
    );
    assert.deepEqual(
      a.batches[1],
      items.map((it) => TLDR_BASELINE_PROMPTS.discussRound2[0](it.prompt, 'B1')),
    );
    assert.deepEqual(
      b.batches[1],
      items.map((it) => TLDR_BASELINE_PROMPTS.discussRound2[1](it.prompt, 'A1')),
    );
    assert.deepEqual(out[0].completions, ['A2', 'B2']);
    assert.equal(out[0].outputTokens, 12);
  });

  it('arXiv sequential target prints as Python prints max(1.2 × words, 80)', () => {
    const words = (n: number) => Array(n).fill('x').join(' ');
    assert.equal(sequentialArxivTarget(words(50)), '80');
    assert.equal(sequentialArxivTarget(words(100)), '120.0');
    assert.equal(sequentialArxivTarget(words(67)), '80.39999999999999');
  });
});

describe('baselines on a tiny model', () => {
  let dir = '';
  let lm: LanguageModel;
  before(() => {
    setBackend('native');
    dir = makeTinyWriter(5);
    lm = LanguageModel.load(dir);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const env of [tldrEnvironment(), arxivEnvironment()]) {
    it(`${env.name}: every baseline returns one scored 2-part episode per item`, async () => {
      assert.deepEqual(
        env.baselines.map((b) => b.name),
        ['single_agent', 'naive_parallel', 'sequential', 'one_round_discussion'],
      );
      const its = env.name === 'tldr' ? items : items.map((it) => ({ abstract_text: it.prompt.slice(14, -9) }));
      for (const b of env.baselines) {
        const out = await b.run(its as never[], Array(b.numModels).fill(lm), SAMPLING);
        assert.equal(out.length, its.length, b.name);
        for (const [e, r] of out.entries()) {
          assert.equal(r.index, e);
          assert.equal(r.completions.length, 2);
          assert.ok(r.completions.every((c) => typeof c === 'string' && c === c.trim()));
          assert.ok(Number.isFinite(r.reward) && r.responseSeconds >= 0 && r.outputTokens >= 1, b.name);
          assert.deepEqual(Object.keys(r.components).sort(), ['coordination', 'jaccard', 'structure', 'transition', 'vocabulary']);
        }
      }
    });
  }
});
