/**
 * A pool of OpenAI-compatible inference servers behind one `post`: load balancing (least busy or
 * round robin), a bound on requests in flight, a timeout and a response-size cap per request,
 * retries with exponential backoff on connection errors, timeouts, 408/429 and 5xx, and removal of
 * a server after `maxFailures` failures in a row (logged; the pool goes on while any server is
 * left). Auth failures, unknown routes or models and other 4xx answers are not retried: they are
 * `RolloutError`s whose message says what to fix. HTTP is Node's built-in fetch (undici).
 */
import { errorMessage } from './vllm.js';

/** What went wrong, for callers that react differently (tests, the adapter loader). */
export type RolloutErrorKind = 'auth' | 'not_found' | 'bad_request' | 'bad_response' | 'too_large' | 'unreachable' | 'no_server';

/** A rollout-server failure with a message naming the server and what to check. */
export class RolloutError extends Error {
  override readonly name = 'RolloutError';
  constructor(
    readonly kind: RolloutErrorKind,
    message: string,
    readonly server: string | null = null,
    readonly status: number | null = null,
  ) {
    super(message);
  }
}

export interface PoolOptions {
  /** Base URLs (http://host:port, an optional trailing /v1 is removed). */
  servers: readonly string[];
  /** Sent as `Authorization: Bearer <key>` when not null. */
  apiKey: string | null;
  /** The environment variable the key came from (named in auth errors). */
  apiKeyEnv: string | null;
  /** Per attempt, from sending the request to the last byte of the answer. */
  timeoutMs: number;
  /** Requests in flight over all servers. */
  maxConcurrency: number;
  /** Further attempts after a retryable failure. */
  maxRetries: number;
  /** First backoff; doubles per retry up to maxBackoffMs (±20 % jitter). */
  backoffMs: number;
  maxBackoffMs: number;
  /** Consecutive failures after which a server is taken out of the pool. */
  maxFailures: number;
  /** Answers larger than this are refused. */
  maxResponseBytes: number;
  balance: 'least_busy' | 'round_robin';
  /** Log line sink (default: stderr). */
  log?: (message: string) => void;
  /** How to wait between attempts (default: a timer); tests pass one that records the waits. */
  sleep?: (ms: number) => Promise<void>;
}

interface Server {
  url: string;
  inflight: number;
  failures: number;
  dead: boolean;
  lastError: string;
}

/** A failure worth trying again (possibly on another server). */
class RetryableError extends Error {}

/** http(s)://host[:port][/prefix] without trailing slashes or a trailing /v1; throws on anything else. */
export function normalizeServerUrl(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new RolloutError('unreachable', `rollout.servers: "${url}" is not a URL; give base URLs such as http://127.0.0.1:8000`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new RolloutError('unreachable', `rollout.servers: "${url}" must start with http:// or https://`);
  if (u.search || u.hash) throw new RolloutError('unreachable', `rollout.servers: "${url}" must not have a query or fragment`);
  return `${u.origin}${u.pathname}`.replace(/\/+$/, '').replace(/\/v1$/, '');
}

/** Counts requests in flight; `acquire` waits for a free slot. */
class Semaphore {
  private waiting: (() => void)[] = [];
  private used = 0;
  constructor(private readonly size: number) {}
  async acquire(): Promise<void> {
    if (this.used < this.size) {
      this.used++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.used--;
  }
}

const timerSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class ServerPool {
  private readonly servers: Server[];
  private readonly slots: Semaphore;
  private next = 0;
  private readonly log: (message: string) => void;

  constructor(private readonly opts: PoolOptions) {
    if (opts.servers.length === 0) throw new RolloutError('no_server', 'rollout.servers is empty: give at least one server URL');
    const urls = [...new Set(opts.servers.map(normalizeServerUrl))];
    this.servers = urls.map((url) => ({ url, inflight: 0, failures: 0, dead: false, lastError: '' }));
    this.slots = new Semaphore(Math.max(1, opts.maxConcurrency));
    this.log = opts.log ?? ((m) => process.stderr.write(`[magrpo] ${m}\n`));
  }

  /** Base URLs still in the pool. */
  live(): string[] {
    return this.servers.filter((s) => !s.dead).map((s) => s.url);
  }

  /** Every server with its state (for logs and tests). */
  status(): { url: string; dead: boolean; inflight: number; failures: number; lastError: string }[] {
    return this.servers.map((s) => ({ ...s }));
  }

  /**
   * POSTs `body` as JSON to `path` on one server, retrying elsewhere after retryable failures.
   * Returns the server and the answer's text (2xx only).
   */
  async post(path: string, body: unknown): Promise<{ server: string; text: string }> {
    let last = '';
    let avoid: Server | null = null;
    for (let attempt = 0; attempt <= this.opts.maxRetries; attempt++) {
      const server = this.pick(avoid);
      if (!server) break;
      try {
        const text = await this.attempt(server, path, body);
        server.failures = 0;
        return { server: server.url, text };
      } catch (e) {
        if (!(e instanceof RetryableError)) throw e;
        last = e.message;
        this.fail(server, e.message);
        avoid = server;
        if (attempt < this.opts.maxRetries && this.live().length > 0) await (this.opts.sleep ?? timerSleep)(this.backoff(attempt));
      }
    }
    if (this.live().length === 0) throw this.noServerLeft();
    throw new RolloutError('unreachable', `POST ${path} failed ${this.opts.maxRetries + 1} times (rollout.max_retries); last: ${last}`);
  }

  /**
   * POSTs `body` to `path` on every live server (e.g. loading an adapter), each with its own
   * retries; a server that still fails is taken out. Returns the servers that succeeded; throws
   * when none is left, or on a non-retryable answer (bad request, auth, unknown route).
   */
  async postEach(path: string, body: unknown): Promise<string[]> {
    const targets = this.servers.filter((s) => !s.dead);
    const results = await Promise.allSettled(
      targets.map(async (server) => {
        for (let attempt = 0; ; attempt++) {
          try {
            await this.attempt(server, path, body);
            server.failures = 0;
            return server.url;
          } catch (e) {
            if (!(e instanceof RetryableError)) throw e;
            if (attempt >= this.opts.maxRetries) {
              this.remove(server, e.message);
              return null;
            }
            this.fail(server, e.message);
            if (server.dead) return null;
            await (this.opts.sleep ?? timerSleep)(this.backoff(attempt));
          }
        }
      }),
    );
    const fatal = results.find((r) => r.status === 'rejected');
    if (fatal) throw (fatal as PromiseRejectedResult).reason;
    const ok = results.flatMap((r) => (r.status === 'fulfilled' && r.value !== null ? [r.value] : []));
    if (this.live().length === 0) throw this.noServerLeft();
    return ok;
  }

  private backoff(attempt: number): number {
    const base = Math.min(this.opts.maxBackoffMs, this.opts.backoffMs * 2 ** attempt);
    return base * (0.8 + 0.4 * Math.random());
  }

  /** Least busy live server (ties: round robin), or the next in turn; avoids `avoid` if another is live. */
  private pick(avoid: Server | null): Server | null {
    let live = this.servers.filter((s) => !s.dead);
    if (live.length > 1 && avoid) live = live.filter((s) => s !== avoid);
    if (live.length === 0) return null;
    const start = this.next++ % live.length;
    const order = [...live.slice(start), ...live.slice(0, start)];
    if (this.opts.balance === 'round_robin') return order[0];
    return order.reduce((best, s) => (s.inflight < best.inflight ? s : best), order[0]);
  }

  private fail(server: Server, message: string): void {
    server.failures++;
    server.lastError = message;
    if (server.failures >= this.opts.maxFailures) this.remove(server, message);
  }

  private remove(server: Server, message: string): void {
    if (server.dead) return;
    server.dead = true;
    server.lastError = message;
    const left = this.live();
    this.log(
      `rollout server ${server.url} taken out after ${server.failures} failure(s) in a row (${message}); ${left.length ? `${left.length} left: ${left.join(', ')}` : 'none left'}`,
    );
  }

  private noServerLeft(): RolloutError {
    return new RolloutError(
      'no_server',
      `no rollout server left (rollout.servers): ${this.servers.map((s) => `${s.url}: ${s.lastError || 'removed'}`).join('; ')}`,
    );
  }

  /** One HTTP exchange; throws RetryableError or RolloutError. */
  private async attempt(server: Server, path: string, body: unknown): Promise<string> {
    await this.slots.acquire();
    server.inflight++;
    const url = `${server.url}${path}`;
    try {
      const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
      if (this.opts.apiKey !== null) headers.authorization = `Bearer ${this.opts.apiKey}`;
      const signal = AbortSignal.timeout(this.opts.timeoutMs);
      let res: Response;
      try {
        res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body), signal });
      } catch (e) {
        throw new RetryableError(`${url}: ${networkError(e, this.opts.timeoutMs)}`);
      }
      let text: string;
      try {
        text = await readLimited(res, this.opts.maxResponseBytes);
      } catch (e) {
        if (e instanceof RolloutError) throw new RolloutError(e.kind, `${url}: ${e.message}`, server.url, res.status);
        throw new RetryableError(`${url}: ${networkError(e, this.opts.timeoutMs)} while reading the answer`);
      }
      if (res.ok) return text;
      const message = errorMessage(text) || '(empty body)';
      if (res.status >= 500 || res.status === 429 || res.status === 408) throw new RetryableError(`${url} answered ${res.status}: ${message}`);
      throw this.clientError(server.url, path, res.status, message, body);
    } finally {
      server.inflight--;
      this.slots.release();
    }
  }

  private clientError(server: string, path: string, status: number, message: string, body: unknown): RolloutError {
    const url = `${server}${path}`;
    if (status === 401 || status === 403) {
      const fix =
        this.opts.apiKeyEnv === null
          ? 'the server wants an API key: put it in an environment variable and set rollout.api_key_env to its name'
          : this.opts.apiKey === null
            ? `the environment variable ${this.opts.apiKeyEnv} (rollout.api_key_env) is not set`
            : `check the key in the environment variable ${this.opts.apiKeyEnv} (rollout.api_key_env)`;
      return new RolloutError('auth', `${url} refused the request (${status} ${message}): ${fix}`, server, status);
    }
    if (status === 404) {
      const model = typeof body === 'object' && body !== null ? (body as { model?: unknown }).model : undefined;
      if (path.endsWith('_lora_adapter'))
        return new RolloutError(
          'not_found',
          `${url}: 404 (${message}): the server does not load adapters at runtime; start vLLM with --enable-lora and the environment variable VLLM_ALLOW_RUNTIME_LORA_UPDATING=True. A server that cannot load adapters at all (llama.cpp's) works only with rollout.weight_sync: none, where it keeps sampling from the model it was started with (off-policy, corrected by TIS; docs/scale.md)`,
          server,
          status,
        );
      if (typeof model === 'string' && /model|adapter|lora/i.test(message))
        return new RolloutError(
          'not_found',
          `${url}: model "${model}" not found (404 ${message}); magrpo names each agent's adapter agent_<i>-v<step> and loads it before sampling: was it unloaded by someone else, or is --max-loras too small?`,
          server,
          status,
        );
      return new RolloutError(
        'not_found',
        `${url} does not exist (404 ${message}): rollout.servers entries are base URLs of OpenAI-compatible servers, such as http://127.0.0.1:8000 (without /v1)`,
        server,
        status,
      );
    }
    return new RolloutError('bad_request', `${url} rejected the request (${status}): ${message}`, server, status);
  }
}

/** A fetch failure as a short, specific reason. */
function networkError(e: unknown, timeoutMs: number): string {
  const err = e as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err.name === 'TimeoutError' || err.name === 'AbortError') return `no answer within ${timeoutMs / 1000} s (rollout.timeout_s)`;
  const code = err.cause?.code;
  if (code === 'ECONNREFUSED') return 'connection refused (is the server running, and is the port right?)';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found (check the host name in rollout.servers)';
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return 'connection reset by the server';
  return `${err.message ?? String(e)}${err.cause?.message ? ` (${err.cause.message})` : ''}`;
}

/** The body as text, refusing more than `limit` bytes. */
async function readLimited(res: Response, limit: number): Promise<string> {
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > limit) {
    await res.body?.cancel();
    throw new RolloutError('too_large', `the answer is ${declared} bytes, more than rollout.max_response_mb allows (${limit} bytes)`);
  }
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      throw new RolloutError('too_large', `the answer exceeds ${limit} bytes (rollout.max_response_mb)`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}
