/**
 * Parsing of OpenAI-compatible bodies in vLLM's dialect. The bodies are written from vLLM's
 * documentation and source: /v1/completions with `logprobs` and `return_tokens_as_token_ids`
 * (vllm/entrypoints/openai/serving_completion.py, _create_completion_logprobs: every token string
 * becomes "token_id:<id>", token_logprobs are clamped at -9999.0; `token_ids` per choice with
 * `return_token_ids`), /v1/chat/completions (serving_chat.py, _create_chat_logprobs:
 * logprobs.content[] of {token, logprob, bytes, top_logprobs}), and error bodies (OpenAI's
 * {"error": {...}} and vLLM's older {"object": "error", "message": ...}).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { errorMessage, parseChatCompletionResponse, parseCompletionResponse, parseTokenId, ResponseShapeError } from '../../src/rollout/vllm.js';
import { vllmCompletion } from './fake-server.js';

describe('vLLM dialect', () => {
  it('reads token_id:N token strings as ids', () => {
    assert.equal(parseTokenId('token_id:123'), 123);
    assert.equal(parseTokenId('token_id:0'), 0);
    assert.equal(parseTokenId('Hello'), null);
    assert.equal(parseTokenId('token_id:'), null);
    assert.equal(parseTokenId('token_id:12x'), null);
  });

  it('parses a /v1/completions body with token ids and log-probs, choices in index order', () => {
    const body = vllmCompletion('agent_0-v3', [
      { ids: [791, 4062, 128001], logprobs: [-0.25, -1.5, -0.03125], text: ' quick brown<|end_of_text|>', finish: 'stop' },
      { ids: [264], logprobs: [-12000], text: ' a' },
    ]);
    body.choices.reverse(); // servers may answer choices out of order
    const choices = parseCompletionResponse(body, 'http://s');
    assert.deepEqual(
      choices.map((c) => c.index),
      [0, 1],
    );
    assert.deepEqual(choices[0].tokenIds, [791, 4062, 128001]);
    assert.deepEqual(choices[0].logprobs, [-0.25, -1.5, -0.03125]);
    assert.equal(choices[0].finishReason, 'stop');
    assert.equal(choices[0].stopReason, null);
    assert.equal(choices[0].text, ' quick brown<|end_of_text|>');
    assert.deepEqual(choices[1].logprobs, [-9999], 'vLLM clamps -inf-like values at -9999');
  });

  it('prefers choices[].token_ids (vLLM return_token_ids) when present', () => {
    const body = vllmCompletion('m', [{ ids: [5, 6], logprobs: [-1, -2], text: 'x' }]);
    (body.choices[0] as Record<string, unknown>).token_ids = [5, 6];
    (body.choices[0].logprobs as { tokens: string[] }).tokens = ['x', 'y'];
    assert.deepEqual(parseCompletionResponse(body, 's')[0].tokenIds, [5, 6]);
  });

  it('gives no ids when tokens are text (a server without return_tokens_as_token_ids)', () => {
    const body = {
      id: 'cmpl-1',
      object: 'text_completion',
      model: 'm',
      choices: [
        {
          index: 0,
          text: ' Paris.',
          logprobs: { tokens: [' Paris', '.'], token_logprobs: [-0.5, null], top_logprobs: [null, null], text_offset: [0, 6] },
          finish_reason: 'stop',
        },
      ],
    };
    const [c] = parseCompletionResponse(body, 's');
    assert.equal(c.tokenIds, null);
    assert.deepEqual(c.tokens, [' Paris', '.']);
    assert.deepEqual(c.logprobs, [-0.5, null]);
  });

  it('marks a choice without a logprobs block (a server that ignored the field)', () => {
    const [c] = parseCompletionResponse({ choices: [{ index: 0, text: 'hi', logprobs: null, finish_reason: 'length' }] }, 's');
    assert.equal(c.logprobs, null);
    assert.equal(c.tokenIds, null);
  });

  it('parses a /v1/chat/completions body (logprobs.content) with token_id tokens', () => {
    const body = {
      id: 'chatcmpl-1',
      object: 'chat.completion',
      model: 'agent_1-v0',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: 'Yes.', reasoning_content: null, tool_calls: [] },
          logprobs: {
            content: [
              { token: 'token_id:9642', logprob: -0.01, bytes: [116, 111], top_logprobs: [{ token: 'token_id:9642', logprob: -0.01, bytes: null }] },
              { token: 'token_id:13', logprob: -0.2, bytes: [46], top_logprobs: [] },
            ],
          },
          finish_reason: 'stop',
          stop_reason: null,
        },
      ],
    };
    const [c] = parseChatCompletionResponse(body, 's');
    assert.equal(c.text, 'Yes.');
    assert.deepEqual(c.tokenIds, [9642, 13]);
    assert.deepEqual(c.logprobs, [-0.01, -0.2]);
  });

  it('takes explicit ids from a content layout (llama.cpp adds "id")', () => {
    const body = { choices: [{ index: 0, text: 'ab', logprobs: { content: [{ id: 7, token: 'a', logprob: -1, bytes: [97], top_logprobs: [] }] } }] };
    assert.deepEqual(parseCompletionResponse(body, 's')[0].tokenIds, [7]);
  });

  it('names the server and the field for malformed bodies', () => {
    assert.throws(
      () => parseCompletionResponse({ data: [] }, 'http://x:1/v1/completions'),
      (e: Error) => e instanceof ResponseShapeError && /http:\/\/x:1.*"choices"/.test(e.message),
    );
    assert.throws(
      () => parseCompletionResponse({ choices: [{ text: 'a', logprobs: { tokens: ['a', 'b'], token_logprobs: [-1] } }] }, 'S'),
      /S: choices\[0\]\.logprobs\.token_logprobs must be an array as long as \.tokens \(2\)/,
    );
    assert.throws(() => parseCompletionResponse({ choices: [{ logprobs: null }] }, 'S'), /choices\[0\] has no text/);
  });

  it('extracts messages from error bodies of each flavour', () => {
    assert.equal(
      errorMessage(JSON.stringify({ error: { message: 'The model `agent_0-v9` does not exist.', type: 'NotFoundError', param: null, code: 404 } })),
      'The model `agent_0-v9` does not exist.',
    );
    assert.equal(errorMessage(JSON.stringify({ object: 'error', message: 'bad top_k', type: 'BadRequestError', code: 400 })), 'bad top_k');
    assert.equal(errorMessage(JSON.stringify({ detail: 'Not Found' })), 'Not Found');
    assert.equal(errorMessage('Internal Server Error'), 'Internal Server Error');
  });
});
