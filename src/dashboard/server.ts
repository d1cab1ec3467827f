/**
 * The dashboard server: static files (src/dashboard/static, uPlot from node_modules) and a few
 * whitelisted files of each run directory, served by sirv on 127.0.0.1 only. The page polls the
 * runs' JSONL, so a live run's charts grow as it writes; nothing else of the run (weights,
 * checkpoints) is reachable. Routing is the few lines below; file serving is sirv's.
 */
import { existsSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import sirv from 'sirv';

/** Run files the page may read. */
export const SERVED_RUN_FILES = ['config.yaml', 'metrics.jsonl', 'samples.jsonl', 'eval.json', 'report.json', 'report.md'];

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

export async function startDashboard(o: { runs: readonly string[]; port?: number }): Promise<DashboardServer> {
  const runs = o.runs.map((d, id) => ({ id, name: basename(resolve(d)), dir: resolve(d) }));
  for (const r of runs) if (!existsSync(r.dir)) throw new Error(`${r.dir}: no such run directory`);
  const page = sirv(staticDir(), { dev: true });
  const vendor = sirv(join(dirname(createRequire(import.meta.url).resolve('uplot/package.json')), 'dist'), { dev: false, maxAge: 3600 });
  const runFiles = runs.map((r) => sirv(r.dir, { dev: true, etag: true }));
  const notFound = (res: ServerResponse) => {
    res.statusCode = 404;
    res.end('not found');
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname === '/api/runs') {
      res.setHeader('Content-Type', 'application/json');
      res.setHeader('Cache-Control', 'no-store');
      return res.end(JSON.stringify(runs.map(({ id, name }) => ({ id, name }))));
    }
    const m = /^\/runs\/(\d+)\/([\w.-]+)$/.exec(url.pathname);
    if (m) {
      const id = Number(m[1]);
      if (!runFiles[id] || !SERVED_RUN_FILES.includes(m[2])) return notFound(res);
      req.url = `/${m[2]}`;
      return runFiles[id](req, res, () => notFound(res));
    }
    if (url.pathname.startsWith('/vendor/')) {
      req.url = url.pathname.slice('/vendor'.length);
      return vendor(req, res, () => notFound(res));
    }
    page(req, res, () => notFound(res));
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(o.port ?? 6007, '127.0.0.1', ok);
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/`,
    port,
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}
