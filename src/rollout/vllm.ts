/**
 * Parsing of OpenAI-compatible response bodies, vLLM dialect included. Two log-prob layouts exist:
 *
 * - /v1/completions (legacy OpenAI): `logprobs: {tokens, token_logprobs, top_logprobs, text_offset}`;
 *   with vLLM's `return_tokens_as_token_ids: true` every token string is `token_id:<id>`.
 * - /v1/chat/completions (and llama.cpp's completions): `logprobs: {content: [{token, logprob,
 *   bytes, top_logprobs, id?}]}`; vLLM again writes `token_id:<id>`, llama.cpp may add `id`.
 *
 * vLLM ≥ 0.10 can also return `choices[].token_ids` (`return_token_ids: true`), used when present.
 * Pure functions: no I/O, every problem is a `ResponseShapeError` naming the server and the field.
 */

/** A body that is not the shape we asked for. */
export class ResponseShapeError extends Error {
  override readonly name = 'ResponseShapeError';
}

/** One parsed choice. */
export interface ParsedChoice {
  /** The choice's `index` (which of the `n` completions). */
  index: number;
  /** Text as the server wrote it (special tokens and stop strings as the server chose). */
  text: string;
  /** Token ids, when the server returned them (vLLM dialect); null: only token strings. */
  tokenIds: number[] | null;
  /** The server's token strings (one per generated token), when log-probs were returned. */
  tokens: string[] | null;
  /** log-prob per generated token; null entries where the server gave none; null when absent. */
  logprobs: (number | null)[] | null;
  finishReason: string | null;
  /** vLLM: the stop string or token id that ended the completion (null: EOS or length). */
  stopReason: string | number | null;
}

const TOKEN_ID = /^token_id:(\d+)$/;

/** `token_id:123` → 123 (vLLM's `return_tokens_as_token_ids`); anything else → null. */
export function parseTokenId(token: string): number | null {
  const m = TOKEN_ID.exec(token);
  return m ? Number(m[1]) : null;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Token ids from token strings if every one is `token_id:N`, else null. */
function idsFromTokens(tokens: string[]): number[] | null {
  const ids: number[] = [];
  for (const t of tokens) {
    const id = parseTokenId(t);
    if (id === null) return null;
    ids.push(id);
  }
  return ids;
}

function numberOrNull(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/** The log-prob block of one choice in either layout. */
function parseLogprobs(lp: unknown, where: string): { tokens: string[]; logprobs: (number | null)[]; ids: number[] | null } | null {
  if (lp === null || lp === undefined) return null;
  if (!isObject(lp)) throw new ResponseShapeError(`${where}.logprobs is ${typeof lp}, expected an object`);
  if (Array.isArray(lp.tokens)) {
    const tokens = lp.tokens as unknown[];
    const values = Array.isArray(lp.token_logprobs) ? (lp.token_logprobs as unknown[]) : null;
    if (values === null || values.length !== tokens.length)
      throw new ResponseShapeError(`${where}.logprobs.token_logprobs must be an array as long as .tokens (${tokens.length})`);
    if (tokens.some((t) => typeof t !== 'string')) throw new ResponseShapeError(`${where}.logprobs.tokens must hold strings`);
    return { tokens: tokens as string[], logprobs: values.map(numberOrNull), ids: idsFromTokens(tokens as string[]) };
  }
  if (Array.isArray(lp.content)) {
    const entries = lp.content as unknown[];
    const tokens: string[] = [];
    const logprobs: (number | null)[] = [];
    const explicitIds: number[] = [];
    for (const [k, e] of entries.entries()) {
      if (!isObject(e) || typeof e.token !== 'string') throw new ResponseShapeError(`${where}.logprobs.content[${k}] needs a string "token"`);
      tokens.push(e.token);
      logprobs.push(numberOrNull(e.logprob));
      if (typeof e.id === 'number' && Number.isInteger(e.id)) explicitIds.push(e.id);
    }
    const ids = explicitIds.length === tokens.length ? explicitIds : idsFromTokens(tokens);
    return { tokens, logprobs, ids };
  }
  throw new ResponseShapeError(`${where}.logprobs has neither "tokens" (completions layout) nor "content" (chat layout)`);
}

function parseChoices(body: unknown, server: string, textOf: (c: Record<string, unknown>) => unknown): ParsedChoice[] {
  if (!isObject(body)) throw new ResponseShapeError(`${server} answered ${Array.isArray(body) ? 'an array' : typeof body}, not a JSON object`);
  if (!Array.isArray(body.choices)) throw new ResponseShapeError(`${server} answered without a "choices" array (is it an OpenAI-compatible server?)`);
  return (body.choices as unknown[]).map((c, k) => {
    const where = `${server}: choices[${k}]`;
    if (!isObject(c)) throw new ResponseShapeError(`${where} is not an object`);
    const text = textOf(c);
    if (typeof text !== 'string') throw new ResponseShapeError(`${where} has no text`);
    const lp = parseLogprobs(c.logprobs, where);
    let tokenIds = lp?.ids ?? null;
    if (Array.isArray(c.token_ids) && c.token_ids.every((x) => Number.isInteger(x))) tokenIds = c.token_ids as number[];
    const stop = c.stop_reason;
    return {
      index: typeof c.index === 'number' ? c.index : k,
      text,
      tokenIds,
      tokens: lp?.tokens ?? null,
      logprobs: lp?.logprobs ?? null,
      finishReason: typeof c.finish_reason === 'string' ? c.finish_reason : null,
      stopReason: typeof stop === 'string' || typeof stop === 'number' ? stop : null,
    };
  });
}

/** Choices of a /v1/completions body, sorted by `index`. */
export function parseCompletionResponse(body: unknown, server: string): ParsedChoice[] {
  return parseChoices(body, server, (c) => c.text).sort((a, b) => a.index - b.index);
}

/** Choices of a /v1/chat/completions body (`message.content`), sorted by `index`. */
export function parseChatCompletionResponse(body: unknown, server: string): ParsedChoice[] {
  return parseChoices(body, server, (c) => (isObject(c.message) ? (c.message.content ?? '') : undefined)).sort((a, b) => a.index - b.index);
}

/**
 * The message of an error body: OpenAI's `{error: {message}}`, vLLM's older `{object: "error",
 * message}`, FastAPI's `{detail}`, or the text itself (shortened).
 */
export function errorMessage(text: string): string {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return text.trim().slice(0, 300);
  }
  if (isObject(body)) {
    if (isObject(body.error) && typeof body.error.message === 'string') return body.error.message;
    if (typeof body.error === 'string') return body.error;
    if (typeof body.message === 'string') return body.message;
    if (typeof body.detail === 'string') return body.detail;
  }
  return text.trim().slice(0, 300);
}
