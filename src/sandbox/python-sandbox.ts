/**
 * Runs model-written Python in separate, confined `python3` processes (never in the trainer).
 *
 * Confinement per execution (see isolation.ts, launch.ts and runner.ts for the mechanics):
 *   - rlimits CPU / AS / NPROC / FSIZE / CORE, a wall-clock kill of the process group;
 *   - when running as root, the worker drops to a uid of its own per slot (root is exempt from
 *     RLIMIT_NPROC, and the uid cannot write the caller's files); instances in one process get
 *     disjoint uid ranges, separate processes share them;
 *   - namespaces, strongest available first (`isolation()` says which is in force): bubblewrap
 *     (private read-only root, private /tmp, no network, own pid namespace), else `unshare --net
 *     --pid` (host filesystem visible), else a socket monkeypatch only. Each is probed once; a
 *     fallback is logged once per process;
 *   - an empty temp dir as cwd and HOME, a five-variable environment, stdin closed, output capped.
 *
 * `runTests` reproduces the reference coding reward's L3 harness (docs/environments.md "Coding
 * tests in the sandbox"): the program is exec'd once into globals seeded with `math`; each assert
 * then runs under its own timer, and after `maxTimeouts` timeouts the rest are skipped. Verdicts are computed outside the
 * process that runs model code: asserts are split into the calls (run in the sandbox, their values
 * returned as plain builtins) and the comparison (evaluated by the trusted supervisor); asserts that
 * cannot be split run whole in the sandbox and are counted as `lowTrust` (runner-judge.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { SandboxError } from './errors.js';
import { candidateIsolations, describeIsolation, type Isolation, type IsolationReport } from './isolation.js';
import { compileRunner, type Launched, launch, type Payload, type SyntaxIssue } from './launch.js';
import { type ResolvedOptions, resolveOptions, type SandboxOptions } from './options.js';
import { SlotPool } from './slot-pool.js';

export type { SyntaxIssue } from './launch.js';

/**
 * First sandbox uid when running as root. Outside every allocated range: Debian (< 65536), systemd
 * dynamic users (61184–65519) and systemd container ranges (524288–1879048191).
 */
export const SANDBOX_UID_BASE = 1_999_000_000;

/** Next unreserved uid; each instance reserves `concurrency` of them. */
let nextFreeUid = SANDBOX_UID_BASE;

/** Which limit ended the run early. */
export type KillReason = 'wall' | 'cpu' | 'memory' | 'output';

export interface TestOutcome {
  /** The assert as executed. */
  source: string;
  passed: boolean;
  /** Python exception class name; `Timeout` for the per-assert timer, `Killed` if the run was cut short here. */
  errorType?: string;
  message?: string;
  timedOut?: boolean;
  /** Not run: after `maxTimeouts` timeouts, or after the run was stopped. */
  skipped?: boolean;
  /** Could not be split into sandboxed calls and a trusted comparison: judged inside the sandbox. */
  lowTrust?: boolean;
}

export interface TestRunResult {
  /** The program parsed, compiled and ran to the end of its top level. */
  ok: boolean;
  syntaxError?: SyntaxIssue;
  loadError?: { type: string; message: string };
  /** One per given assert, in order. */
  tests: TestOutcome[];
  passed: number;
  /** Number of asserts given (skipped ones included), the reward's denominator. */
  total: number;
  timeouts: number;
  /** Asserts judged inside the sandbox (model code could forge these verdicts); the rest were judged outside. */
  lowTrust: number;
  wallMs: number;
  killed?: KillReason;
  stdout: string;
  stderr: string;
}

export interface RunResult {
  /** Exit code of the program; null when it was killed or died from a signal. */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  killed?: KillReason;
  wallMs: number;
}

/** What was found at startup; never claims more isolation than the probe verified. */
export interface SandboxInfo {
  /** `sys.executable` as seen inside the sandbox. */
  python: string;
  pythonVersion: string;
  network: 'namespace' | 'socket-patch';
  /** The strongest isolation that passed its probe (isolation.ts). */
  level: Isolation['level'];
  /** Model code sees a private read-only root and a private /tmp, none of the host's files. */
  privateFilesystem: boolean;
  /** Processes left behind die with the run's pid namespace. */
  pidNamespace: boolean;
  /** uid of slot 0 (slot i runs as firstUid + i); null when not root, so the caller's uid is kept. */
  firstUid: number | null;
  /** Why stronger isolation was not used, when it fell back. */
  fallbackReason?: string;
}

/** The per-call part of a launch; limits and isolation are added by `launchWith`. */
type Request = Pick<Payload, 'mode' | 'program' | 'programs'> & { asserts?: string[] };

/** The probe: interpreter, uid, interfaces, and whether the host path `marker` is visible. */
const probeProgram = (marker: string) =>
  [
    // fractions: a stdlib module the runner has not imported, so the dropped uid must be able to read it.
    'import fractions, json, os, socket, sys',
    'print(json.dumps({"python": sys.executable, "version": sys.version.split()[0], "uid": os.getuid(),',
    `                  "hostVisible": os.path.exists(${JSON.stringify(marker)}),`,
    '                  "interfaces": sorted(name for _, name in socket.if_nameindex())}))',
  ].join('\n');

/** Fallbacks already warned about in this process, so each is logged once. */
const warned = new Set<string>();

export class PythonSandbox {
  readonly options: ResolvedOptions;
  private readonly slots: SlotPool;
  /** uid of slot 0 if the worker drops privileges (slot i runs as firstUid + i). */
  private readonly firstUid: number;
  private setup?: Promise<{ isolation: Isolation; info: SandboxInfo }>;
  /** The runner as bytecode of the configured interpreter (compiled once, at the first use). */
  private runnerCode: Buffer | null = null;

  /** Validates options (all problems at once, `SandboxError` code `BAD_OPTIONS`); probing waits for first use. */
  constructor(options: SandboxOptions = {}) {
    this.options = resolveOptions(options);
    this.slots = new SlotPool(this.options.concurrency);
    this.firstUid = nextFreeUid;
    nextFreeUid += this.options.concurrency;
  }

  /** Probes isolation once (memoized) and reports what is in force. */
  async sandboxInfo(): Promise<SandboxInfo> {
    return (await this.ready()).info;
  }

  /** The isolation level in force and what it means, e.g. for `magrpo doctor` and run logs. */
  async isolation(): Promise<IsolationReport> {
    const info = await this.sandboxInfo();
    return describeIsolation(info.level, info.fallbackReason ? info.fallbackReason.split('; ') : []);
  }

  /**
   * Reference L3 harness: parse (`syntaxError`), exec once into `{math}` (`loadError`), then each
   * assert under `perTestTimeoutSeconds`, stopping after `maxTimeouts` timeouts. As in the reference,
   * an assert shaped `assert f(args) == expected` calls f twice (see PRE_EVAL in runner.ts).
   */
  async runTests(program: string, asserts: string[]): Promise<TestRunResult> {
    const launched = await this.execute({ mode: 'tests', program, asserts });
    return testRunResult(asserts, launched, this.options.cpuSeconds);
  }

  /** Runs `program` as `__main__`, with `stdin` as its standard input (closed when absent). */
  async run(program: string, { stdin }: { stdin?: string } = {}): Promise<RunResult> {
    return runResult(await this.execute({ mode: 'run', program }, stdin), this.options.cpuSeconds);
  }

  /** `ast.parse` in the sandbox: null when the program parses. */
  async checkSyntax(program: string): Promise<SyntaxIssue | null> {
    return (await this.checkSyntaxBatch([program]))[0];
  }

  /** `ast.parse` of many programs in one process, results in the same order. */
  async checkSyntaxBatch(programs: string[]): Promise<(SyntaxIssue | null)[]> {
    const launched = await this.execute({ mode: 'syntax', programs });
    const issues: (SyntaxIssue | null)[] = programs.map(() => null);
    let answered = 0;
    for (const event of launched.events) {
      if (event.t === 'syntax' && event.i !== undefined) {
        issues[event.i] = event.issue;
        answered += 1;
      }
    }
    if (answered !== programs.length) {
      const reason = launched.killedBy ?? `runner ended early: ${launched.stderr.slice(-500)}`;
      throw new SandboxError('RUNNER_FAILED', `syntax check answered ${answered}/${programs.length} (${reason})`);
    }
    return issues;
  }

  private ready(): Promise<{ isolation: Isolation; info: SandboxInfo }> {
    this.setup ??= this.detect();
    return this.setup;
  }

  private async execute(request: Request, stdin?: string) {
    const { isolation } = await this.ready();
    return this.launchWith(isolation, request, stdin);
  }

  private launchWith(isolation: Isolation, { asserts, ...request }: Request, stdin?: string) {
    const o = this.options;
    return this.slots.with(async (slot) => {
      const launched = await launch({
        prefix: isolation.prefix,
        python: o.python,
        wallSeconds: o.wallSeconds,
        maxOutputBytes: o.maxOutputBytes,
        stdin,
        asserts,
        privateTmp: isolation.privateTmp,
        runnerCode: this.runnerCode,
        payload: {
          ...request,
          perTestSeconds: o.perTestTimeoutSeconds,
          maxTimeouts: o.maxTimeouts,
          limits: {
            cpuSeconds: o.cpuSeconds,
            memoryBytes: o.memoryMb * 1024 * 1024,
            maxFileBytes: o.maxFileBytes,
            maxProcesses: o.maxProcesses,
          },
          uid: isolation.dropUid ? this.firstUid + slot : null,
          blockSockets: isolation.network === 'socket-patch',
          pidNamespace: isolation.pidNamespace,
        },
      });
      const fatal = launched.events.find((e) => e.t === 'fatal');
      if (fatal) throw new SandboxError('CONFINE_FAILED', `sandbox worker could not confine itself: ${fatal.message}`);
      return launched;
    });
  }

  /** Tries bwrap, then unshare, then the socket patch, as `network` allows; each must pass the probe. */
  private async detect(): Promise<{ isolation: Isolation; info: SandboxInfo }> {
    const root = process.getuid?.() === 0;
    const o = this.options;
    this.runnerCode = compileRunner(o.python);
    const { candidates, skipped } = candidateIsolations(o.network, root, o.python, o.tmpMb * 1024 * 1024);
    const failures: string[] = [...skipped];
    for (const isolation of candidates) {
      const failure = await this.probe(isolation).catch((error: Error) => ({ reason: error.message }));
      if ('info' in failure) {
        const fallbackReason = failures.length > 0 ? failures.join('; ') : undefined;
        if (failures.length > 0 && !warned.has(isolation.level)) {
          warned.add(isolation.level);
          process.emitWarning(`Python sandbox isolation: ${describeIsolation(isolation.level, failures).detail}`, 'SandboxIsolationWarning');
        }
        return { isolation, info: stripUndefined({ ...failure.info, fallbackReason }) };
      }
      failures.push(`${isolation.level}: ${failure.reason}`);
    }
    throw new SandboxError(
      'NO_ISOLATION',
      `cannot run ${this.options.python} in the sandbox (network: ${this.options.network}):\n  ${failures.join('\n  ')}`,
      [],
      this.options.python,
    );
  }

  private async probe(isolation: Isolation): Promise<{ info: SandboxInfo } | { reason: string }> {
    // A fresh host directory: a private filesystem must not show it (any fixed path might exist inside too).
    const marker = mkdtempSync(join(tmpdir(), 'magrpo-probe-'));
    let result: RunResult;
    try {
      result = runResult(await this.launchWith(isolation, { mode: 'run', program: probeProgram(marker) }), this.options.cpuSeconds);
    } finally {
      rmSync(marker, { recursive: true, force: true });
    }
    if (result.exitCode !== 0) {
      return { reason: `probe exited ${result.exitCode ?? result.signal ?? result.killed}: ${result.stderr.trim().slice(-500)}` };
    }
    const seen = JSON.parse(result.stdout) as { python: string; version: string; uid: number; interfaces: string[]; hostVisible: boolean };
    if (isolation.network === 'namespace' && seen.interfaces.join(',') !== 'lo') {
      return { reason: `namespace still shows interfaces ${seen.interfaces.join(', ')}` };
    }
    if (isolation.privateTmp && seen.hostVisible) return { reason: 'a host temp directory is still visible' };
    if (isolation.dropUid && seen.uid < this.firstUid) return { reason: `worker kept uid ${seen.uid}` };
    return {
      info: {
        python: seen.python,
        pythonVersion: seen.version,
        network: isolation.network,
        level: isolation.level,
        privateFilesystem: isolation.privateTmp,
        pidNamespace: isolation.pidNamespace,
        firstUid: isolation.dropUid ? this.firstUid : null,
      },
    };
  }
}

function exitEvent(launched: Launched) {
  for (const event of launched.events) if (event.t === 'exit') return event;
  return undefined;
}

const SIGNAL_NAMES = new Map(Object.entries(constants.signals).map(([name, n]) => [n, name as NodeJS.Signals]));

function killReason(launched: Launched, cpuSeconds: number): KillReason | undefined {
  if (launched.killedBy) return launched.killedBy;
  const exit = exitEvent(launched);
  const { SIGXCPU, SIGKILL } = constants.signals;
  if (exit && (exit.signal === SIGXCPU || (exit.signal === SIGKILL && exit.cpuSeconds >= cpuSeconds))) return 'cpu';
  if (launched.events.some((e) => e.t === 'memory')) return 'memory';
  return undefined;
}

function runResult(launched: Launched, cpuSeconds: number): RunResult {
  const exit = exitEvent(launched);
  return stripUndefined({
    exitCode: exit?.code ?? null,
    signal: exit?.signal != null ? (SIGNAL_NAMES.get(exit.signal) ?? null) : null,
    stdout: launched.stdout,
    stderr: launched.stderr,
    killed: killReason(launched, cpuSeconds),
    wallMs: launched.wallMs,
  });
}

/** Assembles per-assert outcomes; asserts the runner never reported become `Killed` (the one in flight) or skipped. */
function testRunResult(asserts: string[], launched: Launched, cpuSeconds: number): TestRunResult {
  const killed = killReason(launched, cpuSeconds);
  const reported = new Map<number, TestOutcome>();
  let syntaxError: SyntaxIssue | undefined;
  let loadError: TestRunResult['loadError'];
  let loaded = false;
  let finished = false;
  for (const event of launched.events) {
    if (event.t === 'syntax' && event.issue) syntaxError = event.issue;
    else if (event.t === 'load') loadError = { type: event.type, message: event.message };
    else if (event.t === 'loaded') loaded = true;
    else if (event.t === 'done' || event.t === 'skip' || event.t === 'memory') finished = true;
    else if (event.t === 'test') {
      const { passed, errorType, message, timedOut, lowTrust } = event;
      reported.set(event.i, { source: asserts[event.i], passed, errorType, message, timedOut, lowTrust });
    }
  }
  const inFlight = loaded && !finished ? reported.size : -1;
  const tests = asserts.map((source, i): TestOutcome => {
    const outcome = reported.get(i);
    if (outcome) return stripUndefined(outcome);
    if (i === inFlight) {
      const message = killed ? `run stopped by the ${killed} limit` : 'sandbox process ended during this assert';
      return { source, passed: false, errorType: 'Killed', message };
    }
    return { source, passed: false, skipped: true };
  });
  return stripUndefined({
    ok: loaded,
    syntaxError,
    loadError,
    tests,
    passed: tests.filter((t) => t.passed).length,
    total: asserts.length,
    timeouts: tests.filter((t) => t.timedOut).length,
    lowTrust: tests.filter((t) => t.lowTrust).length,
    wallMs: launched.wallMs,
    killed,
    stdout: launched.stdout,
    stderr: launched.stderr,
  });
}

/** Drops keys whose value is undefined so results compare cleanly with deepEqual. */
function stripUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/** The isolation a sandbox with these options gets on this machine (probes once; for `magrpo doctor`). */
export async function sandboxIsolation(options: SandboxOptions = {}): Promise<IsolationReport> {
  return new PythonSandbox({ ...options, concurrency: 1 }).isolation();
}
