/**
 * The server pool against real HTTP servers on 127.0.0.1 (test doubles built on node:http):
 * balancing, the concurrency bound, retries with backoff, removal of a failing server, and the
 * messages of non-retryable failures.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { normalizeServerUrl, type PoolOptions, RolloutError, ServerPool } from '../../src/rollout/pool.js';
import { deadUrl, FakeServer } from './fake-server.js';

const servers: FakeServer[] = [];
async function fake(handler: ConstructorParameters<typeof FakeServer>[0]): Promise<FakeServer> {
  const s = await new FakeServer(handler).start();
  servers.push(s);
  return s;
}
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

function pool(urls: string[], over: Partial<PoolOptions> = {}, logs: string[] = []): ServerPool {
  return new ServerPool({
    servers: urls,
    apiKey: null,
    apiKeyEnv: null,
    timeoutMs: 60_000,
    maxConcurrency: 8,
    maxRetries: 4,
    backoffMs: 5,
    maxBackoffMs: 50,
    maxFailures: 3,
    maxResponseBytes: 1 << 20,
    balance: 'least_busy',
    log: (m) => logs.push(m),
    ...over,
  });
}

describe('ServerPool', () => {
  it('normalises base URLs and refuses non-URLs', () => {
    assert.equal(normalizeServerUrl('http://127.0.0.1:8000/v1/'), 'http://127.0.0.1:8000');
    assert.equal(normalizeServerUrl('https://h.example/prefix/'), 'https://h.example/prefix');
    assert.throws(() => normalizeServerUrl('127.0.0.1:8000'), /rollout\.servers: "127\.0\.0\.1:8000" (is not a URL|must start with http)/);
    assert.throws(() => normalizeServerUrl('ftp://h'), /must start with http:\/\/ or https:\/\//);
  });

  it('spreads concurrent requests over the servers (least busy) and never exceeds max_concurrency', async () => {
    const a = await fake(() => ({ body: { ok: 'a' }, delayMs: 30 }));
    const b = await fake(() => ({ body: { ok: 'b' }, delayMs: 30 }));
    const p = pool([a.url, b.url], { maxConcurrency: 3 });
    const answers = await Promise.all(Array.from({ length: 12 }, () => p.post('/v1/completions', { x: 1 })));
    assert.equal(a.seen.length + b.seen.length, 12);
    assert.ok(a.seen.length >= 4 && b.seen.length >= 4, `unbalanced: ${a.seen.length} / ${b.seen.length}`);
    assert.ok(a.maxInflight + b.maxInflight <= 4 && Math.max(a.maxInflight, b.maxInflight) <= 3, 'bound exceeded');
    assert.deepEqual(new Set(answers.map((r) => r.server)), new Set([a.url, b.url]));
  });

  it('round robin alternates strictly', async () => {
    const a = await fake(() => ({ body: {} }));
    const b = await fake(() => ({ body: {} }));
    const p = pool([a.url, b.url], { balance: 'round_robin' });
    const order: string[] = [];
    for (let k = 0; k < 4; k++) order.push((await p.post('/x', {})).server);
    assert.deepEqual(order, [a.url, b.url, a.url, b.url]);
  });

  it('retries 5xx answers with growing backoff and succeeds', async () => {
    const s = await fake((_, k) => (k < 2 ? { status: 503, body: { error: { message: 'overloaded' } } } : { body: { ok: true } }));
    // The waits the pool asks for (wall-clock gaps between arrivals are not reliable on a loaded machine).
    const waits: number[] = [];
    const sleep = async (ms: number) => {
      waits.push(ms);
    };
    const r = await pool([s.url], { backoffMs: 40, maxBackoffMs: 1000, maxFailures: 5, sleep }).post('/v1/completions', {});
    assert.equal(JSON.parse(r.text).ok, true);
    assert.equal(s.seen.length, 3);
    assert.equal(waits.length, 2);
    assert.ok(waits[0] >= 0.8 * 40 && waits[0] <= 1.2 * 40, `first backoff ${waits[0]} ms, want 40 ± 20 %`);
    assert.ok(waits[1] >= 0.8 * 80 && waits[1] <= 1.2 * 80, `second backoff ${waits[1]} ms, want 80 ± 20 % (exponential)`);
  });

  it('retries a timeout on another server', async () => {
    const slow = await fake(() => ({ body: {}, delayMs: 30_000 }));
    const fast = await fake(() => ({ body: { ok: 1 } }));
    const p = pool([slow.url, fast.url], { timeoutMs: 2000, balance: 'round_robin' });
    const r = await p.post('/v1/completions', {});
    assert.equal(r.server, fast.url);
    assert.equal(slow.seen.length, 1);
  });

  it('takes a dead server out (logged) and goes on with the rest', async () => {
    const dead = await deadUrl();
    const live = await fake(() => ({ body: { ok: 1 } }));
    const logs: string[] = [];
    const p = pool([dead, live.url], { maxFailures: 1, balance: 'round_robin' }, logs);
    for (let k = 0; k < 4; k++) assert.equal((await p.post('/v1/completions', {})).server, live.url);
    assert.deepEqual(p.live(), [live.url]);
    assert.equal(logs.length, 1);
    assert.match(logs[0], new RegExp(`rollout server ${dead} taken out after 1 failure\\(s\\) in a row \\(.*connection refused.*\\); 1 left`));
  });

  it('fails with every server named once none is left', async () => {
    const d1 = await deadUrl();
    const bad = await fake(() => ({ status: 500, body: 'boom' }));
    const p = pool([d1, bad.url], { maxFailures: 2, maxRetries: 10 });
    await assert.rejects(p.post('/v1/completions', {}), (e: unknown) => {
      assert.ok(e instanceof RolloutError);
      assert.equal(e.kind, 'no_server');
      assert.match(e.message, /no rollout server left \(rollout\.servers\)/);
      assert.ok(e.message.includes(`${d1}: `) && e.message.includes('connection refused'));
      assert.ok(e.message.includes(`${bad.url}: `) && e.message.includes('answered 500: boom'));
      return true;
    });
  });

  it('says which environment variable to check on 401/403, and does not retry', async () => {
    const s = await fake(() => ({ status: 401, body: { error: { message: 'Unauthorized' } } }));
    await assert.rejects(pool([s.url], { apiKey: 'wrong', apiKeyEnv: 'VLLM_KEY' }).post('/v1/completions', {}), (e: unknown) => {
      assert.ok(e instanceof RolloutError && e.kind === 'auth');
      assert.match(e.message, /refused the request \(401 Unauthorized\): check the key in the environment variable VLLM_KEY \(rollout\.api_key_env\)/);
      return true;
    });
    assert.equal(s.seen.length, 1);
    assert.equal(s.seen[0].headers.authorization, 'Bearer wrong');
    await assert.rejects(pool([s.url]).post('/x', {}), /the server wants an API key: .* rollout\.api_key_env/);
    await assert.rejects(pool([s.url], { apiKeyEnv: 'UNSET_VAR' }).post('/x', {}), /the environment variable UNSET_VAR \(rollout\.api_key_env\) is not set/);
  });

  it('tells a wrong URL from a missing model on 404', async () => {
    const s = await fake((r) =>
      r.path === '/v1/completions'
        ? { status: 404, body: { error: { message: 'The model `agent_0-v7` does not exist.', type: 'NotFoundError', code: 404 } } }
        : { status: 404, body: { detail: 'Not Found' } },
    );
    await assert.rejects(
      pool([s.url]).post('/v1/completions', { model: 'agent_0-v7' }),
      /model "agent_0-v7" not found \(404 The model `agent_0-v7` does not exist\.\)/,
    );
    await assert.rejects(
      pool([`${s.url}/api`]).post('/v1/models', {}),
      /\/api\/v1\/models does not exist \(404 Not Found\): rollout\.servers entries are base URLs .* \(without \/v1\)/,
    );
    await assert.rejects(pool([s.url]).post('/v1/load_lora_adapter', {}), /VLLM_ALLOW_RUNTIME_LORA_UPDATING=True/);
    assert.equal(s.seen.length, 3, 'no retries on 404');
  });

  it('refuses answers over max_response_bytes', async () => {
    const s = await fake(() => ({ body: { pad: 'x'.repeat(5000) } }));
    await assert.rejects(
      pool([s.url], { maxResponseBytes: 1000 }).post('/x', {}),
      (e: unknown) => e instanceof RolloutError && e.kind === 'too_large' && /1000 bytes \(rollout\.max_response_mb\)/.test(e.message),
    );
  });

  it('postEach reaches every live server and removes one that keeps failing', async () => {
    const a = await fake(() => ({ body: 'Success: LoRA adapter added successfully.' }));
    const b = await fake(() => ({ status: 502, body: 'bad gateway' }));
    const logs: string[] = [];
    const p = pool([a.url, b.url], { maxRetries: 2, maxFailures: 10 }, logs);
    const ok = await p.postEach('/v1/load_lora_adapter', { lora_name: 'n', lora_path: '/p' });
    assert.deepEqual(ok, [a.url]);
    assert.equal(b.seen.length, 3, 'first try + max_retries');
    assert.deepEqual(p.live(), [a.url]);
    assert.match(logs.join('\n'), /taken out/);
  });
});
