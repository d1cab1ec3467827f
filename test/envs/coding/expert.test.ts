/**
 * expert_edits against a local OpenAI-compatible stub on 127.0.0.1: each test queues canned
 * replies; the stub records every request it receives.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { CodingItem } from '../../../src/envs/coding/data.js';
import { ExpertConfigError, lastJsonObject, resolveExpert } from '../../../src/envs/coding/expert.js';
import { codingTransition } from '../../../src/envs/coding/feedback.js';
import { auxPrompt, mainPrompt, singleAgentPrompt } from '../../../src/envs/coding/prompts.js';
import { PythonSandbox } from '../../../src/sandbox/index.js';

type Reply = { status: number; content: string };
const queue: Reply[] = [];
const received: { url: string; auth?: string; body: { model: string; messages: { role: string; content: string }[] } }[] = [];

let server: Server;
let baseUrl = '';
before(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      received.push({ url: req.url ?? '', auth: req.headers.authorization, body: JSON.parse(body) });
      const reply = queue.shift() ?? { status: 500, content: 'no reply queued' };
      res.writeHead(reply.status, { 'content-type': 'application/json' });
      res.end(reply.status === 200 ? JSON.stringify({ choices: [{ message: { role: 'assistant', content: reply.content } }] }) : reply.content);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/`;
});
after(() => server.close());

const sandbox = new PythonSandbox({ concurrency: 1 });
const item: CodingItem = {
  task_id: 't/0',
  prompt: 'def f(x):\n    """Return x plus one."""\n',
  test: 'def check(candidate):\n    assert candidate(1) == 2\n',
  entry_point: 'f',
};
const AUX = 'def aux(x):\n    return x + 2';
const MAIN = 'def f(x):\n    return aux(x)';

function transition(numAgents: 1 | 2 = 2) {
  return codingTransition(sandbox, numAgents, { mode: 'expert_edits', expert: { baseUrl, model: 'stub-coder', apiKey: 'sk-test' } });
}
const call = (numAgents: 1 | 2 = 2) =>
  transition(numAgents)({
    prompt: item.prompt,
    completions: numAgents === 2 ? [AUX, MAIN] : [MAIN],
    numAgents,
    promptHistory: [],
    responseHistory: [],
    item,
    turn: 0,
  });

describe('expert_edits', () => {
  it('retries after a malformed reply, then uses the LAST JSON object of the next one', async () => {
    received.length = 0;
    queue.push(
      { status: 200, content: 'Sorry, I am thinking {not json' },
      {
        status: 200,
        content: 'Draft: {"aux": "old", "main": "old"}\nFinal answer:\n{"aux": "return x + 1 instead", "main": "def f(x):\\n    y = aux(x)\\n    return y"}',
      },
    );
    const [aux, main] = await call();
    assert.equal(received.length, 2);
    assert.equal(aux, `${auxPrompt(item)}\n\nHere is the feedback from an expert:\nreturn x + 1 instead`);
    assert.equal(main, `${mainPrompt(item)}\n\nHere is the feedback from an expert:\ndef f(x):\n    y = aux(x)\n    return y`);
    const request = received[0];
    assert.equal(request.url, '/v1/chat/completions');
    assert.equal(request.auth, 'Bearer sk-test');
    assert.equal(request.body.model, 'stub-coder');
    assert.equal(request.body.messages[0].role, 'user');
    const content = request.body.messages[0].content;
    assert.ok(content.startsWith(`You are an expert reviewing code collaboratively written by two agents for the task: ${item.prompt}`));
    assert.ok(content.endsWith(`Here is the current combined code to consider:\n${AUX}\n\n${MAIN}\n`));
  });

  it('"Perfect! No changes needed!" is passed on as the feedback for that agent', async () => {
    queue.push({ status: 200, content: '{"aux": "Perfect! No changes needed!", "main": ""}' });
    const [aux, main] = await call();
    assert.equal(aux, `${auxPrompt(item)}\n\nHere is the feedback from an expert:\nPerfect! No changes needed!`);
    assert.equal(main, mainPrompt(item));
  });

  it('after 3 failed attempts: no edits, first-turn prompts, and a warning', async () => {
    received.length = 0;
    queue.push({ status: 500, content: 'overloaded' }, { status: 429, content: 'slow down' }, { status: 200, content: 'no json here' });
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on('warning', onWarning);
    const prompts = await call();
    await new Promise((r) => setImmediate(r));
    process.off('warning', onWarning);
    assert.equal(received.length, 3);
    assert.deepEqual(prompts, [auxPrompt(item), mainPrompt(item)]);
    assert.match(warnings.join('\n'), /expert_edits: no usable reply after 3 attempts/);
  });

  it('single-agent mode gets the single-agent prompt plus the main edits', async () => {
    queue.push({ status: 200, content: '{"aux": "", "main": "use x + 1"}' });
    assert.deepEqual(await call(1), [`${singleAgentPrompt(item)}\n\nHere is the feedback from an expert:\nuse x + 1`]);
  });
});

describe('expert settings', () => {
  it('come from MAGRPO_EXPERT_* when not given, options winning', () => {
    const env = { MAGRPO_EXPERT_URL: 'http://h/v1/', MAGRPO_EXPERT_MODEL: 'm', MAGRPO_EXPERT_API_KEY: 'k' };
    assert.deepEqual(resolveExpert({}, env), { baseUrl: 'http://h/v1', model: 'm', apiKey: 'k', maxRetries: 3, timeoutMs: 120000 });
    assert.equal(resolveExpert({ model: 'other' }, env).model, 'other');
    assert.equal(resolveExpert({ baseUrl: 'http://x', model: 'm' }, {}).apiKey, null);
  });

  it('a missing URL or model is an error at construction, naming both ways to set it', () => {
    assert.throws(
      () => resolveExpert({}, {}),
      (e: unknown) => e instanceof ExpertConfigError && e.code === 'EXPERT_NOT_CONFIGURED' && /MAGRPO_EXPERT_URL \/ MAGRPO_EXPERT_MODEL/.test(e.message),
    );
    assert.throws(() => codingTransition(sandbox, 2, { mode: 'expert_edits', expert: { baseUrl: 'http://x' } }), /needs model/);
  });

  it('lastJsonObject takes the last parsable object, one level of nesting allowed', () => {
    assert.deepEqual(lastJsonObject('a {"x": 1} b {"y": {"z": 2}} c {bad}'), { y: { z: 2 } });
    assert.equal(lastJsonObject('nothing'), null);
  });
});
