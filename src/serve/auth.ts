/**
 * Who may talk to the server: on a loopback address the Host header must be loopback too (a web
 * page cannot reach the server through DNS rebinding), and with an API key a request must carry
 * `Authorization: Bearer <key>` (or, as Anthropic's clients send it, `x-api-key: <key>`).
 */
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { HttpError } from './http.js';

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);
const isLoopback = (host: string) => LOOPBACK_HOSTS.has(host) || host.startsWith('127.');

export interface AccessPolicy {
  /** The address the server listens on. */
  host: string;
  /** Required bearer token, or null for none. */
  key: Buffer | null;
}

/** Throws 403 for a non-loopback Host on a loopback server, then 401 for a missing or wrong key where `needsKey`. */
export function checkAccess(req: IncomingMessage, policy: AccessPolicy, needsKey: boolean): void {
  const host = (req.headers.host ?? '').replace(/:\d+$/, '');
  if (isLoopback(policy.host) && !isLoopback(host))
    throw new HttpError(403, `Host "${req.headers.host}" is not a loopback name; this server listens on ${policy.host} only`, 'permission_error');
  if (policy.key === null || !needsKey) return;
  const auth = req.headers.authorization ?? '';
  // Anthropic's clients send the key as x-api-key.
  const xKey = req.headers['x-api-key'];
  const given = Buffer.from(auth.startsWith('Bearer ') ? auth.slice(7) : typeof xKey === 'string' ? xKey : '');
  // timingSafeEqual: the comparison takes as long whatever prefix of the key a guess gets right.
  if (given.length !== policy.key.length || !timingSafeEqual(given, policy.key))
    throw new HttpError(
      401,
      'Incorrect API key provided: pass it as "Authorization: Bearer <key>" (or "x-api-key: <key>").',
      'invalid_request_error',
      null,
      'invalid_api_key',
    );
}
