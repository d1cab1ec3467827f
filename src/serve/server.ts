/**
 * `magrpo serve`'s HTTP server: an OpenAI-compatible subset in vLLM's dialect over BatchEngine.
 *
 *   GET  /health                     200, empty body (no key needed)
 *   GET  /v1/models                  the base model and every loaded adapter
 *   GET  /v1/models/{id}             one of them (404 for an unknown name)
 *   POST /v1/completions             text or token-id prompts, n, logprobs, seeds, stream
 *   POST /v1/chat/completions        the tokenizer's chat template (or plainChatPrompt), stream
 *   POST /v1/load_lora_adapter       {lora_name, lora_path}: a PEFT folder, served as `lora_name`
 *   POST /v1/unload_lora_adapter     {lora_name}
 *   POST /tokenize, /detokenize      vLLM's bodies
 *   GET  /stats                      magrpo's own: engine counters (batching evidence)
 *
 * Node's http module is enough: a few routes, JSON bodies and server-sent events. Every error is
 * OpenAI's shape, {error: {message, type, param, code}}, with the matching status. Bodies, queue
 * length and max_tokens are bounded; with an API key every route but /health wants
 * `Authorization: Bearer <key>`. On a loopback address the Host header must be loopback too, so
 * a web page cannot reach the server through DNS rebinding.
 */
import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { z } from 'zod';
import { Rng } from '../engine/rng.js';
import { CheckpointError } from '../model/errors.js';
import type { LanguageModel } from '../model/pretrained.js';
import { BatchEngine, EngineClosedError, type SamplingSpec, UnknownModelError } from './engine.js';
import { type Choice, type ChoiceFormat, chatChoice, chatDelta, completionChoice, completionDelta, newChoice, recordToken } from './format.js';
import {
  ChatRequest,
  CompletionRequest,
  DetokenizeRequest,
  describeIssues,
  LoadLoraRequest,
  messageText,
  plainChatPrompt,
  TokenizeRequest,
  UnloadLoraRequest,
} from './protocol.js';

export interface ServeOptions {
  lm: LanguageModel;
  /** Name the base model is served under (requests' `model`). */
  modelName: string;
  host: string;
  /** 0 = any free port. */
  port: number;
  /** Required bearer token, or null for none. */
  apiKey: string | null;
  /** Most completion rows decoded together. */
  maxBatch: number;
  /** Largest max_tokens a request may ask for (default: the model's context). */
  maxTokens?: number;
  /** Largest request body (default 4 MiB). */
  maxBodyBytes?: number;
  /** Most prompts waiting for a batch before new requests get 503 (default 1024). */
  maxQueue?: number;
  /** Seeds requests that give none (default: random). */
  seed?: number;
  /** Adapters to load at start, as with /v1/load_lora_adapter. */
  adapters?: { name: string; path: string }[];
}

export interface ModelServer {
  url: string;
  port: number;
  engine: BatchEngine;
  /** Stops accepting, ends running requests (503 / a stream error), closes connections. */
  close(): Promise<void>;
}

/** An error answered as OpenAI's {error: {message, type, param, code}}. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type = 'invalid_request_error',
    readonly param: string | null = null,
    readonly code: string | number | null = null,
  ) {
    super(message);
  }
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);
const isLoopback = (host: string) => LOOPBACK_HOSTS.has(host) || host.startsWith('127.');

export async function startServer(opts: ServeOptions): Promise<ModelServer> {
  const { lm } = opts;
  const context = lm.model.maxPositions;
  const maxTokensCap = Math.min(opts.maxTokens ?? context, context);
  const maxBody = opts.maxBodyBytes ?? 4 * 1024 * 1024;
  const maxQueue = opts.maxQueue ?? 1024;
  const engine = new BatchEngine(lm, opts.modelName, { maxBatch: opts.maxBatch });
  for (const a of opts.adapters ?? []) engine.loadAdapter(a.name, a.path);
  const seeds = new Rng(opts.seed ?? randomBytes(4).readUInt32LE(0));
  const created = Math.floor(Date.now() / 1000);
  const key = opts.apiKey === null ? null : Buffer.from(opts.apiKey);
  const loopback = isLoopback(opts.host);

  const modelOf = (name: string | undefined): string => {
    const m = name ?? opts.modelName;
    if (!engine.hasModel(m)) throw new HttpError(404, `The model \`${m}\` does not exist.`, 'NotFoundError', 'model', 'model_not_found');
    return m;
  };

  const encodePrompt = (text: string, special = true): number[] => lm.tokenizer.encode(text, { addSpecialTokens: special });

  const checkIds = (ids: readonly number[], field: string): void => {
    const V = lm.tokenizer.vocabSize;
    const bad = ids.find((t) => t >= V);
    if (bad !== undefined) throw new HttpError(400, `${field}: token id ${bad} is outside the vocabulary [0, ${V})`, 'invalid_request_error', field);
  };

  /** max_tokens after defaults and bounds; the prompt plus it must fit the context. */
  const budget = (promptLen: number, asked: number | null | undefined, param: string): number => {
    if (promptLen === 0) throw new HttpError(400, 'the prompt is empty: sampling needs at least one token', 'invalid_request_error', 'prompt');
    const n = asked ?? Math.min(maxTokensCap, context - promptLen);
    if (n > maxTokensCap) throw new HttpError(400, `${param} is ${n}; this server allows at most ${maxTokensCap}`, 'invalid_request_error', param);
    if (promptLen + n > context || n < 1)
      throw new HttpError(
        400,
        `This model's maximum context length is ${context} tokens. However, you requested ${promptLen + n} tokens (${promptLen} in the messages, ${n} in the completion). Please reduce the length of the messages or completion.`,
        'invalid_request_error',
        param,
      );
    return n;
  };

  function specOf(body: CompletionRequest | ChatRequest, maxTokens: number, topLogprobs: number): SamplingSpec {
    if (body.logit_bias && Object.keys(body.logit_bias).length > 0)
      throw new HttpError(400, 'logit_bias is not supported', 'invalid_request_error', 'logit_bias');
    const stop = body.stop === null || body.stop === undefined ? [] : [body.stop].flat().filter((s) => s.length > 0);
    const stopIds = [...(body.ignore_eos ? [] : lm.stopIds()), ...(body.stop_token_ids ?? [])];
    checkIds(body.stop_token_ids ?? [], 'stop_token_ids');
    return {
      maxTokens,
      temperature: body.temperature,
      topP: body.top_p,
      topK: body.top_k && body.top_k > 0 ? body.top_k : null,
      stopStrings: stop,
      stopTokenIds: stopIds,
      topLogprobs,
      seed: body.seed ?? seeds.nextU32(),
    };
  }

  function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
    const r = schema.safeParse(body);
    if (!r.success) {
      const { message, param } = describeIssues(r.error);
      throw new HttpError(400, message, 'invalid_request_error', param);
    }
    return r.data;
  }

  /** Runs every prompt's group; streams chunks or answers once at the end. */
  async function generate(
    req: IncomingMessage,
    res: ServerResponse,
    kind: 'completion' | 'chat',
    body: CompletionRequest | ChatRequest,
    model: string,
    prompts: number[][],
    spec: SamplingSpec,
    fmt: ChoiceFormat,
  ): Promise<void> {
    if (engine.queued + prompts.length > maxQueue)
      throw new HttpError(503, `the server is busy: ${engine.queued} prompts are waiting; retry later`, 'server_error', null, 'overloaded');
    const id = `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomUUID().replaceAll('-', '')}`;
    const object = kind === 'chat' ? 'chat.completion' : 'text_completion';
    const head = { id, object, created: Math.floor(Date.now() / 1000), model };
    const n = body.n;
    const choices: Choice[] = prompts.flatMap((p) => Array.from({ length: n }, () => newChoice(p)));
    let gone = false;
    res.on('close', () => {
      if (!res.writableFinished) gone = true;
    });
    const send = (obj: unknown) => {
      if (!gone) res.write(`data: ${JSON.stringify(obj)}\n\n`);
    };
    if (body.stream) {
      res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
      if (kind === 'chat')
        send({
          ...head,
          object: 'chat.completion.chunk',
          choices: choices.map((_, i) => ({ index: i, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null })),
        });
    }
    const runs = prompts.map((promptIds, p) =>
      engine.submit({
        model,
        promptIds,
        n,
        spec,
        cancelled: () => gone,
        onToken: (j, ev) => {
          const index = p * n + j;
          const c = choices[index];
          recordToken(c, ev);
          if (!body.stream) return;
          if (kind === 'completion') send({ ...head, choices: [completionDelta(lm, c, index, ev, spec, fmt)] });
          else {
            send({ ...head, object: 'chat.completion.chunk', choices: [chatDelta(lm, c, index, ev, spec, fmt)] });
            if (ev.finish)
              send({
                ...head,
                object: 'chat.completion.chunk',
                choices: [{ index, delta: {}, logprobs: null, finish_reason: c.finishReason, stop_reason: c.stopReason }],
              });
          }
        },
      }),
    );
    try {
      await Promise.all(runs);
    } catch (e) {
      if (!body.stream) throw e;
      const err = asHttpError(e);
      send({ error: errorBody(err).error });
      if (!gone) res.end('data: [DONE]\n\n');
      return;
    }
    const promptTokens = prompts.reduce((s, p) => s + p.length, 0);
    const completionTokens = choices.reduce((s, c) => s + c.tokens.length, 0);
    const usage = { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
    if (body.stream) {
      if (body.stream_options?.include_usage) send({ ...head, object: kind === 'chat' ? 'chat.completion.chunk' : object, choices: [], usage });
      if (!gone) res.end('data: [DONE]\n\n');
      return;
    }
    const out = choices.map((c, i) => (kind === 'chat' ? chatChoice(lm, c, i, spec, fmt) : completionChoice(lm, c, i, spec, fmt)));
    sendJson(res, 200, { ...head, choices: out, usage });
    void req;
  }

  async function completions(req: IncomingMessage, res: ServerResponse, raw: unknown): Promise<void> {
    const body = parse(CompletionRequest, raw);
    const model = modelOf(body.model);
    if (body.best_of !== null && body.best_of !== undefined && body.best_of !== body.n)
      throw new HttpError(400, 'best_of is not supported (leave it out or equal to n)', 'invalid_request_error', 'best_of');
    const p = body.prompt;
    const prompts: number[][] =
      typeof p === 'string'
        ? [encodePrompt(p)]
        : typeof p[0] === 'string'
          ? (p as string[]).map((t) => encodePrompt(t))
          : typeof p[0] === 'number'
            ? [p as number[]]
            : (p as number[][]);
    for (const [i, ids] of prompts.entries()) checkIds(ids, prompts.length > 1 ? `prompt.${i}` : 'prompt');
    // Without max_tokens, each prompt may fill the context: the longest prompt bounds them all.
    const maxTokens = Math.min(...prompts.map((ids) => budget(ids.length, body.max_tokens, 'max_tokens')));
    const spec = specOf(body, maxTokens, body.logprobs ?? 0);
    const fmt: ChoiceFormat = {
      logprobs: body.logprobs !== null && body.logprobs !== undefined,
      tokenIds: body.return_tokens_as_token_ids,
      returnTokenIds: body.return_token_ids,
      skipSpecial: body.skip_special_tokens,
      includeStop: body.include_stop_str_in_output,
    };
    await generate(req, res, 'completion', body, model, prompts, spec, fmt);
  }

  function chatPromptIds(messages: ChatRequest['messages'], addGenerationPrompt: boolean, special?: boolean): number[] {
    const plain = messages.map((m) => ({ role: m.role, content: messageText(m) }));
    try {
      return encodePrompt(lm.tokenizer.applyChatTemplate(plain, { addGenerationPrompt }), special ?? false);
    } catch (e) {
      if (!(e instanceof CheckpointError && e.code === 'NO_CHAT_TEMPLATE'))
        throw new HttpError(400, `chat template: ${(e as Error).message}`, 'invalid_request_error', 'messages');
      return encodePrompt(plainChatPrompt(plain, addGenerationPrompt), special ?? true);
    }
  }

  async function chat(req: IncomingMessage, res: ServerResponse, raw: unknown): Promise<void> {
    const body = parse(ChatRequest, raw);
    const model = modelOf(body.model);
    const ids = chatPromptIds(body.messages, body.add_generation_prompt);
    const maxTokens = budget(ids.length, body.max_completion_tokens ?? body.max_tokens, body.max_completion_tokens ? 'max_completion_tokens' : 'max_tokens');
    const spec = specOf(body, maxTokens, body.logprobs ? (body.top_logprobs ?? 0) : 0);
    const fmt: ChoiceFormat = {
      logprobs: body.logprobs,
      tokenIds: body.return_tokens_as_token_ids,
      returnTokenIds: body.return_token_ids,
      skipSpecial: body.skip_special_tokens,
      includeStop: body.include_stop_str_in_output,
    };
    await generate(req, res, 'chat', body, model, [ids], spec, fmt);
  }

  const modelCard = (m: string) => ({
    id: m,
    object: 'model',
    created,
    owned_by: 'magrpo',
    root: m === opts.modelName ? lm.source || m : m,
    parent: m === opts.modelName ? null : opts.modelName,
    max_model_len: context,
  });

  function route(method: string, path: string): ((req: IncomingMessage, res: ServerResponse, body: unknown) => Promise<void> | void) | null {
    // GET /v1/models/{id} (OpenAI's "retrieve model"; clients percent-encode a name with slashes).
    if (path.startsWith('/v1/models/')) {
      let name: string;
      try {
        name = decodeURIComponent(path.slice('/v1/models/'.length));
      } catch {
        throw new HttpError(400, `${path}: not a valid percent-encoded model name`, 'invalid_request_error', 'model');
      }
      if (method !== 'GET') throw new HttpError(405, `${method} is not allowed on ${path}; use GET`, 'invalid_request_error', null, 'method_not_allowed');
      return (_q, res) => sendJson(res, 200, modelCard(modelOf(name)));
    }
    const table: Record<string, Record<string, (req: IncomingMessage, res: ServerResponse, body: unknown) => Promise<void> | void>> = {
      '/health': { GET: (_q, res) => void res.writeHead(200).end() },
      '/stats': { GET: (_q, res) => sendJson(res, 200, engine.stats) },
      '/v1/models': { GET: (_q, res) => sendJson(res, 200, { object: 'list', data: engine.models().map(modelCard) }) },
      '/v1/completions': { POST: completions },
      '/v1/chat/completions': { POST: chat },
      '/v1/load_lora_adapter': {
        POST: (_q, res, raw) => {
          const body = parse(LoadLoraRequest, raw);
          if (engine.hasModel(body.lora_name))
            throw new HttpError(400, `The lora adapter '${body.lora_name}' has already been loaded.`, 'InvalidUserInput', 'lora_name');
          try {
            engine.loadAdapter(body.lora_name, body.lora_path);
          } catch (e) {
            throw new HttpError(400, `lora_path: ${(e as Error).message}`, 'InvalidUserInput', 'lora_path');
          }
          sendText(res, 200, `Success: LoRA adapter '${body.lora_name}' added successfully.`);
        },
      },
      '/v1/unload_lora_adapter': {
        POST: (_q, res, raw) => {
          const body = parse(UnloadLoraRequest, raw);
          if (body.lora_name === opts.modelName)
            throw new HttpError(400, `'${body.lora_name}' is the base model, not an adapter`, 'InvalidUserInput', 'lora_name');
          if (!engine.unloadAdapter(body.lora_name))
            throw new HttpError(404, `The lora adapter '${body.lora_name}' cannot be found.`, 'NotFoundError', 'lora_name', 'model_not_found');
          sendText(res, 200, `Success: LoRA adapter '${body.lora_name}' removed successfully.`);
        },
      },
      '/tokenize': {
        POST: (_q, res, raw) => {
          const body = parse(TokenizeRequest, raw);
          modelOf(body.model);
          const tokens =
            'prompt' in body
              ? encodePrompt(body.prompt, body.add_special_tokens)
              : chatPromptIds(body.messages, body.add_generation_prompt, body.add_special_tokens);
          sendJson(res, 200, {
            count: tokens.length,
            max_model_len: context,
            tokens,
            token_strs: body.return_token_strs ? tokens.map((t) => lm.tokenizer.decode([t])) : null,
          });
        },
      },
      '/detokenize': {
        POST: (_q, res, raw) => {
          const body = parse(DetokenizeRequest, raw);
          modelOf(body.model);
          checkIds(body.tokens, 'tokens');
          if (body.tokens.some((t) => t < 0)) throw new HttpError(400, 'tokens: token ids must be ≥ 0', 'invalid_request_error', 'tokens');
          sendJson(res, 200, { prompt: lm.tokenizer.decode(body.tokens) });
        },
      },
    };
    const entry = table[path];
    if (!entry) return null;
    const handler = entry[method];
    if (!handler)
      throw new HttpError(
        405,
        `${method} is not allowed on ${path}; use ${Object.keys(entry).join(' or ')}`,
        'invalid_request_error',
        null,
        'method_not_allowed',
      );
    return handler;
  }

  const server = createServer({ maxHeaderSize: 16 * 1024 }, (req, res) => {
    handle(req, res).catch((e) => {
      const err = asHttpError(e);
      if (!res.headersSent) sendJson(res, err.status, errorBody(err));
      else if (!res.writableEnded) res.end();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const host = (req.headers.host ?? '').replace(/:\d+$/, '');
    if (loopback && !isLoopback(host))
      throw new HttpError(403, `Host "${req.headers.host}" is not a loopback name; this server listens on ${opts.host} only`, 'permission_error');
    const path = (req.url ?? '/').split('?')[0];
    const method = req.method ?? 'GET';
    if (key !== null && path !== '/health') {
      const auth = req.headers.authorization ?? '';
      const given = Buffer.from(auth.startsWith('Bearer ') ? auth.slice(7) : '');
      if (given.length !== key.length || !timingSafeEqual(given, key))
        throw new HttpError(401, 'Incorrect API key provided: pass it as "Authorization: Bearer <key>".', 'invalid_request_error', null, 'invalid_api_key');
    }
    const handler = route(method, path);
    if (!handler) throw new HttpError(404, `no route ${method} ${path}`, 'invalid_request_error', null, 'not_found');
    const body = method === 'POST' ? await readJson(req, maxBody) : undefined;
    await handler(req, res, body);
  }

  // Idle keep-alive connections outlive the client's own idle timeout (undici: 4 s), so a client
  // never sends a request on a socket the server is closing at that moment.
  server.keepAliveTimeout = 75_000;
  server.headersTimeout = 80_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const hostPart = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  return {
    url: `http://${hostPart}:${port}`,
    port,
    engine,
    close: async () => {
      const closed = new Promise<void>((r) => server.close(() => r()));
      await engine.close();
      // Answers to the requests the engine just ended are written on the next turns.
      await new Promise((r) => setTimeout(r, 50));
      server.closeAllConnections();
      await closed;
    },
  };
}

function asHttpError(e: unknown): HttpError {
  if (e instanceof HttpError) return e;
  if (e instanceof UnknownModelError) return new HttpError(404, e.message, 'NotFoundError', 'model', 'model_not_found');
  if (e instanceof EngineClosedError) return new HttpError(503, e.message, 'server_error', null, 'shutting_down');
  return new HttpError(500, `internal error: ${(e as Error).message}`, 'server_error');
}

function errorBody(e: HttpError) {
  return { error: { message: e.message, type: e.type, param: e.param, code: e.code ?? e.status } };
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/** The request body as JSON; more than `limit` bytes is 413 (and the connection is closed). */
async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > limit) {
    req.resume();
    throw new HttpError(413, `request body of ${declared} bytes exceeds the limit of ${limit}`, 'invalid_request_error', null, 'body_too_large');
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      req.resume();
      throw new HttpError(413, `request body exceeds the limit of ${limit} bytes`, 'invalid_request_error', null, 'body_too_large');
    }
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') throw new HttpError(400, 'the request body is empty; send a JSON object', 'invalid_request_error');
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new HttpError(400, `the request body is not valid JSON (${(e as Error).message})`, 'invalid_request_error');
  }
}
