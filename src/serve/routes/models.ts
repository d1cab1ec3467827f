/** GET /v1/models and /v1/models/{id}: the base model, then each loaded adapter (its `parent` the base). */
import type { ServerResponse } from 'node:http';
import type { Route, ServeContext } from '../context.js';
import { HttpError, sendJson } from '../http.js';
import { servedModel } from '../validate.js';

/** Prefix of OpenAI's "retrieve model" route; clients percent-encode a name with slashes. */
export const MODEL_PATH = '/v1/models/';

const card = (ctx: ServeContext, m: string) => ({
  id: m,
  object: 'model',
  created: ctx.created,
  owned_by: 'magrpo',
  root: m === ctx.modelName ? ctx.lm.source || m : m,
  parent: m === ctx.modelName ? null : ctx.modelName,
  max_model_len: ctx.context,
});

export const listModels: Route = (ctx, res) => sendJson(res, 200, { object: 'list', data: ctx.engine.models().map((m) => card(ctx, m)) });

/** The model name in a MODEL_PATH path; 400 where it is not valid percent-encoding. */
export function modelIdOf(path: string): string {
  try {
    return decodeURIComponent(path.slice(MODEL_PATH.length));
  } catch {
    throw new HttpError(400, `${path}: not a valid percent-encoded model name`, 'invalid_request_error', 'model');
  }
}

export function retrieveModel(ctx: ServeContext, res: ServerResponse, id: string): void {
  sendJson(res, 200, card(ctx, servedModel(ctx, id)));
}
