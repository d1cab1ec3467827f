/**
 * Starts one runner process (runner.ts) and collects what it says: the only place that starts
 * sandboxed code.
 *
 * Per launch: a fresh empty temp dir as cwd and HOME (a private tmpfs inside bwrap; otherwise a
 * host temp dir owned by the sandbox uid, removed afterwards), a minimal environment, stdin closed
 * unless given, stdout/stderr capped, a wall-clock timer that SIGKILLs the whole process group, the
 * payload on fd 3, the asserts on fd 5 (read by the supervisor only after the worker is forked),
 * the runner itself on fd 6, and the verdict events on fd 4.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { SandboxError } from './errors.js';
import { PRIVATE_TMP } from './isolation.js';
import { RUNNER_SOURCE } from './runner.js';

/**
 * The `-c` program: reads the runner from fd 6, as bytecode compiled once on the host (`M` + marshal
 * data; compiling the runner's source costs ~10 ms per launch) or as source (`S` + text), and runs it
 * as `__main__`.
 */
const BOOTSTRAP = [
  'import marshal, os',
  'data = b""',
  'while True:',
  '    chunk = os.read(6, 1 << 20)',
  '    if not chunk:',
  '        break',
  '    data += chunk',
  'os.close(6)',
  'exec(marshal.loads(data[1:]) if data[:1] == b"M" else compile(data[1:], "<runner>", "exec"))',
].join('\n');

/**
 * Interpreter flags. Not `-I`: it implies `-E`, which would drop PYTHONHASHSEED=0 (deterministic set
 * order), and the environment is already minimal. Not `-S`: model code may import site-packages
 * modules, as it could under the reference's in-process exec. `-s` drops the user site, `-B` writes
 * no bytecode.
 */
const PYTHON_FLAGS = ['-s', '-B', '-c', BOOTSTRAP];

/**
 * The runner compiled by `python` on the host (trusted: no model code runs there), for fd 6; null
 * when that fails, and the source is sent instead. Same interpreter binary inside and outside the
 * sandbox, so the bytecode matches.
 */
export function compileRunner(python: string): Buffer | null {
  const compiled = spawnSync(
    python,
    ['-s', '-B', '-c', 'import marshal, sys; sys.stdout.buffer.write(marshal.dumps(compile(sys.stdin.read(), "<runner>", "exec")))'],
    {
      input: RUNNER_SOURCE,
      env: sandboxEnv(tmpdir()),
      maxBuffer: 16 * 1024 * 1024,
      timeout: 30_000,
    },
  );
  if (compiled.status !== 0 || compiled.stdout.length === 0) return null;
  return Buffer.concat([Buffer.from('M'), compiled.stdout]);
}

const RUNNER_TEXT = Buffer.from(`S${RUNNER_SOURCE}`, 'utf8');

/** Result events may hold one message per assert; past this the run is stopped as `output`. */
const MAX_EVENT_BYTES = 16 * 1024 * 1024;

/** Grace after the launched process exits for its pipes to close before they are destroyed. */
const CLOSE_GRACE_MS = 2000;

/** The whole environment of a sandboxed process; nothing of the caller's leaks. */
export function sandboxEnv(home: string): NodeJS.ProcessEnv {
  return { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', PYTHONDONTWRITEBYTECODE: '1', PYTHONHASHSEED: '0', HOME: home };
}

/** What the runner reads from fd 3 (also visible to the worker). */
export interface Payload {
  mode: 'tests' | 'run' | 'syntax';
  program?: string;
  programs?: string[];
  perTestSeconds: number;
  maxTimeouts: number;
  limits: { cpuSeconds: number; memoryBytes: number; maxFileBytes: number; maxProcesses: number };
  /** uid the worker drops to; null keeps the caller's uid. */
  uid: number | null;
  blockSockets: boolean;
  pidNamespace: boolean;
}

export interface SyntaxIssue {
  line: number;
  col: number;
  message: string;
}

/** One line on fd 4; see runner.ts for when each is written. */
export type RunnerEvent =
  | { t: 'syntax'; i?: number; issue: SyntaxIssue | null }
  | { t: 'load'; type: string; message: string }
  | { t: 'loaded' }
  | { t: 'test'; i: number; passed: boolean; errorType?: string; message?: string; timedOut?: boolean; lowTrust?: boolean }
  | { t: 'skip'; from: number }
  | { t: 'memory' }
  | { t: 'done' }
  | { t: 'fatal'; message: string }
  | { t: 'exit'; code: number | null; signal: number | null; cpuSeconds: number };

export interface Launched {
  events: RunnerEvent[];
  stdout: string;
  stderr: string;
  /** Set when this side stopped the run. */
  killedBy?: 'wall' | 'output';
  wallMs: number;
}

export interface LaunchSpec {
  /** Command in front of the interpreter, e.g. `unshare --net ...`; empty for none. */
  prefix: string[];
  python: string;
  payload: Payload;
  /** Read by the trusted supervisor from fd 5 after the worker is forked: never in model code's memory. */
  asserts?: string[];
  /** The prefix provides a private /tmp (bwrap): no host temp dir is made. */
  privateTmp?: boolean;
  /** `compileRunner`'s bytecode; the source is sent when absent. */
  runnerCode?: Buffer | null;
  wallSeconds: number;
  maxOutputBytes: number;
  stdin?: string;
}

/** Runs the runner once in a fresh temp dir that is removed afterwards, whatever happens. */
export async function launch(spec: LaunchSpec): Promise<Launched> {
  if (spec.privateTmp) return spawnRunner(spec, '/', PRIVATE_TMP);
  const dir = await mkdtemp(join(tmpdir(), 'magrpo-sandbox-'));
  try {
    const uid = spec.payload.uid;
    if (uid !== null) await chown(dir, uid, uid);
    return await spawnRunner(spec, dir, dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function spawnRunner(spec: LaunchSpec, dir: string, home: string): Promise<Launched> {
  const argv = [...spec.prefix, spec.python, ...PYTHON_FLAGS];
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(argv[0], argv.slice(1), {
      cwd: dir,
      env: sandboxEnv(home),
      detached: true, // own process group, so one kill reaches every descendant that stayed in it
      stdio: [spec.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe', 'pipe', 'pipe', 'pipe', 'pipe'],
    });
    let killedBy: Launched['killedBy'];
    const killGroup = () => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // ESRCH: the group is already gone.
      }
    };
    const stop = (reason: 'wall' | 'output') => {
      killedBy ??= reason;
      killGroup();
    };
    const wall = setTimeout(() => stop('wall'), spec.wallSeconds * 1000);
    const stdout = new CappedBytes(spec.maxOutputBytes, () => stop('output'));
    const stderr = new CappedBytes(spec.maxOutputBytes, () => stop('output'));
    const events = new EventLines(() => stop('output'));
    const streams = child.stdio as unknown as [Writable | null, Readable, Readable, Writable, Readable, Writable, Writable];
    for (const stream of streams) stream?.on('error', () => {}); // EPIPE when the child dies early
    streams[1].on('data', (chunk: Buffer) => stdout.push(chunk));
    streams[2].on('data', (chunk: Buffer) => stderr.push(chunk));
    streams[4].on('data', (chunk: Buffer) => events.push(chunk));
    streams[3].end(JSON.stringify(spec.payload));
    streams[5].end(JSON.stringify({ asserts: spec.asserts ?? [] }));
    streams[6].end(spec.runnerCode ?? RUNNER_TEXT);
    streams[0]?.end(spec.stdin);

    let settled = false;
    child.on('error', (error) => {
      if (settled) return;
      settled = true;
      clearTimeout(wall);
      killGroup();
      reject(new SandboxError('SPAWN_FAILED', `cannot start ${argv[0]}: ${error.message}`, [], argv[0]));
    });
    child.on('exit', () => {
      killGroup(); // stragglers left in the group
      setTimeout(() => {
        for (const stream of streams) stream?.destroy();
      }, CLOSE_GRACE_MS).unref();
    });
    child.on('close', () => {
      if (settled) return;
      settled = true;
      clearTimeout(wall);
      resolve({
        events: events.finish(),
        stdout: stdout.text(),
        stderr: stderr.text(),
        killedBy,
        wallMs: performance.now() - started,
      });
    });
  });
}

/** Keeps the first `cap` bytes of a stream and calls `onOverflow` once when more arrive. */
class CappedBytes {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private overflowed = false;

  constructor(
    private readonly cap: number,
    private readonly onOverflow: () => void,
  ) {}

  push(chunk: Buffer): void {
    if (this.overflowed) return;
    const room = this.cap - this.size;
    if (chunk.length <= room) {
      this.chunks.push(chunk);
      this.size += chunk.length;
      return;
    }
    this.chunks.push(chunk.subarray(0, room));
    this.size = this.cap;
    this.overflowed = true;
    this.onOverflow();
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

/** Splits fd 4 into JSON events; lines that are not JSON objects are dropped. */
class EventLines {
  private pending = '';
  private size = 0;
  private readonly events: RunnerEvent[] = [];

  constructor(private readonly onOverflow: () => void) {}

  push(chunk: Buffer): void {
    this.size += chunk.length;
    if (this.size > MAX_EVENT_BYTES) {
      this.onOverflow();
      return;
    }
    const lines = (this.pending + chunk.toString('utf8')).split('\n');
    this.pending = lines.pop() ?? '';
    for (const line of lines) this.parse(line);
  }

  finish(): RunnerEvent[] {
    this.parse(this.pending);
    this.pending = '';
    return this.events;
  }

  private parse(line: string): void {
    if (line.trim() === '') return;
    try {
      const event: unknown = JSON.parse(line);
      if (event !== null && typeof event === 'object' && 't' in event) this.events.push(event as RunnerEvent);
    } catch {
      // Not from the runner; ignore.
    }
  }
}
