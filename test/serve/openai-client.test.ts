/**
 * The official `openai` npm client, unmodified, against a real `magrpo serve` process:
 * /v1/models, /v1/completions and /v1/chat/completions, plain and streamed (stream: true), seeds,
 * log-probs, usage, an adapter as `model`, and errors surfacing as the client's typed errors.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { Rng } from '../../src/engine/rng.js';
import { applyLora, saveLora } from '../../src/model/lora.js';
import { LanguageModel } from '../../src/model/pretrained.js';

const ROOT = join(import.meta.dirname, '..', '..');
const MICRO = join(ROOT, 'models', 'micro');
const KEY = 'sk-test-openai-client';
const tmp = mkdtempSync(join(tmpdir(), 'magrpo-openai-client-'));
const lm = LanguageModel.load(MICRO);

let child: ChildProcess | null = null;
let url = '';
let client: OpenAI;

/** `magrpo serve` on a free port with an API key; resolves with its base URL (from stderr). */
function startServe(): Promise<string> {
  const p = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(ROOT, 'src', 'cli', 'main.ts'),
      'serve',
      '--model',
      MICRO,
      '--port',
      '0',
      '--served-model-name',
      'micro',
      '--api-key-env',
      'OPENAI_CLIENT_TEST_KEY',
    ],
    { cwd: ROOT, env: { ...process.env, OPENAI_CLIENT_TEST_KEY: KEY }, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  child = p;
  let err = '';
  return new Promise((resolve, reject) => {
    p.stderr?.on('data', (d: Buffer) => {
      err += d.toString();
      const m = /serve: (http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(err);
      if (m) resolve(m[1]);
    });
    p.on('exit', (code, signal) => reject(new Error(`magrpo serve exited (${code ?? signal}): ${err}`)));
  });
}

const PROMPT = 'def add(a, b):';

describe('the official openai client against magrpo serve (real process)', { timeout: 180_000 }, () => {
  before(async () => {
    url = await startServe();
    client = new OpenAI({ baseURL: `${url}/v1`, apiKey: KEY, maxRetries: 0, timeout: 60_000 });
  });
  after(() => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    rmSync(tmp, { recursive: true, force: true });
  });

  it('models.list() and models.retrieve(): the base model, then a loaded adapter with the base as parent', async () => {
    const ids: string[] = [];
    for await (const m of client.models.list()) ids.push(m.id);
    assert.deepEqual(ids, ['micro']);
    const base = await client.models.retrieve('micro');
    assert.equal(base.id, 'micro');
    assert.equal(base.object, 'model');
    const missing = await client.models.retrieve('agent0').catch((e: unknown) => e);
    assert.ok(missing instanceof OpenAI.NotFoundError, String(missing));

    const tuned = LanguageModel.load(MICRO);
    applyLora(tuned.model, { r: 2, alpha: 4, targetModules: ['q_proj', 'v_proj'] }, new Rng(3));
    for (const a of tuned.model.lora.values()) a.B.data.fill(0.3);
    saveLora(tuned.model, join(tmp, 'adapter'), MICRO);
    const res = await fetch(`${url}/v1/load_lora_adapter`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ lora_name: 'agent0', lora_path: join(tmp, 'adapter') }),
    });
    assert.equal(res.status, 200, await res.text());
    const page = await client.models.list();
    assert.deepEqual(
      page.data.map((m) => [m.id, m.object, m.owned_by]),
      [
        ['micro', 'model', 'magrpo'],
        ['agent0', 'model', 'magrpo'],
      ],
    );
    const card = (await client.models.retrieve('agent0')) as OpenAI.Model & { parent?: string | null };
    assert.equal(card.parent, 'micro');
    const viaAdapter = await client.completions.create({ model: 'agent0', prompt: PROMPT, max_tokens: 6, temperature: 0 });
    const viaBase = await client.completions.create({ model: 'micro', prompt: PROMPT, max_tokens: 6, temperature: 0 });
    assert.equal(viaAdapter.model, 'agent0');
    assert.notEqual(viaAdapter.choices[0].text, viaBase.choices[0].text, 'the adapter changes the greedy completion');
  });

  it('completions.create: greedy text, seeded samples and log-probs equal in-process sampling; usage', async () => {
    const greedy = await client.completions.create({ model: 'micro', prompt: PROMPT, max_tokens: 10, temperature: 0, logprobs: 2 });
    const local = lm.sample([PROMPT], { maxNewTokens: 10, temperature: 0 })[0];
    assert.equal(greedy.object, 'text_completion');
    assert.equal(greedy.choices[0].text, local.text);
    assert.equal(greedy.choices[0].finish_reason, 'length');
    assert.deepEqual(greedy.usage, { prompt_tokens: local.promptIds.length, completion_tokens: 10, total_tokens: local.promptIds.length + 10 });
    const lp = greedy.choices[0].logprobs;
    assert.ok(lp?.token_logprobs && lp.tokens && lp.top_logprobs);
    assert.equal(lp.tokens.length, 10);
    for (const [t, x] of lp.token_logprobs.entries()) assert.ok(Math.abs(x - local.logprobs[t]) < 1e-5);

    const seeded = await client.completions.create({ model: 'micro', prompt: PROMPT, n: 3, max_tokens: 12, temperature: 1, top_p: 0.9, seed: 77 });
    const want = lm.sample(Array(3).fill(PROMPT), { maxNewTokens: 12, temperature: 1, topP: 0.9, rng: 77 });
    assert.deepEqual(
      seeded.choices.map((c) => [c.index, c.text]),
      want.map((s, i) => [i, s.text]),
    );
  });

  it('completions.create({stream: true}): chunks add up to the non-streamed choices, then usage', async () => {
    const body = { model: 'micro', prompt: PROMPT, n: 2, max_tokens: 12, temperature: 0.8, seed: 5, stop: ['\n\n'] };
    const whole = await client.completions.create(body);
    const stream = await client.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
    const text = ['', ''];
    const finish: (string | null)[] = [null, null];
    let usage: OpenAI.CompletionUsage | null | undefined = null;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      assert.equal(chunk.object, 'text_completion');
      for (const c of chunk.choices) {
        text[c.index] += c.text;
        if (c.finish_reason) finish[c.index] = c.finish_reason;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    assert.ok(chunks > 2, 'one chunk per token');
    assert.deepEqual(
      text,
      whole.choices.map((c) => c.text),
    );
    assert.deepEqual(
      finish,
      whole.choices.map((c) => c.finish_reason),
    );
    assert.deepEqual(usage, whole.usage);
  });

  it('chat.completions.create: plain and streamed, the same content; chat log-probs', async () => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'system', content: 'You write Python.' },
      { role: 'user', content: 'Write a function.' },
    ];
    const chat = await client.chat.completions.create({ model: 'micro', messages, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 2 });
    assert.equal(chat.object, 'chat.completion');
    const m = chat.choices[0].message;
    assert.equal(m.role, 'assistant');
    const prompt = lm.tokenizer.applyChatTemplate(messages as { role: string; content: string }[], { addGenerationPrompt: true });
    const local = lm.sample([prompt], { maxNewTokens: 8, temperature: 0 })[0];
    assert.equal(m.content, local.text);
    const content = chat.choices[0].logprobs?.content ?? [];
    assert.equal(content.length, 8);
    for (const [t, e] of content.entries()) {
      assert.equal(e.top_logprobs.length, 2);
      assert.ok(Math.abs(e.logprob - local.logprobs[t]) < 1e-5);
    }
    assert.equal(chat.usage?.completion_tokens, 8);

    const stream = await client.chat.completions.create({ model: 'micro', messages, max_tokens: 8, temperature: 0, stream: true });
    let text = '';
    let role: string | undefined;
    let finish: string | null = null;
    for await (const chunk of stream) {
      assert.equal(chunk.object, 'chat.completion.chunk');
      const c = chunk.choices[0];
      if (!c) continue;
      role ??= c.delta.role;
      text += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
    assert.equal(role, 'assistant');
    assert.equal(text, m.content);
    assert.equal(finish, chat.choices[0].finish_reason);

    // A seeded sample through the stream equals the plain answer with that seed.
    const sampled = { model: 'micro', messages, max_tokens: 10, temperature: 1, seed: 11 };
    const plain = await client.chat.completions.create(sampled);
    let streamed = '';
    for await (const chunk of await client.chat.completions.create({ ...sampled, stream: true })) streamed += chunk.choices[0]?.delta.content ?? '';
    assert.equal(streamed, plain.choices[0].message.content);
  });

  it("errors arrive as the client's typed errors with the server's message", async () => {
    const unknown = await client.completions.create({ model: 'nope', prompt: PROMPT, max_tokens: 2 }).catch((e: unknown) => e);
    assert.ok(unknown instanceof OpenAI.NotFoundError, String(unknown));
    assert.match(unknown.message, /The model `nope` does not exist/);
    const bad = await client.completions.create({ model: 'micro', prompt: PROMPT, max_tokens: 2, temperature: -1 }).catch((e: unknown) => e);
    assert.ok(bad instanceof OpenAI.BadRequestError, String(bad));
    assert.equal(bad.param, 'temperature');
    const wrongKey = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'wrong', maxRetries: 0 });
    const denied = await wrongKey.chat.completions.create({ model: 'micro', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    assert.ok(denied instanceof OpenAI.AuthenticationError, String(denied));
  });
});
