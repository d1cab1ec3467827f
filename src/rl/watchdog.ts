/**
 * A watchdog for synchronous user callbacks (reward, formatters, transition).
 *
 * An async callback that never settles is caught by a timer (rollout.ts `settle`), but a callback
 * stuck in a synchronous loop holds the event loop, so no timer can fire and the run hangs with no
 * word. A worker thread watches instead: the main thread tells it which callback it enters (a
 * message) and raises a shared flag until it returns. If the flag stays up longer than the task's
 * `callbackTimeoutSeconds`, the worker prints which callback hung and where, writes failure.json
 * into the run directory when one is registered, and ends the process with SIGKILL — the only
 * way out, since the main thread cannot run a handler. Checkpoints are written atomically, so the
 * last one is intact and `train --resume` continues from it.
 */
import { Worker } from 'node:worker_threads';

/** The worker: plain JavaScript, evaluated from a string so it runs the same from src/ and dist/. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
const path = require('node:path');
const flag = new Int32Array(workerData.shared);
let current = null;
let run = null;
parentPort.on('message', (m) => {
  if (m.kind === 'enter') current = m;
  else if (m.kind === 'run') run = m.run;
});
setInterval(() => {
  if (current === null || Atomics.load(flag, 0) !== current.token) return;
  const seconds = (Date.now() - current.start) / 1000;
  if (seconds < current.seconds) return;
  const message = 'the task\\'s ' + current.name + ' callback has run for ' + seconds.toFixed(0) + ' s on ' + current.where +
    ' without returning (Task.callbackTimeoutSeconds = ' + current.seconds + '). A synchronous loop cannot be interrupted, so magrpo stops the process.';
  let note = '';
  if (run !== null) {
    try {
      const report = { status: 'failed', error: message, name: 'TaskError', stack: null, env_step: run.envStep, items: run.items,
        checkpoint: run.checkpoint, failed_at: new Date().toISOString() };
      fs.writeFileSync(path.join(run.dir, 'failure.json'), JSON.stringify(report, null, 2) + '\\n');
      note = ' Details in ' + path.join(run.dir, 'failure.json') + (run.checkpoint ? '; the last checkpoint (' + run.checkpoint + ') is intact: fix the callback and resume with train --resume ' + run.dir : '') + '.';
    } catch (e) {
      note = ' (could not write failure.json: ' + e.message + ')';
    }
  }
  fs.writeSync(2, 'magrpo: error: ' + message + note + '\\n');
  process.kill(process.pid, 'SIGKILL');
}, workerData.pollMs);
`;

/** How far the run got, for the failure.json the watchdog writes (null: no run directory). */
export interface WatchdogRun {
  dir: string;
  envStep: number | null;
  items: number;
  checkpoint: string | null;
}

let worker: Worker | null = null;
let flag: Int32Array | null = null;
let token = 0;

function start(): { worker: Worker; flag: Int32Array } {
  if (worker === null || flag === null) {
    const shared = new SharedArrayBuffer(4);
    flag = new Int32Array(shared);
    // No inherited flags: the script is plain CommonJS (a parent's --input-type=module or loader
    // hooks would make `require` undefined or slow its start).
    worker = new Worker(WORKER_SOURCE, { eval: true, execArgv: [], workerData: { shared, pollMs: 250 } });
    worker.on('error', (e) => process.emitWarning(`callback watchdog stopped: ${e.message}`));
    worker.unref(); // never keeps the process alive
  }
  return { worker, flag };
}

/**
 * Runs `f` (the synchronous part of a user callback) under the watchdog: if it has not returned
 * after `seconds`, the process is stopped with a message naming `name` and `where`.
 */
export function watched<T>(name: string, where: string, seconds: number, f: () => T): T {
  const w = start();
  token = (token % 0x7fffffff) + 1;
  const t = token;
  w.worker.postMessage({ kind: 'enter', token: t, name, where, seconds, start: Date.now() });
  Atomics.store(w.flag, 0, t);
  try {
    return f();
  } finally {
    Atomics.store(w.flag, 0, 0);
  }
}

/** Registers (or clears) the run directory the watchdog reports into. */
export function watchdogRun(run: WatchdogRun | null): void {
  if (run === null && worker === null) return;
  start().worker.postMessage({ kind: 'run', run });
}
