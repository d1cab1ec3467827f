/**
 * The dashboard server: static files (src/dashboard/static, uPlot from node_modules) and a few
 * whitelisted files of each run directory, served by sirv on 127.0.0.1 only. The page polls the
 * runs' JSONL, so a live run's charts grow as it writes; nothing else of the run (weights,
 * checkpoints) is reachable. Routing is the few lines below; file serving is sirv's.
 *
 * Hostile-input rules (docs/reliability.md): only GET/HEAD without a body; the URL path is
 * decoded once and must name a whitelisted file exactly (no `..`, `%`, `\`, NUL or empty segment
 * survives); the Host header must be this loopback address (a DNS-rebinding page cannot read the
 * runs); every response forbids inline script (CSP), so a model-written string that slipped past
 * the page's text-only rendering still could not run.
 */
import { existsSync, readdirSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import sirv from 'sirv';
import { runTokenizerDir, tokenPieces } from './tokens.js';

/** Run files the page may read (demo.json: `magrpo demo`'s before/after evaluations and baselines). */
export const SERVED_RUN_FILES = ['config.yaml', 'metrics.jsonl', 'samples.jsonl', 'eval.json', 'demo.json', 'report.json', 'report.md'];
/** Longest request target accepted; every real path is far shorter. */
export const MAX_URL_BYTES = 1024;
/** Request header budget (Node's default is 16 KiB; the page sends well under 2 KiB). */
export const MAX_HEADER_BYTES = 8192;
/** The listening address: loopback only (the runs hold prompts, completions and configs). */
export const HOST = '127.0.0.1';

const VENDOR_FILES = ['uPlot.iife.min.js', 'uPlot.min.css'];
const SECURITY_HEADERS: Record<string, string> = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

export interface DashboardServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** The package root (holding package.json), from src/ under tsx and from dist/src once built. */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}

export function staticDir(): string {
  return join(packageRoot(), 'src', 'dashboard', 'static');
}

/**
 * The path segments of a request target, or null when it is not a plain path: decoded once, and
 * refused if decoding fails or leaves `%` (double encoding), `\`, NUL, control characters, `.`/`..`
 * or empty segments (which also catches `//` and absolute paths smuggled after the first slash).
 */
export function safeSegments(target: string): string[] | null {
  if (target.length > MAX_URL_BYTES || !target.startsWith('/')) return null;
  const rawPath = target.split(/[?#]/, 1)[0];
  if (rawPath === '/') return [];
  const segments: string[] = [];
  for (const raw of rawPath.slice(1).split('/')) {
    let s: string;
    try {
      s = decodeURIComponent(raw);
    } catch {
      return null;
    }
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
    if (s === '' || s === '.' || s === '..' || /[%/\\\u0000-\u001f\u007f]/.test(s)) return null;
    segments.push(s);
  }
  return segments;
}

export async function startDashboard(o: { runs: readonly string[]; port?: number }): Promise<DashboardServer> {
  const runs = o.runs.map((d, id) => ({ id, name: basename(resolve(d)), dir: resolve(d), pieces: undefined as string | undefined }));
  for (const r of runs) if (!existsSync(r.dir)) throw new Error(`${r.dir}: no such run directory`);
  const pageFiles = new Set(readdirSync(staticDir()));
  const page = sirv(staticDir(), { dev: true });
  const vendor = sirv(join(dirname(createRequire(import.meta.url).resolve('uplot/package.json')), 'dist'), { dev: false, maxAge: 3600 });
  const runFiles = runs.map((r) => sirv(r.dir, { dev: true, etag: true }));
  let allowedHosts = new Set<string>();
  const refuse = (res: ServerResponse, status: number, text: string) => {
    res.statusCode = status;
    res.setHeader('Content-Type', 'text/plain; charset=utf-8');
    res.setHeader('Connection', 'close');
    res.end(text);
  };
  const serve = (handler: ReturnType<typeof sirv>, req: IncomingMessage, res: ServerResponse, file: string) => {
    req.url = `/${file}`;
    handler(req, res, () => refuse(res, 404, 'not found'));
  };

  const server = createServer({ maxHeaderSize: MAX_HEADER_BYTES }, (req: IncomingMessage, res: ServerResponse) => {
    for (const [k, v] of Object.entries(SECURITY_HEADERS)) res.setHeader(k, v);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD');
      return refuse(res, 405, 'method not allowed');
    }
    // The page never sends a body: any declared body is refused unread (and the connection closed).
    if (req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0) return refuse(res, 413, 'request body not allowed');
    if (!allowedHosts.has(String(req.headers.host ?? '').toLowerCase())) return refuse(res, 421, 'unexpected Host header');
    const target = req.url ?? '/';
    if (target.length > MAX_URL_BYTES) return refuse(res, 414, 'URL too long');
    const seg = safeSegments(target);
    if (seg === null) return refuse(res, 400, 'bad path');
    if (seg.length === 0) return serve(page, req, res, 'index.html');
    if (seg.length === 2 && seg[0] === 'api' && seg[1] === 'runs') {
      res.setHeader('Content-Type', 'application/json');
      res.setHeader('Cache-Control', 'no-store');
      return res.end(JSON.stringify(runs.map(({ id, name }) => ({ id, name }))));
    }
    if (seg.length === 3 && seg[0] === 'runs' && /^\d{1,6}$/.test(seg[1]) && seg[2] === 'tokens.json' && runs[Number(seg[1])]) {
      const run = runs[Number(seg[1])];
      const dir = run.pieces === undefined ? runTokenizerDir(run.dir) : null;
      if (run.pieces === undefined && dir === null)
        return refuse(res, 404, 'no tokenizer for this run (final/agent_0/model, or the model its config.yaml names)');
      try {
        run.pieces ??= JSON.stringify(tokenPieces(dir as string));
      } catch (e) {
        return refuse(res, 500, `cannot read the tokenizer of ${dir}: ${(e as Error).message}`);
      }
      res.setHeader('Content-Type', 'application/json');
      return res.end(run.pieces);
    }
    if (seg.length === 3 && seg[0] === 'runs' && /^\d{1,6}$/.test(seg[1])) {
      const handler = runFiles[Number(seg[1])];
      if (!handler || !SERVED_RUN_FILES.includes(seg[2])) return refuse(res, 404, 'not found');
      return serve(handler, req, res, seg[2]);
    }
    if (seg.length === 2 && seg[0] === 'vendor' && VENDOR_FILES.includes(seg[1])) return serve(vendor, req, res, seg[1]);
    if (seg.length === 1 && pageFiles.has(seg[0])) return serve(page, req, res, seg[0]);
    refuse(res, 404, 'not found');
  });
  // Slow or never-finished requests cannot pin sockets forever.
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.maxConnections = 64;
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(o.port ?? 6007, HOST, ok);
  });
  const port = (server.address() as AddressInfo).port;
  allowedHosts = new Set([`${HOST}:${port}`, `localhost:${port}`]);
  return {
    url: `http://${HOST}:${port}/`,
    port,
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}
