/**
 * Iterative MADPO / MARLHF building blocks (src/rl/iterative-preference.ts): comparison pairs
 * between the team's and the comparator's candidates on hand-checked rewards, replay weights and
 * sampling, and the API comparator against `magrpo serve` started in-process on models/micro and
 * on a tiny chat model: greedy completions equal the model's own greedy decoding, requests are
 * split by comparator_api_max_n_per_request, and a wrong key is an error naming the URL.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Rng } from '../../src/engine/rng.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import { apiCompletions, type ComparatorApi, replayWeights, sampleReplay, selectComparisonPairs } from '../../src/rl/iterative-preference.js';
import { type ModelServer, startServer } from '../../src/serve/server.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

describe('comparison pairs', () => {
  // k0: team wins by 1 (comparator 0); k1: tie; k2: comparator wins by 1 (comparator 3); k3: team wins by 0.3 (comparator 0.2)
  const cur = [1, 0, 2, 0.5];
  const cmp = [0, 0, 3, 0.2];
  const ks = (p: ReturnType<typeof selectComparisonPairs>) => p.map((x) => `${x.winner.source[1]}${x.winner.index}>${x.loser.source[1]}${x.loser.index}`);

  it('pairs candidate k with comparator candidate k; the better wins; ties give none', () => {
    assert.deepEqual(ks(selectComparisonPairs(cur, cmp, 'all', null, new Rng(0))), ['u0>o0', 'o2>u2', 'u3>o3']);
    assert.deepEqual(selectComparisonPairs([1, 2], [1, 2, 5], 'all', null, new Rng(0)), [], 'only k < min(C, C′) meet');
  });

  it('orders by the comparator reward, the gap, or keeps k order, and keeps the limit', () => {
    assert.deepEqual(ks(selectComparisonPairs(cur, cmp, 'comparator_reward', null, new Rng(0))), ['o2>u2', 'u3>o3', 'u0>o0']);
    assert.deepEqual(ks(selectComparisonPairs(cur, cmp, 'reward_gap', 2, new Rng(0))), ['u0>o0', 'o2>u2']);
    assert.deepEqual(ks(selectComparisonPairs(cur, cmp, 'all', 1, new Rng(0))), ['u0>o0', 'o2>u2', 'u3>o3'], 'all ignores the limit');
    assert.deepEqual(ks(selectComparisonPairs(cur, cmp, 'random', null, new Rng(1))).sort(), ['o2>u2', 'u0>o0', 'u3>o3']);
  });
});

describe('replay', () => {
  it('weights per mode, oldest first', () => {
    assert.deepEqual(replayWeights('current', 3), [0, 0, 1]);
    assert.deepEqual(replayWeights('nearest_k', 3, { k: 2 }), [0, 1, 1]);
    assert.deepEqual(replayWeights('nearest_k', 2, { k: 5 }), [1, 1]);
    assert.deepEqual(replayWeights('all_history', 2), [1, 1]);
    const w = replayWeights('lambda_decay', 3, { lambda: 0.5 });
    [1 / 7, 2 / 7, 4 / 7].forEach((x, i) => {
      assert.ok(Math.abs(w[i] - x) < 1e-12, `${w}`);
    });
    assert.deepEqual(replayWeights('lambda_decay', 3, { lambda: 0 }), [0, 0, 1]);
    assert.deepEqual(replayWeights('lambda_decay', 2, { lambda: 1 }), [0.5, 0.5]);
  });

  it('draws sets by weight, distinct pairs while a set has them, copies past its size', () => {
    const sets = [['a1', 'a2'], [], ['c1', 'c2', 'c3']];
    const newest = sampleReplay(sets, [0, 0, 1], 3, new Rng(2));
    assert.deepEqual([...newest].sort(), ['c1', 'c2', 'c3']);
    const over = sampleReplay(sets, [1, 0, 0], 5, new Rng(2));
    assert.equal(over.length, 5);
    assert.ok(over.every((x) => x.startsWith('a')));
    assert.equal(over.filter((x) => x === 'a1').length + over.filter((x) => x === 'a2').length, 5);
    assert.ok(Math.abs(over.filter((x) => x === 'a1').length - over.filter((x) => x === 'a2').length) <= 1, 'whole copies, then the rest');
    const both = sampleReplay(sets, [1, 1, 1], 200, new Rng(3));
    const fromA = both.filter((x) => x.startsWith('a')).length;
    assert.equal(both.length, 200);
    assert.ok(fromA > 60 && fromA < 140, `${fromA} of 200 from the first set, the empty one skipped`);
    assert.deepEqual(sampleReplay(sets, [0, 1, 0], 4, new Rng(0)), [], 'only an empty set has weight');
  });
});

describe('API comparator against magrpo serve', () => {
  const MICRO = join('models', 'micro');
  let chatDir = '';
  let plain: ModelServer;
  let chat: ModelServer;
  let requests = 0;
  const sampling = { maxNewTokens: 6, temperature: 0, topP: 1, topK: null };
  const api = (server: ModelServer, path: string, over: Partial<ComparatorApi> = {}): ComparatorApi => ({
    url: `${server.url}${path}`,
    format: 'openai_completions',
    model: 'policy',
    maxNPerRequest: null,
    timeoutS: 60,
    apiKey: 'key',
    responseField: 'completions',
    extraBody: null,
    ...over,
  });

  before(async () => {
    chatDir = makeTinyModel({ chat: true, seed: 4 });
    const opts = { modelName: 'policy', host: '127.0.0.1', port: 0, apiKey: 'key', maxBatch: 8, seed: 1 };
    plain = await startServer({ lm: LanguageModel.load(MICRO), ...opts });
    chat = await startServer({ lm: LanguageModel.load(chatDir), ...opts });
  });
  after(async () => {
    await plain?.close();
    await chat?.close();
    rmSync(chatDir, { recursive: true, force: true });
  });

  it('completions: greedy candidates are the model’s own greedy decoding, split into requests of max_n', async () => {
    const lm = LanguageModel.load(MICRO);
    const prompt = 'Once upon a time';
    const own = lm.sample([prompt], { maxNewTokens: 6, temperature: 0 })[0].text;
    const realFetch = globalThis.fetch;
    globalThis.fetch = (...a: Parameters<typeof fetch>) => {
      requests++;
      return realFetch(...a);
    };
    try {
      const got = await apiCompletions(api(plain, '/v1/completions', { maxNPerRequest: 2 }), prompt, 5, sampling);
      assert.equal(requests, 3, 'n = 5 in requests of at most 2');
      assert.deepEqual(got, new Array(5).fill(own));
    } finally {
      globalThis.fetch = realFetch;
    }
  });

  it('chat: a text prompt is sent as a user message and rendered by the chat template', async () => {
    const lm = LanguageModel.load(chatDir);
    const messages = [{ role: 'user', content: 'go a b' }];
    const own = lm.sample([messages], { maxNewTokens: 6, temperature: 0 })[0].text;
    const got = await apiCompletions(api(chat, '/v1/chat/completions', { format: 'openai_chat' }), 'go a b', 3, sampling);
    assert.deepEqual(got, [own, own, own]);
    const sampled = await apiCompletions(api(chat, '/v1/chat/completions', { format: 'openai_chat' }), messages, 4, { ...sampling, temperature: 1 });
    assert.equal(sampled.length, 4);
  });

  it('a wrong key or an unreachable URL is an error naming the URL', async () => {
    await assert.rejects(
      apiCompletions(api(plain, '/v1/completions', { apiKey: 'wrong' }), 'x', 1, sampling),
      /comparator_api_url http:\/\/127\.0\.0\.1:\d+\/v1\/completions: HTTP 401/,
    );
    await assert.rejects(apiCompletions(api(plain, '/v1/nope'), 'x', 1, sampling), /comparator_api_url .*\/v1\/nope: HTTP 404/);
  });
});
