/**
 * Runs a generation job on the engine and answers it, whole or streamed. Completions and chat
 * differ only in the shape of their answers (a Dialect); queueing, cancellation when the client
 * hangs up, usage and errors mid-stream are the same for both.
 */
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { LanguageModel } from '../../model/pretrained.js';
import type { ServeContext } from '../context.js';
import type { SamplingSpec, TokenEvent } from '../engine.js';
import { type Choice, type ChoiceFormat, newChoice, recordToken } from '../format.js';
import { asHttpError, errorBody, eventStream, HttpError, sendJson, watchHangup } from '../http.js';
import type { GenerationJob } from '../validate.js';

/** How one endpoint shapes its answers. */
export interface Dialect {
  /** Prefix of the answer's id. */
  idPrefix: string;
  /** `object` of the whole answer. */
  object: string;
  /** Choice `index` of the whole answer, finished. */
  choice(lm: LanguageModel, c: Choice, index: number, spec: SamplingSpec, fmt: ChoiceFormat): unknown;
  /** The whole answer from OpenAI's parts, for an endpoint whose answer has another shape (Anthropic's messages, OpenAI's responses). */
  answer?(parts: { id: string; created: number; model: string; choices: unknown[]; usage: Usage }): unknown;
  /** How the endpoint streams; absent where it answers whole only (its request validation refuses `stream`). */
  stream?: StreamDialect;
}

/** How an endpoint that streams shapes its chunks (OpenAI's server-sent events). */
export interface StreamDialect {
  /** `object` of each streamed chunk (and of the usage chunk). */
  chunkObject: string;
  /** The choices of a chunk sent before any token, if the endpoint sends one. */
  opening?(choices: number): unknown[];
  /** The chunks' choices, one chunk each, that stream token `ev` of choice `index` (already recorded in `c`). */
  deltas(lm: LanguageModel, c: Choice, index: number, ev: TokenEvent, spec: SamplingSpec, fmt: ChoiceFormat): unknown[];
}

/** Token counts of an answer, OpenAI's names. */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** Choices are ordered prompt-major: choice p × n + j is completion j of prompt p. */
export async function generate(ctx: ServeContext, res: ServerResponse, dialect: Dialect, job: GenerationJob): Promise<void> {
  const { engine, lm } = ctx;
  const { model, prompts, n, spec, fmt } = job;
  if (engine.queued + prompts.length > ctx.maxQueue)
    throw new HttpError(503, `the server is busy: ${engine.queued} prompts are waiting; retry later`, 'server_error', null, 'overloaded');
  const streaming = job.stream ? dialect.stream : undefined;
  if (job.stream && !streaming) throw new HttpError(400, 'this endpoint does not stream; leave out stream', 'invalid_request_error', 'stream');
  const id = `${dialect.idPrefix}-${randomUUID().replaceAll('-', '')}`;
  const created = Math.floor(Date.now() / 1000);
  const chunk = (choices: unknown[], usage?: unknown) => ({ id, object: streaming?.chunkObject, created, model, choices, ...(usage ? { usage } : {}) });
  const choices: Choice[] = prompts.flatMap((p) => Array.from({ length: n }, () => newChoice(p)));
  const gone = watchHangup(res);
  const stream = streaming ? eventStream(res, gone) : null;
  const opening = streaming?.opening?.(choices.length);
  if (stream && opening) stream.send(chunk(opening));
  const runs = prompts.map((promptIds, p) =>
    engine.submit({
      model,
      promptIds,
      n,
      spec,
      cancelled: gone,
      onToken: (j, ev) => {
        const index = p * n + j;
        const c = choices[index];
        recordToken(c, ev);
        if (stream && streaming) for (const d of streaming.deltas(lm, c, index, ev, spec, fmt)) stream.send(chunk([d]));
      },
    }),
  );
  try {
    await Promise.all(runs);
  } catch (e) {
    if (!stream) throw e;
    stream.send(errorBody(asHttpError(e)));
    stream.end();
    return;
  }
  const promptTokens = prompts.reduce((s, p) => s + p.length, 0);
  const completionTokens = choices.reduce((s, c) => s + c.tokens.length, 0);
  const usage: Usage = { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
  if (stream) {
    if (job.includeUsage) stream.send(chunk([], usage));
    stream.end();
    return;
  }
  const out = choices.map((c, i) => dialect.choice(lm, c, i, spec, fmt));
  sendJson(
    res,
    200,
    dialect.answer ? dialect.answer({ id, created, model, choices: out, usage }) : { id, object: dialect.object, created, model, choices: out, usage },
  );
}
