/**
 * `magrpo serve` as a real process on loopback: every route with fetch, SSE streams parsed, seeds
 * reproducing in-process sampling token for token (alone and while other requests share the
 * batch), concurrent requests batched, adapters loaded and unloaded, API key, errors, Ctrl-C.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Rng } from '../../src/engine/rng.js';
import { applyLora, saveLora } from '../../src/model/lora.js';
import { LanguageModel } from '../../src/model/pretrained.js';

// biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
type Json = any;

const ROOT = join(import.meta.dirname, '..', '..');
const MICRO = join(ROOT, 'models', 'micro');
const KEY = 'test-key-123';
const tmp = mkdtempSync(join(tmpdir(), 'magrpo-serve-'));
const lm = LanguageModel.load(MICRO);

let child: ChildProcess;
let url = '';
let stderr = '';

/** Starts `magrpo serve` and resolves with its URL from stderr. */
function startServe(args: string[], env: Record<string, string>): Promise<{ child: ChildProcess; url: string }> {
  const p = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli', 'main.ts'), 'serve', ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    p.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
      const m = /serve: (http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(stderr);
      if (m) resolve({ child: p, url: m[1] });
    });
    p.on('exit', (code) => reject(new Error(`serve exited with ${code}: ${stderr}`)));
  });
}

const auth = { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' };
async function post(path: string, body: unknown, headers: Record<string, string> = auth): Promise<{ status: number; json: Json; text: string }> {
  const res = await fetch(url + path, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, json, text };
}

/** The `data:` payloads of a server-sent event stream, up to [DONE]. */
async function sse(path: string, body: unknown): Promise<{ events: Json[]; done: boolean; contentType: string | null }> {
  const res = await fetch(url + path, { method: 'POST', headers: auth, body: JSON.stringify(body) });
  const text = await res.text();
  const events: Json[] = [];
  let done = false;
  for (const block of text.split('\n\n')) {
    if (!block.trim()) continue;
    assert.match(block, /^data: /, `SSE block: ${block}`);
    const data = block.slice(6);
    if (data === '[DONE]') done = true;
    else events.push(JSON.parse(data));
  }
  return { events, done, contentType: res.headers.get('content-type') };
}

const PROMPT = 'def add(a, b):';

function assertError(r: { status: number; json: Json }, status: number, param?: string | null) {
  assert.equal(r.status, status, JSON.stringify(r.json));
  assert.equal(typeof r.json.error.message, 'string');
  assert.equal(typeof r.json.error.type, 'string');
  assert.ok('param' in r.json.error && 'code' in r.json.error);
  if (param !== undefined) assert.equal(r.json.error.param, param);
}

describe('magrpo serve (real process)', { timeout: 600_000 }, () => {
  before(async () => {
    ({ child, url } = await startServe(
      ['--model', MICRO, '--port', '0', '--max-batch', '16', '--api-key-env', 'MAGRPO_TEST_KEY', '--max-body-bytes', '65536', '--served-model-name', 'micro'],
      {
        MAGRPO_TEST_KEY: KEY,
      },
    ));
  });
  after(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(tmp, { recursive: true, force: true });
  });

  it('GET /health needs no key; every other route needs the bearer key', async () => {
    assert.equal((await fetch(`${url}/health`)).status, 200);
    const r = await fetch(`${url}/v1/models`);
    assert.equal(r.status, 401);
    assert.equal(((await r.json()) as Json).error.code, 'invalid_api_key');
    assertError(await post('/v1/completions', { prompt: 'x' }, { Authorization: 'Bearer wrong' }), 401);
  });

  it('GET /v1/models lists the base model', async () => {
    const r = await fetch(`${url}/v1/models`, { headers: auth });
    const j = (await r.json()) as Json;
    assert.equal(j.object, 'list');
    assert.deepEqual(
      j.data.map((m: Json) => [m.id, m.object, m.owned_by, m.max_model_len]),
      [['micro', 'model', 'magrpo', 256]],
    );
  });

  it('POST /v1/completions: greedy text equals in-process sampling; logprobs, vLLM token ids and usage', async () => {
    const r = await post('/v1/completions', { model: 'micro', prompt: PROMPT, max_tokens: 10, temperature: 0, logprobs: 3, return_token_ids: true });
    assert.equal(r.status, 200, r.text);
    const local = lm.sample([PROMPT], { maxNewTokens: 10, temperature: 0 })[0];
    const c = r.json.choices[0];
    assert.equal(r.json.object, 'text_completion');
    assert.match(r.json.id, /^cmpl-/);
    assert.deepEqual(c.token_ids, local.completionIds);
    assert.deepEqual(c.prompt_token_ids, local.promptIds);
    assert.equal(c.text, local.text);
    assert.equal(c.finish_reason, local.finishReason === 'length' ? 'length' : 'stop');
    assert.equal(c.logprobs.tokens.length, c.token_ids.length);
    for (const [t, lp] of c.logprobs.token_logprobs.entries()) assert.ok(Math.abs(lp - local.logprobs[t]) < 1e-5);
    for (const top of c.logprobs.top_logprobs) assert.ok(Object.keys(top).length >= 3 && Object.keys(top).length <= 4);
    // greedy: the chosen token is the most likely one
    assert.equal(Math.max(...(Object.values(c.logprobs.top_logprobs[0]) as number[])), c.logprobs.token_logprobs[0]);
    assert.deepEqual(r.json.usage, { prompt_tokens: local.promptIds.length, completion_tokens: 10, total_tokens: local.promptIds.length + 10 });

    const ids = await post('/v1/completions', { prompt: PROMPT, max_tokens: 10, temperature: 0, logprobs: 1, return_tokens_as_token_ids: true });
    assert.deepEqual(
      ids.json.choices[0].logprobs.tokens,
      local.completionIds.map((t) => `token_id:${t}`),
    );
    for (const k of Object.keys(ids.json.choices[0].logprobs.top_logprobs[0])) assert.match(k, /^token_id:\d+$/);
  });

  it('a seed reproduces LanguageModel.sample token for token, alone and while other requests share the batch', async () => {
    const body = { prompt: PROMPT, n: 3, max_tokens: 12, temperature: 1, top_k: 50, seed: 1234, return_token_ids: true };
    const local = lm.sample(Array(3).fill(PROMPT), { maxNewTokens: 12, temperature: 1, topK: 50, rng: 1234 });
    const alone = await post('/v1/completions', body);
    assert.deepEqual(
      alone.json.choices.map((c: Json) => c.token_ids),
      local.map((s) => s.completionIds),
    );
    for (const [i, c] of alone.json.choices.entries()) assert.equal(c.index, i);
    // the same request among others (different prompts, params and lengths)
    const others = [
      post('/v1/completions', { prompt: 'class Stack:', n: 4, max_tokens: 30, temperature: 0.7, seed: 9 }),
      post('/v1/completions', { prompt: 'import os\n', max_tokens: 5, temperature: 1.3, top_p: 0.9 }),
    ];
    const again = post('/v1/completions', body);
    const [a] = await Promise.all([again, ...others]);
    assert.deepEqual(
      a.json.choices.map((c: Json) => c.token_ids),
      local.map((s) => s.completionIds),
    );
    const other = await post('/v1/completions', { ...body, seed: 1235 });
    assert.notDeepEqual(
      other.json.choices.map((c: Json) => c.token_ids),
      local.map((s) => s.completionIds),
    );
  });

  it('token-id prompts and lists of prompts: choices ordered prompt-major', async () => {
    const ids = lm.encode(PROMPT);
    const r = await post('/v1/completions', { prompt: [ids, lm.encode('x = ')], n: 2, max_tokens: 4, temperature: 0, return_token_ids: true });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.choices.length, 4);
    assert.deepEqual(
      r.json.choices.map((c: Json) => c.index),
      [0, 1, 2, 3],
    );
    assert.deepEqual(r.json.choices[1].prompt_token_ids, ids);
    assert.deepEqual(r.json.choices[2].prompt_token_ids, lm.encode('x = '));
    const text = await post('/v1/completions', { prompt: PROMPT, max_tokens: 4, temperature: 0 });
    assert.equal(r.json.choices[0].text, text.json.choices[0].text, 'ids and text give the same completion');
  });

  it('stop strings cut the text (kept with include_stop_str_in_output); stop_reason names them', async () => {
    const full = (await post('/v1/completions', { prompt: PROMPT, max_tokens: 20, temperature: 0 })).json.choices[0].text as string;
    const stop = full.slice(6, 9);
    const at = full.indexOf(stop);
    const r = await post('/v1/completions', { prompt: PROMPT, max_tokens: 20, temperature: 0, stop: [stop] });
    assert.equal(r.json.choices[0].text, full.slice(0, at));
    assert.equal(r.json.choices[0].finish_reason, 'stop');
    assert.equal(r.json.choices[0].stop_reason, stop);
    const kept = await post('/v1/completions', { prompt: PROMPT, max_tokens: 20, temperature: 0, stop, include_stop_str_in_output: true });
    assert.equal(kept.json.choices[0].text, full.slice(0, at + stop.length));
  });

  it('stream: true sends SSE chunks whose text adds up to the non-streamed text, then usage and [DONE]', async () => {
    const body = { prompt: PROMPT, n: 2, max_tokens: 15, temperature: 0.9, seed: 7, logprobs: 0, stop: ['\n\n'] };
    const whole = await post('/v1/completions', body);
    const s = await sse('/v1/completions', { ...body, stream: true, stream_options: { include_usage: true } });
    assert.match(s.contentType ?? '', /^text\/event-stream/);
    assert.ok(s.done);
    for (const i of [0, 1]) {
      const chunks = s.events.filter((e) => e.choices?.[0]?.index === i);
      assert.equal(chunks.map((e) => e.choices[0].text).join(''), whole.json.choices[i].text);
      assert.equal(chunks.at(-1).choices[0].finish_reason, whole.json.choices[i].finish_reason);
      assert.deepEqual(
        chunks.flatMap((e) => e.choices[0].logprobs.token_logprobs),
        whole.json.choices[i].logprobs.token_logprobs,
      );
    }
    assert.deepEqual(s.events.at(-1).choices, []);
    assert.deepEqual(s.events.at(-1).usage, whole.json.usage);
  });

  it('POST /v1/chat/completions: chat template, chat logprobs, and streaming deltas', async () => {
    const messages = [{ role: 'user', content: 'Write a function.' }];
    const r = await post('/v1/chat/completions', { messages, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 2 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.object, 'chat.completion');
    const c = r.json.choices[0];
    assert.equal(c.message.role, 'assistant');
    const prompt = lm.tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true });
    const local = lm.sample([prompt], { maxNewTokens: 8, temperature: 0 })[0];
    assert.equal(c.message.content, local.text);
    assert.equal(c.logprobs.content.length, local.completionIds.length);
    for (const e of c.logprobs.content) {
      assert.equal(e.top_logprobs.length, 2);
      assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
    }
    const tk = await post('/tokenize', { messages });
    assert.equal(tk.json.count, r.json.usage.prompt_tokens);
    const s = await sse('/v1/chat/completions', { messages, max_tokens: 8, temperature: 0, stream: true });
    assert.ok(s.done);
    assert.equal(s.events[0].object, 'chat.completion.chunk');
    assert.equal(s.events[0].choices[0].delta.role, 'assistant');
    assert.equal(s.events.map((e) => e.choices[0].delta.content ?? '').join(''), local.text);
    assert.equal(s.events.at(-1).choices[0].finish_reason, 'length');
  });

  it('concurrent requests are all answered, and batched together', async () => {
    const before = (await (await fetch(`${url}/stats`, { headers: auth })).json()) as Json;
    const rs = await Promise.all(
      [0, 1, 2, 3].map((i) => post('/v1/completions', { prompt: `x${i} = `, n: 2, max_tokens: 40, temperature: 1, seed: i, ignore_eos: true })),
    );
    for (const r of rs) {
      assert.equal(r.status, 200);
      assert.equal(r.json.choices.length, 2);
      for (const c of r.json.choices) assert.equal(c.finish_reason, 'length');
    }
    const stats = (await (await fetch(`${url}/stats`, { headers: auth })).json()) as Json;
    assert.ok(stats.maxRowsInStep >= 4, `rows decoded together: ${stats.maxRowsInStep}`);
    assert.equal(stats.groupsFinished - before.groupsFinished, 4);
  });

  it('LoRA adapters: load, select by model, 400 on a duplicate, unload, then 404', async () => {
    const trained = LanguageModel.load(MICRO);
    applyLora(trained.model, { r: 2, alpha: 8, targetModules: ['q_proj', 'v_proj', 'down_proj'] }, new Rng(3));
    const rng = new Rng(4);
    for (const ad of trained.model.lora.values()) for (let i = 0; i < ad.B.size; i++) ad.B.data[i] = rng.normal() * 0.5;
    const dir = join(tmp, 'agent0');
    saveLora(trained.model, dir, MICRO);
    const load = await post('/v1/load_lora_adapter', { lora_name: 'agent0-v1', lora_path: dir });
    assert.equal(load.status, 200, load.text);
    assert.match(load.text, /agent0-v1/);
    const models = (await (await fetch(`${url}/v1/models`, { headers: auth })).json()) as Json;
    assert.deepEqual(
      models.data.map((m: Json) => [m.id, m.parent]),
      [
        ['micro', null],
        ['agent0-v1', 'micro'],
      ],
    );
    const body = { prompt: PROMPT, max_tokens: 12, temperature: 0.8, seed: 5, return_token_ids: true };
    const [viaAdapter, viaBase] = await Promise.all([
      post('/v1/completions', { ...body, model: 'agent0-v1' }),
      post('/v1/completions', { ...body, model: 'micro' }),
    ]);
    const local = trained.sample([PROMPT], { maxNewTokens: 12, temperature: 0.8, rng: 5 })[0];
    assert.deepEqual(viaAdapter.json.choices[0].token_ids, local.completionIds, 'adapter output = in-process model with the adapter');
    assert.deepEqual(viaBase.json.choices[0].token_ids, lm.sample([PROMPT], { maxNewTokens: 12, temperature: 0.8, rng: 5 })[0].completionIds);
    assert.notDeepEqual(viaAdapter.json.choices[0].token_ids, viaBase.json.choices[0].token_ids);
    assertError(await post('/v1/load_lora_adapter', { lora_name: 'agent0-v1', lora_path: dir }), 400, 'lora_name');
    assertError(await post('/v1/load_lora_adapter', { lora_name: 'bad', lora_path: join(tmp, 'missing') }), 400, 'lora_path');
    const un = await post('/v1/unload_lora_adapter', { lora_name: 'agent0-v1' });
    assert.equal(un.status, 200);
    assertError(await post('/v1/completions', { ...body, model: 'agent0-v1' }), 404, 'model');
    assertError(await post('/v1/unload_lora_adapter', { lora_name: 'agent0-v1' }), 404);
  });

  it('POST /tokenize and /detokenize round-trip', async () => {
    const t = await post('/tokenize', { prompt: 'hello world' });
    assert.deepEqual(t.json, { count: lm.encode('hello world').length, max_model_len: 256, tokens: lm.encode('hello world'), token_strs: null });
    const d = await post('/detokenize', { tokens: t.json.tokens });
    assert.deepEqual(d.json, { prompt: 'hello world' });
  });

  it('errors: OpenAI-shaped with the right status', async () => {
    assertError(await post('/v1/completions', '{not json'), 400);
    assertError(await post('/v1/completions', { prompt: PROMPT, temperature: -1 }), 400, 'temperature');
    assertError(await post('/v1/completions', { prompt: PROMPT, max_tokens: 1000 }), 400, 'max_tokens');
    assertError(await post('/v1/completions', { prompt: [[5, 99999]] }), 400, 'prompt');
    assertError(await post('/v1/completions', { prompt: PROMPT, echo: true }), 400, 'echo');
    assertError(await post('/v1/completions', { prompt: PROMPT, model: 'nope' }), 404, 'model');
    assertError(await post('/v1/completions', { prompt: 'x'.repeat(70_000) }), 413);
    assertError(await post('/v1/nothing', {}), 404);
    const get = await fetch(`${url}/v1/completions`, { headers: auth });
    assert.equal(get.status, 405);
    // DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends its own Host header
    const status = await new Promise<number | undefined>((resolve, reject) => {
      const req = request(`${url}/v1/models`, { headers: { ...auth, Host: 'evil.example' } }, (res) => {
        res.resume();
        resolve(res.statusCode);
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(status, 403);
  });

  it('Ctrl-C stops it cleanly', async () => {
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    child.kill('SIGINT');
    assert.equal(await exited, 0);
    assert.match(stderr, /serve: stopping/);
  });
});
