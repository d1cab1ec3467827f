/**
 * Request validation: a body is checked against its schema (protocol.ts, one per request type),
 * then against this server (the model exists, token ids are in the vocabulary, the prompt and
 * max_tokens fit the context and the server's cap), and a generation request becomes what the
 * engine runs. Every failure is an HttpError naming the field as `param`, before any work starts.
 */
import type { z } from 'zod';
import type { ServeContext } from './context.js';
import type { SamplingSpec } from './engine.js';
import type { ChoiceFormat } from './format.js';
import { HttpError } from './http.js';
import { chatPromptIds, encodeText } from './prompts.js';
import { ChatRequest, CompletionRequest, describeIssues, MessagesRequest, ResponsesRequest } from './protocol.js';

/** The body as `schema` reads it (defaults filled in); 400 with every issue otherwise. */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const r = schema.safeParse(body);
  if (!r.success) {
    const { message, param } = describeIssues(r.error);
    throw new HttpError(400, message, 'invalid_request_error', param);
  }
  return r.data;
}

/** The model a request names (the base model when it names none); 404 for one not served. */
export function servedModel(ctx: ServeContext, name: string | undefined): string {
  const m = name ?? ctx.modelName;
  if (!ctx.engine.hasModel(m)) throw new HttpError(404, `The model \`${m}\` does not exist.`, 'NotFoundError', 'model', 'model_not_found');
  return m;
}

/** 400 naming `field` for an id past the vocabulary. */
export function checkIds(ctx: ServeContext, ids: readonly number[], field: string): void {
  const V = ctx.lm.tokenizer.vocabSize;
  const bad = ids.find((t) => t >= V);
  if (bad !== undefined) throw new HttpError(400, `${field}: token id ${bad} is outside the vocabulary [0, ${V})`, 'invalid_request_error', field);
}

/** What the engine runs for one generation request, and how its answer is written. */
export interface GenerationJob {
  model: string;
  /** Token ids of each prompt; each gets `n` completions. */
  prompts: number[][];
  n: number;
  spec: SamplingSpec;
  fmt: ChoiceFormat;
  stream: boolean;
  /** stream_options.include_usage: a last chunk with the token counts. */
  includeUsage: boolean;
}

export function completionJob(ctx: ServeContext, raw: unknown): GenerationJob {
  const body = parseBody(CompletionRequest, raw);
  const model = servedModel(ctx, body.model);
  if (body.best_of !== null && body.best_of !== undefined && body.best_of !== body.n)
    throw new HttpError(400, 'best_of is not supported (leave it out or equal to n)', 'invalid_request_error', 'best_of');
  const p = body.prompt;
  const prompts: number[][] =
    typeof p === 'string'
      ? [encodeText(ctx.lm, p)]
      : typeof p[0] === 'string'
        ? (p as string[]).map((t) => encodeText(ctx.lm, t))
        : typeof p[0] === 'number'
          ? [p as number[]]
          : (p as number[][]);
  for (const [i, ids] of prompts.entries()) checkIds(ctx, ids, prompts.length > 1 ? `prompt.${i}` : 'prompt');
  // Without max_tokens, each prompt may fill the context: the longest prompt bounds them all.
  const maxTokens = Math.min(...prompts.map((ids) => maxTokensFor(ctx, ids.length, body.max_tokens, 'max_tokens')));
  const spec = samplingSpec(ctx, body, maxTokens, body.logprobs ?? 0);
  return generationJob(body, model, prompts, spec, body.logprobs !== null && body.logprobs !== undefined);
}

export function chatJob(ctx: ServeContext, raw: unknown): GenerationJob {
  const body = parseBody(ChatRequest, raw);
  const model = servedModel(ctx, body.model);
  const ids = chatPromptIds(ctx.lm, body.messages, body.add_generation_prompt);
  const param = body.max_completion_tokens ? 'max_completion_tokens' : 'max_tokens';
  const maxTokens = maxTokensFor(ctx, ids.length, body.max_completion_tokens ?? body.max_tokens, param);
  const spec = samplingSpec(ctx, body, maxTokens, body.logprobs ? (body.top_logprobs ?? 0) : 0);
  return generationJob(body, model, [ids], spec, body.logprobs);
}

/** Text of Anthropic or Responses content: a string, or its text blocks joined. */
const blocksText = (c: string | readonly { text: string }[]) => (typeof c === 'string' ? c : c.map((b) => b.text).join(''));

/**
 * A one-completion chat job from another API's body (Anthropic's messages, OpenAI's responses):
 * its messages through the chat template, its sampling fields as chat's, no logprobs, no stream.
 */
function singleChatJob(
  ctx: ServeContext,
  body: { model?: string; temperature: number; top_p: number; seed?: number | null },
  messages: { role: string; content: string }[],
  maxTokens: number | null | undefined,
  param: string,
  extra: { topK?: number; stop?: string[] },
): GenerationJob {
  const model = servedModel(ctx, body.model);
  const ids = chatPromptIds(ctx.lm, messages, true);
  const n = maxTokensFor(ctx, ids.length, maxTokens, param);
  const spec = samplingSpec(ctx, { ...body, top_k: extra.topK ?? null, stop: extra.stop ?? null, ignore_eos: false } as ChatRequest, n, 0);
  return {
    model,
    prompts: [ids],
    n: 1,
    spec,
    fmt: { logprobs: false, tokenIds: false, returnTokenIds: false, skipSpecial: true, includeStop: false },
    stream: false,
    includeUsage: false,
  };
}

/** POST /v1/messages: Anthropic's system prompt first, then its turns. */
export function messagesJob(ctx: ServeContext, raw: unknown): GenerationJob {
  const body = parseBody(MessagesRequest, raw);
  const messages = [
    ...(body.system === undefined ? [] : [{ role: 'system', content: blocksText(body.system) }]),
    ...body.messages.map((m) => ({ role: m.role, content: blocksText(m.content) })),
  ];
  return singleChatJob(ctx, body, messages, body.max_tokens, 'max_tokens', { topK: body.top_k, stop: body.stop_sequences });
}

/** POST /v1/responses: the instructions as the system prompt, then the input (a text is one user turn; developer turns are system turns). */
export function responsesJob(ctx: ServeContext, raw: unknown): GenerationJob {
  const body = parseBody(ResponsesRequest, raw);
  const turns =
    typeof body.input === 'string'
      ? [{ role: 'user', content: body.input }]
      : body.input.map((m) => ({ role: m.role === 'developer' ? 'system' : m.role, content: blocksText(m.content) }));
  const messages = [...(body.instructions ? [{ role: 'system', content: body.instructions }] : []), ...turns];
  return singleChatJob(ctx, body, messages, body.max_output_tokens, 'max_output_tokens', {});
}

/** max_tokens after defaults and bounds; the prompt plus it must fit the context. */
function maxTokensFor(ctx: ServeContext, promptLen: number, asked: number | null | undefined, param: string): number {
  if (promptLen === 0) throw new HttpError(400, 'the prompt is empty: sampling needs at least one token', 'invalid_request_error', 'prompt');
  const { context, maxTokens: cap } = ctx;
  const n = asked ?? Math.min(cap, context - promptLen);
  if (n > cap) throw new HttpError(400, `${param} is ${n}; this server allows at most ${cap}`, 'invalid_request_error', param);
  if (promptLen + n > context || n < 1)
    throw new HttpError(
      400,
      `This model's maximum context length is ${context} tokens. However, you requested ${promptLen + n} tokens (${promptLen} in the messages, ${n} in the completion). Please reduce the length of the messages or completion.`,
      'invalid_request_error',
      param,
    );
  return n;
}

/**
 * The engine's sampling spec. The server's seed generator is drawn only once every check has
 * passed, so with `--seed` a rejected request does not shift the seeds of the ones after it.
 */
function samplingSpec(ctx: ServeContext, body: CompletionRequest | ChatRequest, maxTokens: number, topLogprobs: number): SamplingSpec {
  if (body.logit_bias && Object.keys(body.logit_bias).length > 0)
    throw new HttpError(400, 'logit_bias is not supported', 'invalid_request_error', 'logit_bias');
  const stop = body.stop === null || body.stop === undefined ? [] : [body.stop].flat().filter((s) => s.length > 0);
  const stopIds = [...(body.ignore_eos ? [] : ctx.lm.stopIds()), ...(body.stop_token_ids ?? [])];
  checkIds(ctx, body.stop_token_ids ?? [], 'stop_token_ids');
  return {
    maxNewTokens: maxTokens,
    temperature: body.temperature,
    topP: body.top_p,
    topK: body.top_k && body.top_k > 0 ? body.top_k : null,
    stopStrings: stop,
    stopTokenIds: stopIds,
    topLogprobs,
    seed: body.seed ?? ctx.seeds.nextU32(),
  };
}

function generationJob(body: CompletionRequest | ChatRequest, model: string, prompts: number[][], spec: SamplingSpec, logprobs: boolean): GenerationJob {
  return {
    model,
    prompts,
    n: body.n,
    spec,
    fmt: {
      logprobs,
      tokenIds: body.return_tokens_as_token_ids,
      returnTokenIds: body.return_token_ids,
      skipSpecial: body.skip_special_tokens,
      includeStop: body.include_stop_str_in_output,
    },
    stream: body.stream,
    includeUsage: body.stream_options?.include_usage ?? false,
  };
}
