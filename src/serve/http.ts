/**
 * The HTTP plumbing every route shares: OpenAI's error shape, JSON and text answers, server-sent
 * events, and bounded JSON request bodies.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { EngineClosedError, UnknownModelError } from './engine.js';

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

/** Any thrown value as the HttpError it is answered with: engine errors map to 404 / 503, the rest is a 500 (a bug). */
export function asHttpError(e: unknown): HttpError {
  if (e instanceof HttpError) return e;
  if (e instanceof UnknownModelError) return new HttpError(404, e.message, 'NotFoundError', 'model', 'model_not_found');
  if (e instanceof EngineClosedError) return new HttpError(503, e.message, 'server_error', null, 'shutting_down');
  return new HttpError(500, `internal error: ${(e as Error).message}`, 'server_error');
}

export function errorBody(e: HttpError) {
  return { error: { message: e.message, type: e.type, param: e.param, code: e.code ?? e.status } };
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

export function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/** True once the client has closed the connection before the answer was complete. */
export function watchHangup(res: ServerResponse): () => boolean {
  let gone = false;
  res.on('close', () => {
    if (!res.writableFinished) gone = true;
  });
  return () => gone;
}

export interface EventStream {
  /** One `data: {json}\n\n` event. */
  send(event: unknown): void;
  /** `data: [DONE]\n\n`, and the end of the answer. */
  end(): void;
}

/** Starts a server-sent event stream on `res`; nothing is written once `gone()` (the client hung up). */
export function eventStream(res: ServerResponse, gone: () => boolean): EventStream {
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
  return {
    send: (event) => {
      if (!gone()) res.write(`data: ${JSON.stringify(event)}\n\n`);
    },
    end: () => {
      if (!gone()) res.end('data: [DONE]\n\n');
    },
  };
}

/** The request body as JSON; more than `limit` bytes is 413 (and the connection is closed). */
export async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
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
