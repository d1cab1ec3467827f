/**
 * POST /v1/chat/completions: OpenAI's chat. A stream sends a first chunk with the role, one
 * content chunk per token, and each choice's finish_reason in an empty-delta chunk of its own.
 */
import type { Route } from '../context.js';
import { chatChoice, chatDelta } from '../format.js';
import { chatJob } from '../validate.js';
import { type Dialect, generate } from './generate.js';

const CHAT: Dialect = {
  idPrefix: 'chatcmpl',
  object: 'chat.completion',
  choice: chatChoice,
  stream: {
    chunkObject: 'chat.completion.chunk',
    opening: (choices) =>
      Array.from({ length: choices }, (_, index) => ({ index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null })),
    deltas: (lm, c, index, ev, spec, fmt) => {
      // chatDelta sets c.stopReason on the last token; the finish chunk reads it.
      const delta = chatDelta(lm, c, index, ev, spec, fmt);
      if (!ev.finish) return [delta];
      return [delta, { index, delta: {}, logprobs: null, finish_reason: c.finishReason, stop_reason: c.stopReason }];
    },
  },
};

export const chat: Route = (ctx, res, body) => generate(ctx, res, CHAT, chatJob(ctx, body));
