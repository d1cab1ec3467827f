/**
 * The openai rollout client against loopback test doubles of vLLM: the request it sends, the
 * completions it returns (ids, text, sampler log-probs), the re-tokenising fallback for servers
 * without token ids, a server that ignores `logprobs`, and the adapter load/unload sequence
 * (vLLM's POST /v1/load_lora_adapter {lora_name, lora_path} and /v1/unload_lora_adapter
 * {lora_name}, docs.vllm.ai "Dynamically serving LoRA Adapters").
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { Rng } from '../../src/engine/rng.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import { type OpenAIClientOptions, OpenAISampler } from '../../src/rollout/openai.js';
import { makeTinyModel } from '../helpers/tiny-model.js';
import { FakeServer, type SeenRequest, vllmCompletion } from './fake-server.js';

let dir = '';
let adapters = '';
let lm: LanguageModel;
before(() => {
  dir = makeTinyModel();
  adapters = mkdtempSync(join(tmpdir(), 'magrpo-adapters-test-'));
  lm = LanguageModel.load(dir);
});
after(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(adapters, { recursive: true, force: true });
});
const servers: FakeServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

/** A vLLM double: adapters load/unload, completions answer `choose(request)`. */
async function vllm(choose: (r: SeenRequest) => { ids: number[]; logprobs: number[]; text: string; finish?: string }[]): Promise<FakeServer> {
  const s = await new FakeServer((r) => {
    if (r.path === '/v1/load_lora_adapter') return { body: `Success: LoRA adapter '${r.body.lora_name}' added successfully.` };
    if (r.path === '/v1/unload_lora_adapter') return { body: `Success: LoRA adapter '${r.body.lora_name}' removed successfully.` };
    return { body: vllmCompletion(String(r.body.model), choose(r)) };
  }).start();
  servers.push(s);
  return s;
}

function client(urls: string[], logs: string[] = [], over: Partial<OpenAIClientOptions> = {}): OpenAISampler {
  return new OpenAISampler(
    lm,
    new Rng(3),
    {
      servers: urls,
      apiKey: null,
      apiKeyEnv: null,
      timeoutMs: 60_000,
      maxConcurrency: 4,
      maxRetries: 2,
      backoffMs: 5,
      maxBackoffMs: 20,
      maxFailures: 2,
      maxResponseBytes: 1 << 20,
      balance: 'least_busy',
      promptFormat: 'token_ids',
      adapterDir: adapters,
      deleteOldAdapters: true,
      ...over,
    },
    (m) => logs.push(m),
  );
}

const writeAdapter = (d: string) => {
  mkdirSync(d, { recursive: true });
  writeFileSync(join(d, 'adapter_config.json'), '{}');
};
const params = { maxNewTokens: 5, stopStrings: [] as string[], temperature: 0.7, topK: 20, topP: 0.9 };

describe('OpenAISampler', () => {
  it('sends the vLLM request and returns the sampled ids, text and log-probs', async () => {
    const s = await vllm((r) =>
      Array.from({ length: Number(r.body.n) }, (_, g) => ({ ids: [2 + g, 3, 0], logprobs: [-0.5, -1, -0.25], text: 'x', finish: 'stop' })),
    );
    const c = client([s.url]);
    await c.loadWeights('agent_0-v0', writeAdapter);
    const [out] = await c.generate([{ prompt: 'go a', n: 2 }], { ...params, stopStrings: ['\n\n'] });
    const req = s.seen.find((r) => r.path === '/v1/completions') as SeenRequest;
    const { seed, ...rest } = req.body;
    assert.ok(Number.isInteger(seed));
    assert.deepEqual(rest, {
      model: 'agent_0-v0',
      prompt: lm.encode('go a'),
      n: 2,
      max_tokens: 5,
      temperature: 0.7,
      top_p: 0.9,
      top_k: 20,
      stop: ['\n\n'],
      logprobs: 1,
      return_tokens_as_token_ids: true,
      skip_special_tokens: false,
      include_stop_str_in_output: true,
    });
    assert.deepEqual(out.promptIds, lm.encode('go a'));
    assert.deepEqual(
      out.completions.map((x) => x.ids),
      [
        [2, 3, 0],
        [3, 3, 0],
      ],
    );
    assert.equal(out.completions[0].text, lm.tokenizer.decode([2, 3, 0], { skipSpecialTokens: true }));
    assert.deepEqual(out.completions[0].logprobs, [-0.5, -1, -0.25]);
    assert.deepEqual(c.takeStats(), { rollout_servers: 1, rollout_retokenized_frac: 0, rollout_missing_logprobs_frac: 0 });
  });

  it('cuts the text before a stop string, keeping every sampled token', async () => {
    const s = await vllm(() => [{ ids: [2, 3, 4], logprobs: [-1, -1, -1], text: 'a b c', finish: 'stop' }]);
    const c = client([s.url]);
    await c.loadWeights('agent_0-v0', writeAdapter);
    const [out] = await c.generate([{ prompt: 'go', n: 1 }], { ...params, stopStrings: ['c'] });
    assert.deepEqual(out.completions[0].ids, [2, 3, 4]);
    const full = lm.tokenizer.decode([2, 3, 4], { skipSpecialTokens: true });
    assert.ok(full.includes('c'));
    assert.equal(out.completions[0].text, full.slice(0, full.indexOf('c')));
  });

  it('asks again when a server returns fewer than n choices (llama.cpp answers one)', async () => {
    const s = await vllm(() => [{ ids: [5], logprobs: [-2], text: 'd' }]);
    const logs: string[] = [];
    const c = client([s.url], logs);
    await c.loadWeights('agent_0-v0', writeAdapter);
    const [out] = await c.generate([{ prompt: 'go', n: 3 }], params);
    assert.equal(out.completions.length, 3);
    const sent = s.seen.filter((r) => r.path === '/v1/completions');
    assert.deepEqual(
      sent.map((r) => r.body.n),
      [3, 2, 1],
    );
    assert.equal(new Set(sent.map((r) => r.body.seed)).size, 3, 'each round gets its own seed');
    assert.match(logs.join('\n'), /returned 1 of n = 3 completions/);
  });

  it('re-tokenises text from a server without token ids: one warning, a measured mismatch rate', async () => {
    const s = await new FakeServer((r) => {
      if (r.path.endsWith('_lora_adapter')) return { body: 'Success' };
      // llama.cpp-like: token strings, not ids. First choice lines up with the local tokenizer, the second does not.
      return {
        body: {
          choices: [
            { index: 0, text: 'a b', logprobs: { tokens: ['a', 'b'], token_logprobs: [-0.5, -0.75] }, finish_reason: 'length' },
            { index: 1, text: 'a b', logprobs: { tokens: ['a b'], token_logprobs: [-1.5] }, finish_reason: 'length' },
          ],
        },
      };
    }).start();
    servers.push(s);
    const logs: string[] = [];
    const c = client([s.url], logs);
    await c.loadWeights('agent_0-v0', writeAdapter);
    const [out] = await c.generate([{ prompt: 'go', n: 2 }], params);
    await c.generate([{ prompt: 'go', n: 2 }], params);
    const ab = lm.tokenizer.encode('a b', { addSpecialTokens: false });
    assert.deepEqual(out.completions[0].ids, ab);
    assert.deepEqual(out.completions[0].logprobs, [-0.5, -0.75], 'lined-up tokens keep the server log-probs');
    assert.deepEqual(out.completions[1].logprobs, [], 'misaligned tokens: no per-token sampler log-probs');
    assert.equal(logs.filter((m) => m.includes('re-tokenising')).length, 1, 'warned once');
    assert.match(logs[0], new RegExp(`warning: ${s.url} returns text without token ids \\(vLLM's "return_tokens_as_token_ids"\\)`));
    const st = c.takeStats();
    assert.equal(st.rollout_retokenized_frac, 1);
    assert.equal(st.rollout_retokenize_mismatch_frac, 0.5);
  });

  it('puts back the EOS a text-only server leaves out when it stopped on it', async () => {
    const s = await new FakeServer((r) =>
      r.path.endsWith('_lora_adapter')
        ? { body: 'ok' }
        : { body: { choices: [{ index: 0, text: 'a', logprobs: { tokens: ['a'], token_logprobs: [-1] }, finish_reason: 'stop' }] } },
    ).start();
    servers.push(s);
    const c = client([s.url]);
    await c.loadWeights('agent_0-v0', writeAdapter);
    const [out] = await c.generate([{ prompt: 'go', n: 1 }], params);
    assert.deepEqual(out.completions[0].ids, [...lm.tokenizer.encode('a', { addSpecialTokens: false }), 0]);
  });

  it('names the server and the field when a server ignores logprobs', async () => {
    const s = await new FakeServer((r) =>
      r.path.endsWith('_lora_adapter') ? { body: 'ok' } : { body: { choices: [{ index: 0, text: 'a b', finish_reason: 'length' }] } },
    ).start();
    servers.push(s);
    const c = client([s.url]);
    await c.loadWeights('agent_0-v0', writeAdapter);
    await assert.rejects(
      c.generate([{ prompt: 'go', n: 1 }], params),
      new RegExp(`${s.url} returned no log-probs although the request asked for them \\(field "logprobs": 1\\)`),
    );
  });

  it('refuses token ids outside the vocabulary (another model on the server)', async () => {
    const s = await vllm(() => [{ ids: [2, 50000], logprobs: [-1, -1], text: 'x' }]);
    const c = client([s.url]);
    await c.loadWeights('agent_0-v0', writeAdapter);
    await assert.rejects(c.generate([{ prompt: 'go', n: 1 }], params), /returned token id 50000, outside the agent's vocabulary of 10/);
  });

  it('loads each adapter version on every server before unloading the previous one; requests name the newest', async () => {
    const a = await vllm(() => [{ ids: [2], logprobs: [-1], text: 'a' }]);
    const b = await vllm(() => [{ ids: [2], logprobs: [-1], text: 'a' }]);
    const c = client([a.url, b.url]);
    await assert.rejects(c.generate([{ prompt: 'go', n: 1 }], params), /no adapter loaded yet/);
    for (const step of [0, 1, 2]) await c.loadWeights(`agent_1-v${step}`, writeAdapter);
    for (const s of [a, b]) {
      assert.deepEqual(
        s.seen.map((r) => `${r.path.replace('/v1/', '')} ${r.body.lora_name}`),
        [
          'load_lora_adapter agent_1-v0',
          'load_lora_adapter agent_1-v1',
          'unload_lora_adapter agent_1-v0',
          'load_lora_adapter agent_1-v2',
          'unload_lora_adapter agent_1-v1',
        ],
      );
      assert.equal(s.seen[0].body.lora_path, join(adapters, 'agent_1-v0'));
    }
    assert.ok(existsSync(join(adapters, 'agent_1-v2', 'adapter_config.json')));
    assert.ok(!existsSync(join(adapters, 'agent_1-v0')) && !existsSync(join(adapters, 'agent_1-v1')), 'unloaded versions are deleted');
    await c.generate([{ prompt: 'go', n: 1 }], params);
    const last = [...a.seen, ...b.seen].filter((r) => r.path === '/v1/completions');
    assert.deepEqual(
      last.map((r) => r.body.model),
      ['agent_1-v2'],
    );
  });
});
