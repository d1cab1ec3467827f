/**
 * The `expert_edits` reviewer: any OpenAI-compatible chat endpoint (`POST {baseUrl}/chat/completions`
 * with `model` and `messages`) is asked for edits to both agents' code and must answer with a JSON
 * object {"aux": ..., "main": ...}; the LAST such object in the reply is used, as the reference's
 * external/expert_edits.py does. Up to `maxRetries` attempts (a network error, an HTTP error or a
 * reply without a parsable object each use one); after the last, no edits (the reference's fallback)
 * and a process warning.
 *
 * Settings come from the options, else MAGRPO_EXPERT_URL / MAGRPO_EXPERT_MODEL /
 * MAGRPO_EXPERT_API_KEY. Sampling follows the reference's OpenAI-compatible experts: max_tokens
 * 2048, temperature 0.3.
 */
import { combineProgram, promptImports } from './code-utils.js';
import { expertPrompt } from './prompts.js';

export interface ExpertOptions {
  /** Endpoint root, e.g. https://api.deepseek.com or http://127.0.0.1:8000/v1 (env MAGRPO_EXPERT_URL). */
  baseUrl?: string;
  /** Model name sent in the request (env MAGRPO_EXPERT_MODEL). */
  model?: string;
  /** Bearer token; omitted from the request when absent (env MAGRPO_EXPERT_API_KEY). */
  apiKey?: string;
  /** Attempts per transition call. Default 3. */
  maxRetries?: number;
  /** Per-request timeout in ms. Default 120000. */
  timeoutMs?: number;
}

export interface ResolvedExpert {
  baseUrl: string;
  model: string;
  apiKey: string | null;
  maxRetries: number;
  timeoutMs: number;
}

export class ExpertConfigError extends Error {
  override readonly name = 'ExpertConfigError';
  readonly code = 'EXPERT_NOT_CONFIGURED';

  constructor(readonly missing: string[]) {
    super(
      `expert_edits needs ${missing.join(' and ')}: set feedback.expert.${missing.join(' / feedback.expert.')} or the environment variables ${missing
        .map((m) => (m === 'baseUrl' ? 'MAGRPO_EXPERT_URL' : 'MAGRPO_EXPERT_MODEL'))
        .join(' / ')}`,
    );
  }
}

/** Fills settings from the environment; throws ExpertConfigError naming what is missing. */
export function resolveExpert(opts: ExpertOptions = {}, env: NodeJS.ProcessEnv = process.env): ResolvedExpert {
  const baseUrl = opts.baseUrl ?? env.MAGRPO_EXPERT_URL ?? '';
  const model = opts.model ?? env.MAGRPO_EXPERT_MODEL ?? '';
  const missing = [...(baseUrl ? [] : ['baseUrl']), ...(model ? [] : ['model'])];
  if (missing.length > 0) throw new ExpertConfigError(missing);
  return {
    baseUrl: baseUrl.replace(/\/+$/, ''),
    model,
    apiKey: opts.apiKey ?? env.MAGRPO_EXPERT_API_KEY ?? null,
    maxRetries: opts.maxRetries ?? 3,
    timeoutMs: opts.timeoutMs ?? 120_000,
  };
}

// A brace group with at most one level of nesting, as the reference's pattern.
const JSON_CANDIDATE = /\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}/g;

/** The last `{...}` in `text` that parses as a JSON object, or null. */
export function lastJsonObject(text: string): Record<string, unknown> | null {
  const candidates = [...text.matchAll(JSON_CANDIDATE)].map((m) => m[0]);
  for (const candidate of candidates.reverse()) {
    try {
      const value: unknown = JSON.parse(candidate);
      if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
    } catch {
      // not JSON: try the one before
    }
  }
  return null;
}

const asText = (v: unknown) => (v === undefined ? '' : typeof v === 'string' ? v : JSON.stringify(v));

/** Edits for each agent ("" when the expert could not be reached or never answered in JSON). */
export async function expertEdits(expert: ResolvedExpert, item: { prompt: string }, auxText: string, mainText: string): Promise<{ aux: string; main: string }> {
  const content = expertPrompt(item.prompt, combineProgram(auxText, mainText, promptImports(item.prompt)));
  const errors: string[] = [];
  for (let attempt = 0; attempt < expert.maxRetries; attempt++) {
    try {
      const reply = await chat(expert, content);
      const parsed = lastJsonObject(reply);
      if (parsed === null) throw new Error(`no JSON object in the reply: ${reply.slice(0, 200)}`);
      return { aux: asText(parsed.aux), main: asText(parsed.main) };
    } catch (e) {
      errors.push((e as Error).message);
    }
  }
  process.emitWarning(`expert_edits: no usable reply after ${expert.maxRetries} attempts, continuing without edits (${errors.at(-1)})`, 'MagrpoExpertWarning');
  return { aux: '', main: '' };
}

async function chat(expert: ResolvedExpert, content: string): Promise<string> {
  const response = await fetch(`${expert.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(expert.apiKey ? { authorization: `Bearer ${expert.apiKey}` } : {}) },
    body: JSON.stringify({ model: expert.model, messages: [{ role: 'user', content }], max_tokens: 2048, temperature: 0.3 }),
    signal: AbortSignal.timeout(expert.timeoutMs),
  });
  const body = await response.text();
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${body.slice(0, 200)}`);
  const message = (JSON.parse(body) as { choices?: { message?: { content?: unknown } }[] }).choices?.[0]?.message?.content;
  if (typeof message !== 'string') throw new Error(`unexpected response shape: ${body.slice(0, 200)}`);
  return message;
}
