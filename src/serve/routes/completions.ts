/** POST /v1/completions: OpenAI's text completions; a stream sends one chunk per token. */
import type { Route } from '../context.js';
import { completionChoice, completionDelta } from '../format.js';
import { completionJob } from '../validate.js';
import { type Dialect, generate } from './generate.js';

const COMPLETION: Dialect = {
  idPrefix: 'cmpl',
  object: 'text_completion',
  choice: completionChoice,
  stream: { chunkObject: 'text_completion', deltas: (lm, c, index, ev, spec, fmt) => [completionDelta(lm, c, index, ev, spec, fmt)] },
};

export const completions: Route = (ctx, res, body) => generate(ctx, res, COMPLETION, completionJob(ctx, body));
