/**
 * `magrpo serve`'s HTTP server: an OpenAI-compatible subset in vLLM's dialect over BatchEngine.
 *
 *   GET  /health                     200, empty body (no key needed)          routes/health.ts
 *   GET  /v1/models                  the base model and every loaded adapter   routes/models.ts
 *   GET  /v1/models/{id}             one of them (404 for an unknown name)     routes/models.ts
 *   POST /v1/completions             text or token-id prompts, n, logprobs     routes/completions.ts
 *   POST /v1/chat/completions        the tokenizer's chat template, stream     routes/chat.ts
 *   POST /v1/messages                Anthropic's Messages API, one completion  routes/messages.ts
 *   POST /v1/responses               OpenAI's Responses API, one completion    routes/responses.ts
 *   POST /v1/load_lora_adapter       {lora_name, lora_path}: a PEFT folder     routes/adapters.ts
 *   POST /v1/unload_lora_adapter     {lora_name}                               routes/adapters.ts
 *   POST /tokenize, /detokenize      vLLM's bodies                             routes/tokenize.ts
 *   GET  /stats                      magrpo's own: engine counters             routes/health.ts
 *
 * This file only wires them: access (auth.ts), the route table, bounded JSON bodies and errors
 * (http.ts), listen and close. Request bodies are checked in validate.ts. Node's http module is
 * enough: a few routes, JSON bodies and server-sent events. Every error is OpenAI's shape,
 * {error: {message, type, param, code}}, with the matching status (on /v1/messages too: clients
 * of Anthropic's API go by the status).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Rng } from '../engine/rng.js';
import type { LanguageModel } from '../model/pretrained.js';
import { checkAccess } from './auth.js';
import type { Route, ServeContext } from './context.js';
import { BatchEngine } from './engine.js';
import { asHttpError, errorBody, HttpError, readJson, sendJson } from './http.js';
import { loadLoraAdapter, unloadLoraAdapter } from './routes/adapters.js';
import { chat } from './routes/chat.js';
import { completions } from './routes/completions.js';
import { health, stats } from './routes/health.js';
import { messages } from './routes/messages.js';
import { listModels, MODEL_PATH, modelIdOf, retrieveModel } from './routes/models.js';
import { responses } from './routes/responses.js';
import { detokenize, tokenize } from './routes/tokenize.js';

export { HttpError } from './http.js';

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

/** Method → route, by path. */
const ROUTES: Record<string, Record<string, Route>> = {
  '/health': { GET: health },
  '/stats': { GET: stats },
  '/v1/models': { GET: listModels },
  '/v1/completions': { POST: completions },
  '/v1/chat/completions': { POST: chat },
  '/v1/messages': { POST: messages },
  '/v1/responses': { POST: responses },
  '/v1/load_lora_adapter': { POST: loadLoraAdapter },
  '/v1/unload_lora_adapter': { POST: unloadLoraAdapter },
  '/tokenize': { POST: tokenize },
  '/detokenize': { POST: detokenize },
};

/** Paths that answer without the API key. */
const OPEN_PATHS = new Set(['/health']);

/** The route for `method path`: null for an unknown path, 405 for a known path and another method. */
function route(method: string, path: string): Route | null {
  // The model id is decoded first: a bad encoding is a 400 whatever the method.
  const id = path.startsWith(MODEL_PATH) ? modelIdOf(path) : null;
  const entry: Record<string, Route> | undefined = id === null ? ROUTES[path] : { GET: (ctx, res) => retrieveModel(ctx, res, id) };
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

export async function startServer(opts: ServeOptions): Promise<ModelServer> {
  const { lm } = opts;
  const context = lm.model.maxPositions;
  const engine = new BatchEngine(lm, opts.modelName, { maxBatch: opts.maxBatch });
  for (const a of opts.adapters ?? []) engine.loadAdapter(a.name, a.path);
  const ctx: ServeContext = {
    lm,
    engine,
    modelName: opts.modelName,
    context,
    maxTokens: Math.min(opts.maxTokens ?? context, context),
    maxQueue: opts.maxQueue ?? 1024,
    seeds: new Rng(opts.seed ?? randomBytes(4).readUInt32LE(0)),
    created: Math.floor(Date.now() / 1000),
  };
  const maxBody = opts.maxBodyBytes ?? 4 * 1024 * 1024;
  const access = { host: opts.host, key: opts.apiKey === null ? null : Buffer.from(opts.apiKey) };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    const method = req.method ?? 'GET';
    checkAccess(req, access, !OPEN_PATHS.has(path));
    const handler = route(method, path);
    if (!handler) throw new HttpError(404, `no route ${method} ${path}`, 'invalid_request_error', null, 'not_found');
    const body = method === 'POST' ? await readJson(req, maxBody) : undefined;
    await handler(ctx, res, body);
  }

  const server = createServer({ maxHeaderSize: 16 * 1024 }, (req, res) => {
    handle(req, res).catch((e) => {
      const err = asHttpError(e);
      if (!res.headersSent) sendJson(res, err.status, errorBody(err));
      else if (!res.writableEnded) res.end();
    });
  });
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
