/**
 * `magrpo serve`'s Anthropic Messages (/v1/messages) and OpenAI Responses (/v1/responses)
 * endpoints, in-process on a tiny chat model: greedy text equals the model's own greedy decoding of
 * the same turns, the answers have each API's shape, keys go as each API sends them, and bad bodies
 * are 400s naming the field. Then the iterative trainers' API comparator in both formats against it.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { LanguageModel } from '../../src/model/pretrained.js';
import { apiCompletions, type ComparatorApi } from '../../src/rl/iterative-preference.js';
import { type ModelServer, startServer } from '../../src/serve/server.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

// biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
type Json = any;

const KEY = 'key-42';

describe('serve: /v1/messages and /v1/responses', () => {
  let dir = '';
  let lm: LanguageModel;
  let server: ModelServer;
  const post = async (path: string, body: unknown, headers: Record<string, string>) => {
    const res = await fetch(server.url + path, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
    return { status: res.status, json: (await res.json()) as Json };
  };
  const greedy = (messages: { role: string; content: string }[], maxNewTokens: number) => lm.sample([messages], { maxNewTokens, temperature: 0 })[0];

  before(async () => {
    dir = makeTinyModel({ chat: true, seed: 5 });
    lm = LanguageModel.load(dir);
    server = await startServer({ lm: LanguageModel.load(dir), modelName: 'policy', host: '127.0.0.1', port: 0, apiKey: KEY, maxBatch: 8, seed: 1 });
  });
  after(async () => {
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('messages: the system prompt and turns through the chat template; Anthropic’s answer; x-api-key', async () => {
    const turns = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'go a b' },
    ];
    const own = greedy(turns, 5);
    const r = await post(
      '/v1/messages',
      { model: 'policy', max_tokens: 5, temperature: 0, system: 'be brief', messages: [{ role: 'user', content: [{ type: 'text', text: 'go a b' }] }] },
      { 'x-api-key': KEY, 'anthropic-version': '2023-06-01' },
    );
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.type, 'message');
    assert.equal(r.json.role, 'assistant');
    assert.match(r.json.id, /^msg_/);
    assert.deepEqual(r.json.content, [{ type: 'text', text: own.text }]);
    assert.equal(r.json.stop_reason, own.finishReason === 'length' ? 'max_tokens' : 'end_turn');
    assert.equal(r.json.usage.output_tokens, own.completionIds.length);
    assert.ok(r.json.usage.input_tokens > 0);
    const bearer = await post('/v1/messages', { max_tokens: 2, messages: [{ role: 'user', content: 'x' }] }, { Authorization: `Bearer ${KEY}` });
    assert.equal(bearer.status, 200, 'a bearer key works too');
  });

  it('messages: no key or a wrong one is a 401; a missing max_tokens, a stream or a bad role a 400 naming the field', async () => {
    const body = { max_tokens: 2, messages: [{ role: 'user', content: 'x' }] };
    assert.equal((await post('/v1/messages', body, {})).status, 401);
    assert.equal((await post('/v1/messages', body, { 'x-api-key': 'nope' })).status, 401);
    for (const [bad, param] of [
      [{ messages: body.messages }, 'max_tokens'],
      [{ ...body, stream: true }, 'stream'],
      [{ ...body, messages: [{ role: 'system', content: 'x' }] }, 'messages.0.role'],
    ] as const) {
      const r = await post('/v1/messages', bad, { 'x-api-key': KEY });
      assert.equal(r.status, 400, JSON.stringify(r.json));
      assert.equal(r.json.error.param, param);
    }
  });

  it('responses: instructions and input through the chat template; a cut answer is incomplete', async () => {
    const own = greedy(
      [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'go a b' },
      ],
      6,
    );
    const r = await post(
      '/v1/responses',
      { model: 'policy', instructions: 'be brief', input: 'go a b', max_output_tokens: 6, temperature: 0 },
      { Authorization: `Bearer ${KEY}` },
    );
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.object, 'response');
    assert.match(r.json.id, /^resp_/);
    assert.equal(r.json.output.length, 1);
    assert.equal(r.json.output[0].type, 'message');
    assert.equal(r.json.output[0].role, 'assistant');
    assert.deepEqual(r.json.output[0].content, [{ type: 'output_text', text: own.text, annotations: [] }]);
    assert.equal(r.json.status, own.finishReason === 'length' ? 'incomplete' : 'completed');
    assert.equal(r.json.usage.output_tokens, own.completionIds.length);
    const listed = await post(
      '/v1/responses',
      {
        input: [
          { role: 'developer', content: 'be brief' },
          { role: 'user', content: [{ type: 'input_text', text: 'go a b' }] },
        ],
        max_output_tokens: 6,
        temperature: 0,
      },
      { Authorization: `Bearer ${KEY}` },
    );
    assert.equal(listed.json.output[0].content[0].text, own.text, 'a developer turn is a system turn');
    const cut = await post('/v1/responses', { input: 'go a b', max_output_tokens: 1, temperature: 0 }, { Authorization: `Bearer ${KEY}` });
    assert.equal(cut.json.status, 'incomplete');
    assert.deepEqual(cut.json.incomplete_details, { reason: 'max_output_tokens' });
    const stored = await post('/v1/responses', { input: 'x', previous_response_id: 'resp_1' }, { Authorization: `Bearer ${KEY}` });
    assert.equal(stored.status, 400);
    assert.equal(stored.json.error.param, 'previous_response_id');
  });

  it('the API comparator in both formats: one request per candidate, greedy candidates equal the model’s own', async () => {
    const sampling = { maxNewTokens: 5, temperature: 0, topP: 1, topK: null };
    const own = greedy([{ role: 'user', content: 'go a b' }], 5).text;
    const api = (path: string, format: ComparatorApi['format']): ComparatorApi => ({
      url: `${server.url}${path}`,
      format,
      model: 'policy',
      maxNPerRequest: null,
      timeoutS: 60,
      apiKey: KEY,
      responseField: 'completions',
      extraBody: null,
    });
    const realFetch = globalThis.fetch;
    const seen: { headers: Record<string, string>; body: Json }[] = [];
    globalThis.fetch = (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
      seen.push({ headers: init?.headers as Record<string, string>, body: JSON.parse(String(init?.body)) });
      return realFetch(input, init);
    };
    try {
      assert.deepEqual(await apiCompletions(api('/v1/messages', 'anthropic'), 'go a b', 3, sampling), [own, own, own]);
      assert.equal(seen.length, 3, 'Anthropic’s API has no n');
      assert.equal(seen[0].headers['x-api-key'], KEY);
      assert.equal(seen[0].headers['anthropic-version'], '2023-06-01');
      assert.equal('Authorization' in seen[0].headers, false);
      assert.deepEqual(seen[0].body.messages, [{ role: 'user', content: 'go a b' }]);
      assert.equal('top_p' in seen[0].body, false, 'top_p 1 is left out');
      seen.length = 0;
      const chat = [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'go a b' },
      ];
      const ownChat = greedy(chat, 5).text;
      assert.deepEqual(await apiCompletions(api('/v1/messages', 'anthropic'), chat, 1, sampling), [ownChat]);
      assert.equal(seen[0].body.system, 'be brief', 'system turns as the system field');
      seen.length = 0;
      assert.deepEqual(await apiCompletions(api('/v1/responses', 'openai_responses'), 'go a b', 2, sampling), [own, own]);
      assert.equal(seen.length, 2);
      assert.equal(seen[0].headers.Authorization, `Bearer ${KEY}`);
      assert.equal(seen[0].body.max_output_tokens, 5);
    } finally {
      globalThis.fetch = realFetch;
    }
    await assert.rejects(
      apiCompletions({ ...api('/v1/messages', 'anthropic'), apiKey: 'wrong' }, 'x', 1, sampling),
      /comparator_api_url .*\/v1\/messages: HTTP 401/,
    );
  });
});
