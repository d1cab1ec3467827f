/** POST /tokenize and /detokenize: vLLM's bodies, with the same prompts the generation routes build. */
import type { Route } from '../context.js';
import { HttpError, sendJson } from '../http.js';
import { chatPromptIds, encodeText } from '../prompts.js';
import { DetokenizeRequest, TokenizeRequest } from '../protocol.js';
import { checkIds, parseBody, servedModel } from '../validate.js';

export const tokenize: Route = (ctx, res, raw) => {
  const body = parseBody(TokenizeRequest, raw);
  servedModel(ctx, body.model);
  const tokens =
    'prompt' in body
      ? encodeText(ctx.lm, body.prompt, body.add_special_tokens)
      : chatPromptIds(ctx.lm, body.messages, body.add_generation_prompt, body.add_special_tokens);
  sendJson(res, 200, {
    count: tokens.length,
    max_model_len: ctx.context,
    tokens,
    token_strs: body.return_token_strs ? tokens.map((t) => ctx.lm.tokenizer.decode([t])) : null,
  });
};

export const detokenize: Route = (ctx, res, raw) => {
  const body = parseBody(DetokenizeRequest, raw);
  servedModel(ctx, body.model);
  checkIds(ctx, body.tokens, 'tokens');
  if (body.tokens.some((t) => t < 0)) throw new HttpError(400, 'tokens: token ids must be ≥ 0', 'invalid_request_error', 'tokens');
  sendJson(res, 200, { prompt: ctx.lm.tokenizer.decode(body.tokens) });
};
