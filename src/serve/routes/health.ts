/** GET /health (200, empty: the one route that needs no key) and GET /stats (the engine's counters). */
import type { Route } from '../context.js';
import { sendJson } from '../http.js';

export const health: Route = (_ctx, res) => void res.writeHead(200).end();

export const stats: Route = (ctx, res) => sendJson(res, 200, ctx.engine.stats);
