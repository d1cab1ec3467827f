/**
 * A test double for an OpenAI-compatible inference server: a real HTTP server on 127.0.0.1 whose
 * answers a test scripts per request, and which records every request it got.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SeenRequest {
  path: string;
  body: Record<string, unknown>;
  headers: IncomingMessage['headers'];
}

export interface Reply {
  status?: number;
  /** JSON-encoded unless it is a string. */
  body?: unknown;
  /** Wait this long before answering. */
  delayMs?: number;
  /** Close the connection without an answer. */
  hangUp?: boolean;
}

export class FakeServer {
  readonly seen: SeenRequest[] = [];
  /** Requests in flight now, and the most at once. */
  inflight = 0;
  maxInflight = 0;
  private server: Server | null = null;
  url = '';

  constructor(public handler: (req: SeenRequest, k: number) => Reply | Promise<Reply>) {}

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', async () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const seen: SeenRequest = { path: req.url ?? '', body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, headers: req.headers };
        this.seen.push(seen);
        this.inflight++;
        this.maxInflight = Math.max(this.maxInflight, this.inflight);
        try {
          const r = await this.handler(seen, this.seen.length - 1);
          if (r.delayMs) await new Promise((resolve) => setTimeout(resolve, r.delayMs));
          if (r.hangUp) {
            req.socket.destroy();
            return;
          }
          const body = typeof r.body === 'string' ? r.body : JSON.stringify(r.body ?? {});
          res.writeHead(r.status ?? 200, { 'content-type': typeof r.body === 'string' ? 'text/plain' : 'application/json' });
          res.end(body);
        } finally {
          this.inflight--;
        }
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    const s = this.server;
    if (!s) return;
    this.server = null;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}

/** A free port with nothing listening (for connection-refused tests). */
export async function deadUrl(): Promise<string> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

/**
 * A /v1/completions body as vLLM writes it with `logprobs` and `return_tokens_as_token_ids`
 * (vllm/entrypoints/openai/serving_completion.py: CompletionResponse, CompletionLogProbs built by
 * _create_completion_logprobs: tokens are "token_id:<id>", token_logprobs clamped at -9999.0,
 * top_logprobs keyed the same way, text_offset by token string length).
 */
export function vllmCompletion(
  model: string,
  choices: { ids: number[]; logprobs: number[]; text: string; finish?: string; stopReason?: string | number | null }[],
) {
  return {
    id: 'cmpl-8d4f0b3a2c1e4f5a9b7c6d5e4f3a2b1c',
    object: 'text_completion',
    created: 1732528800,
    model,
    choices: choices.map((c, index) => {
      const tokens = c.ids.map((id) => `token_id:${id}`);
      const offsets: number[] = [];
      let at = 0;
      for (const t of tokens) {
        offsets.push(at);
        at += t.length;
      }
      return {
        index,
        text: c.text,
        logprobs: {
          text_offset: offsets,
          token_logprobs: c.logprobs.map((x) => Math.max(x, -9999.0)),
          tokens,
          top_logprobs: c.ids.map((id, k) => ({ [`token_id:${id}`]: c.logprobs[k] })),
        },
        finish_reason: c.finish ?? 'length',
        stop_reason: c.stopReason ?? null,
        prompt_logprobs: null,
      };
    }),
    usage: {
      prompt_tokens: 3,
      total_tokens: 3 + choices.reduce((s, c) => s + c.ids.length, 0),
      completion_tokens: choices.reduce((s, c) => s + c.ids.length, 0),
    },
  };
}
