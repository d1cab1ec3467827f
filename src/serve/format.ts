/**
 * How generated tokens become OpenAI response objects: completion choices (logprobs as
 * tokens / token_logprobs / top_logprobs / text_offset) and chat choices (logprobs.content
 * entries with bytes), whole or as streamed deltas.
 *
 * Text rules, as vLLM: a stop token's text and a stop string are left out of `text` unless
 * include_stop_str_in_output; the text is cut at the first stop string; special tokens are left
 * out unless skip_special_tokens is false. Token ids and log-probs always cover every sampled
 * token, a final EOS included. When streaming, text that may be the start of a stop string (or an
 * incomplete UTF-8 character) is held back until the next token decides it.
 */
import type { LanguageModel } from '../model/pretrained.js';
import type { FinishReason } from '../model/sample.js';
import type { SamplingSpec, TokenEvent } from './engine.js';

/** One completion as it is generated. */
export interface Choice {
  promptIds: number[];
  tokens: number[];
  logprobs: number[];
  tops: { id: number; logprob: number }[][];
  finish: FinishReason | null;
  /** OpenAI's finish_reason once finished. */
  finishReason: 'stop' | 'length' | null;
  /** vLLM's stop_reason: the stop string or (non-EOS) stop token id that ended it, else null. */
  stopReason: string | number | null;
  /** Text already streamed. */
  emitted: string;
}

/** What the request asked the response to contain. */
export interface ChoiceFormat {
  logprobs: boolean;
  /** vLLM return_tokens_as_token_ids: tokens rendered "token_id:123". */
  tokenIds: boolean;
  /** vLLM return_token_ids: prompt_token_ids and token_ids on each choice. */
  returnTokenIds: boolean;
  skipSpecial: boolean;
  includeStop: boolean;
}

export function newChoice(promptIds: number[]): Choice {
  return { promptIds, tokens: [], logprobs: [], tops: [], finish: null, finishReason: null, stopReason: null, emitted: '' };
}

export function recordToken(c: Choice, ev: TokenEvent): void {
  c.tokens.push(ev.token);
  c.logprobs.push(ev.logprob);
  c.tops.push(ev.top);
  if (ev.finish) {
    c.finish = ev.finish;
    c.finishReason = ev.finish === 'length' ? 'length' : 'stop';
  }
}

/** The finished completion's text and stop_reason. */
export function finalText(lm: LanguageModel, c: Choice, spec: SamplingSpec, fmt: ChoiceFormat): { text: string; stopReason: string | number | null } {
  const decode = (ids: number[]) => lm.tokenizer.decode(ids, { skipSpecialTokens: fmt.skipSpecial });
  if (c.finish === 'stop_token') {
    const last = c.tokens[c.tokens.length - 1];
    const text = decode(fmt.includeStop ? c.tokens : c.tokens.slice(0, -1));
    return { text, stopReason: lm.stopIds().includes(last) ? null : last };
  }
  const full = decode(c.tokens);
  if (c.finish === 'stop_string') {
    // The stop string is searched in the text the engine checked (special tokens skipped), then cut in this rendering.
    let best: { at: number; s: string } | null = null;
    for (const s of spec.stopStrings) {
      const at = full.indexOf(s);
      if (at >= 0 && (best === null || at < best.at)) best = { at, s };
    }
    if (best) return { text: full.slice(0, fmt.includeStop ? best.at + best.s.length : best.at), stopReason: best.s };
  }
  return { text: full, stopReason: null };
}

/** Text safe to stream now: held back where a stop string might begin or a character is incomplete. */
function visibleText(lm: LanguageModel, c: Choice, spec: SamplingSpec, fmt: ChoiceFormat): string {
  let text = lm.tokenizer.decode(c.tokens, { skipSpecialTokens: fmt.skipSpecial });
  while (text.endsWith('\uFFFD')) text = text.slice(0, -1);
  let hold = 0;
  for (const s of spec.stopStrings) for (let k = Math.min(s.length - 1, text.length); k > hold; k--) if (text.endsWith(s.slice(0, k))) hold = k;
  return text.slice(0, text.length - hold);
}

/** The next piece of streamed text of `c` (everything left once it has finished). */
function nextDelta(lm: LanguageModel, c: Choice, spec: SamplingSpec, fmt: ChoiceFormat): string {
  const now = c.finish ? finalText(lm, c, spec, fmt).text : visibleText(lm, c, spec, fmt);
  if (!now.startsWith(c.emitted)) return '';
  const delta = now.slice(c.emitted.length);
  c.emitted = now;
  return delta;
}

const tokenText = (lm: LanguageModel, id: number, fmt: ChoiceFormat) => (fmt.tokenIds ? `token_id:${id}` : lm.tokenizer.decode([id]));

/** Completions API logprobs for tokens [from, to) of `c`. */
function completionLogprobs(lm: LanguageModel, c: Choice, from: number, to: number, fmt: ChoiceFormat, offset0: number) {
  const tokens: string[] = [];
  const tokenLogprobs: number[] = [];
  const top: Record<string, number>[] = [];
  const textOffset: number[] = [];
  let offset = offset0;
  for (let t = from; t < to; t++) {
    const s = tokenText(lm, c.tokens[t], fmt);
    tokens.push(s);
    tokenLogprobs.push(c.logprobs[t]);
    const d: Record<string, number> = {};
    for (const alt of c.tops[t]) d[tokenText(lm, alt.id, fmt)] ??= alt.logprob;
    d[s] ??= c.logprobs[t];
    top.push(d);
    textOffset.push(offset);
    offset += fmt.tokenIds ? 0 : s.length;
  }
  return { tokens, token_logprobs: tokenLogprobs, top_logprobs: top, text_offset: textOffset };
}

function chatLogprob(lm: LanguageModel, c: Choice, t: number, fmt: ChoiceFormat) {
  const entry = (id: number, logprob: number) => {
    const token = tokenText(lm, id, fmt);
    return { token, logprob, bytes: [...Buffer.from(token, 'utf8')] };
  };
  return { ...entry(c.tokens[t], c.logprobs[t]), top_logprobs: c.tops[t].map((a) => entry(a.id, a.logprob)) };
}

const ids = (c: Choice, fmt: ChoiceFormat) => (fmt.returnTokenIds ? { prompt_token_ids: c.promptIds, token_ids: c.tokens } : {});

export function completionChoice(lm: LanguageModel, c: Choice, index: number, spec: SamplingSpec, fmt: ChoiceFormat) {
  const { text, stopReason } = finalText(lm, c, spec, fmt);
  return {
    index,
    text,
    logprobs: fmt.logprobs ? completionLogprobs(lm, c, 0, c.tokens.length, fmt, 0) : null,
    finish_reason: c.finishReason,
    stop_reason: stopReason,
    ...ids(c, fmt),
  };
}

export function chatChoice(lm: LanguageModel, c: Choice, index: number, spec: SamplingSpec, fmt: ChoiceFormat) {
  const { text, stopReason } = finalText(lm, c, spec, fmt);
  return {
    index,
    message: { role: 'assistant', content: text },
    logprobs: fmt.logprobs ? { content: c.tokens.map((_, t) => chatLogprob(lm, c, t, fmt)) } : null,
    finish_reason: c.finishReason,
    stop_reason: stopReason,
    ...ids(c, fmt),
  };
}

/** A streamed completions chunk's choice for the token just recorded. */
export function completionDelta(lm: LanguageModel, c: Choice, index: number, ev: TokenEvent, spec: SamplingSpec, fmt: ChoiceFormat) {
  const t = c.tokens.length - 1;
  const offset = c.emitted.length;
  const text = nextDelta(lm, c, spec, fmt);
  const stop = ev.finish ? finalText(lm, c, spec, fmt).stopReason : null;
  return {
    index,
    text,
    logprobs: fmt.logprobs ? completionLogprobs(lm, c, t, t + 1, fmt, offset) : null,
    finish_reason: ev.finish ? c.finishReason : null,
    stop_reason: stop,
    ...(fmt.returnTokenIds ? { token_ids: [ev.token], ...(t === 0 ? { prompt_token_ids: c.promptIds } : {}) } : {}),
  };
}

/** A streamed chat chunk's choice for the token just recorded (the finish comes in a chunk of its own). */
export function chatDelta(lm: LanguageModel, c: Choice, index: number, ev: TokenEvent, spec: SamplingSpec, fmt: ChoiceFormat) {
  const t = c.tokens.length - 1;
  const content = nextDelta(lm, c, spec, fmt);
  if (ev.finish) c.stopReason = finalText(lm, c, spec, fmt).stopReason;
  return {
    index,
    delta: { content },
    logprobs: fmt.logprobs ? { content: [chatLogprob(lm, c, t, fmt)] } : null,
    finish_reason: null,
    ...(fmt.returnTokenIds ? { token_ids: [ev.token], ...(t === 0 ? { prompt_token_ids: c.promptIds } : {}) } : {}),
  };
}
