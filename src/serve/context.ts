/** What every route is given: the model, the engine and the server's limits, fixed at start. */
import type { ServerResponse } from 'node:http';
import type { Rng } from '../engine/rng.js';
import type { LanguageModel } from '../model/pretrained.js';
import type { BatchEngine } from './engine.js';

export interface ServeContext {
  lm: LanguageModel;
  engine: BatchEngine;
  /** Name the base model is served under (requests' `model`). */
  modelName: string;
  /** The model's context length: prompt plus completion must fit it. */
  context: number;
  /** Largest max_tokens a request may ask for (≤ context). */
  maxTokens: number;
  /** Most prompts waiting for a batch before new requests get 503. */
  maxQueue: number;
  /** Draws the seed of every request that gives none. */
  seeds: Rng;
  /** Unix seconds the server started: the models' `created`. */
  created: number;
}

/** A route: answers on `res`, or throws an HttpError; `body` is the parsed JSON of a POST, else undefined. */
export type Route = (ctx: ServeContext, res: ServerResponse, body: unknown) => void | Promise<void>;
