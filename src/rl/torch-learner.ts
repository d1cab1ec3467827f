/**
 * The client side of the PyTorch learner (learner/, learner/README.md): the Learner protocol as
 * HTTP/1.0 requests with JSON bodies, to a learner on a Unix socket (`unix:/path`, the process
 * the trainer starts itself) or on TCP (`http://host:port`, one started by hand on GPU nodes).
 * Each request is bounded in size and time; a learner that died, timed out or answered something
 * malformed is an error that says which, with the process's last stderr lines when it is ours.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { saveLora } from '../model/lora.js';
import type { LanguageModel } from '../model/pretrained.js';
import type { ValueHead } from '../model/value-head.js';
import type { ForwardBackwardResult, Learner, LearnerSpec, LossSample, OptimStepResult } from './learner.js';

/** The `trainer.learner` config block (rl/config.ts LearnerSchema, where each key is described). */
export interface LearnerConfig {
  backend: 'local' | 'torch';
  url: string | null;
  python: string | null;
  command: string[] | null;
  nproc: number;
  device: 'cpu' | 'cuda';
  parallel: 'ddp' | 'fsdp';
  dtype: 'float32' | 'float64' | 'bfloat16';
  exchange_dir: string | null;
  timeout_s: number;
  startup_timeout_s: number;
  max_message_mb: number;
}

/** Where the learner is and how to talk to it; plain data (it crosses worker boundaries). */
export interface TorchLearnerSpec {
  /** `unix:/path/to.sock` or `http://host:port`. */
  endpoint: string;
  /** A folder both sides read and write under the same path (initial and current adapters). */
  exchangeDir: string;
  dtype: 'float32' | 'float64' | 'bfloat16';
  timeoutMs: number;
  /** How long the first request keeps retrying while the learner starts. */
  startupTimeoutMs: number;
  maxMessageBytes: number;
}

/** The learner process failed, timed out, or broke the protocol. */
export class LearnerError extends Error {
  override readonly name = 'LearnerError';
  constructor(
    readonly code: 'UNREACHABLE' | 'DIED' | 'TIMEOUT' | 'TOO_LARGE' | 'MALFORMED' | 'FAILED',
    message: string,
  ) {
    super(message);
  }
}

/** Learner processes started by this thread, by endpoint: to tell "it died (exit code, stderr)" from "unreachable". */
const started = new Map<string, LearnerProcess>();

/** A learner process the trainer started (python -m magrpo_learner, under torchrun when nproc > 1). */
export class LearnerProcess {
  readonly endpoint: string;
  readonly exchangeDir: string;
  private readonly child: ChildProcess;
  private readonly stderr: string[] = [];
  exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  /** Temporary folder of the socket (and of the exchange folder when none is configured). */
  private readonly ownDir: string;

  constructor(cfg: LearnerConfig) {
    const root = learnerPackageRoot();
    this.ownDir = mkdtempSync(join(tmpdir(), 'magrpo-learner-'));
    this.exchangeDir = resolve(cfg.exchange_dir ?? join(this.ownDir, 'exchange'));
    mkdirSync(this.exchangeDir, { recursive: true });
    const sock = join(this.ownDir, 'learner.sock');
    this.endpoint = `unix:${sock}`;
    const python = cfg.python ?? defaultPython(root);
    const serve = ['-m', 'magrpo_learner', '--listen', this.endpoint, '--device', cfg.device, '--parallel', cfg.parallel];
    const argv =
      cfg.command !== null
        ? [...cfg.command, '--listen', this.endpoint]
        : cfg.nproc > 1
          ? [python, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', String(cfg.nproc), ...serve]
          : [python, ...serve];
    this.child = spawn(argv[0], argv.slice(1), {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, PYTHONPATH: [root, process.env.PYTHONPATH].filter(Boolean).join(':'), PYTHONUNBUFFERED: '1' },
    });
    const keep = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) this.stderr.push(line);
      this.stderr.splice(0, Math.max(0, this.stderr.length - 40));
    };
    this.child.stdout?.on('data', keep);
    this.child.stderr?.on('data', keep);
    this.child.on('error', (e) => {
      this.exit = { code: null, signal: null };
      this.stderr.push(`could not start ${argv[0]}: ${e.message}`);
    });
    this.child.on('exit', (code, signal) => {
      this.exit = { code, signal };
    });
    started.set(this.endpoint, this);
  }

  /** The command line's last output lines (stdout and stderr), for error messages. */
  tail(lines = 12): string {
    return this.stderr.slice(-lines).join('\n');
  }

  /** The spec agents use to reach this process. */
  spec(cfg: LearnerConfig): TorchLearnerSpec {
    return specFor(cfg, this.endpoint, this.exchangeDir);
  }

  /** Asks the learner to stop, then ends it (SIGTERM, SIGKILL after 5 s); removes its temporary folder. */
  async close(): Promise<void> {
    if (this.exit === null) {
      await call(this.endpoint, 'shutdown', {}, { timeoutMs: 5000, maxMessageBytes: 1 << 20 }).catch(() => undefined);
      const done = new Promise<void>((r) => this.child.once('exit', () => r()));
      const term = setTimeout(() => this.child.kill('SIGTERM'), 3000);
      const kill = setTimeout(() => this.child.kill('SIGKILL'), 5000);
      await Promise.race([done, new Promise((r) => setTimeout(r, 6000))]);
      clearTimeout(term);
      clearTimeout(kill);
    }
    started.delete(this.endpoint);
    rmSync(this.ownDir, { recursive: true, force: true });
  }
}

/** The TorchLearnerSpec for a learner at `endpoint` (a configured url, or a process we started). */
export function specFor(cfg: LearnerConfig, endpoint: string, exchangeDir: string): TorchLearnerSpec {
  return {
    endpoint,
    exchangeDir,
    dtype: cfg.dtype,
    timeoutMs: cfg.timeout_s * 1000,
    startupTimeoutMs: cfg.startup_timeout_s * 1000,
    maxMessageBytes: Math.round(cfg.max_message_mb * 1024 * 1024),
  };
}

/**
 * What the trainer needs for `cfg`: nothing for the local learner; for torch, the process it starts
 * (when no url is set) and the spec its agents use.
 */
export function startLearner(cfg: LearnerConfig): { process: LearnerProcess | null; spec: TorchLearnerSpec | undefined } {
  if (cfg.backend === 'local') return { process: null, spec: undefined };
  if (cfg.url !== null) return { process: null, spec: specFor(cfg, cfg.url, resolve(cfg.exchange_dir ?? mkdtempSync(join(tmpdir(), 'magrpo-learner-')))) };
  const process = new LearnerProcess(cfg);
  return { process, spec: process.spec(cfg) };
}

/** learner/ of this checkout (from src/rl or dist/src/rl). */
function learnerPackageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++, dir = dirname(dir)) if (existsSync(join(dir, 'learner', 'magrpo_learner'))) return join(dir, 'learner');
  throw new LearnerError('UNREACHABLE', 'learner/magrpo_learner not found next to this magrpo; set learner.command or run a learner and set learner.url');
}

/** The virtualenv `scripts/setup.sh --with-learner` makes, else python3 on PATH. */
function defaultPython(learnerRoot: string): string {
  const venv = join(dirname(learnerRoot), '.cache', 'venv-learner', 'bin', 'python');
  return existsSync(venv) ? venv : 'python3';
}

/** One request; rejects with a LearnerError naming the command and what went wrong. */
function call(endpoint: string, command: string, body: unknown, o: { timeoutMs: number; maxMessageBytes: number }): Promise<Record<string, unknown>> {
  const payload = Buffer.from(JSON.stringify(body), 'utf8');
  if (payload.length > o.maxMessageBytes)
    return Promise.reject(
      new LearnerError('TOO_LARGE', `${command}: request of ${payload.length} bytes exceeds learner.max_message_mb (${o.maxMessageBytes} bytes)`),
    );
  const target = endpoint.startsWith('unix:') ? { socketPath: endpoint.slice(5) } : hostPort(endpoint);
  return new Promise((resolveCall, reject) => {
    const req = request(
      { ...target, method: 'POST', path: `/v1/${command}`, agent: false, headers: { 'content-type': 'application/json', 'content-length': payload.length } },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        let tooLarge = false;
        res.on('data', (c: Buffer) => {
          if (tooLarge) return;
          size += c.length;
          if (size > o.maxMessageBytes) {
            // Reject first: destroying the request can still let 'end' fire with a cut body.
            tooLarge = true;
            reject(new LearnerError('TOO_LARGE', `${command}: reply exceeds learner.max_message_mb (${o.maxMessageBytes} bytes)`));
            req.destroy();
            return;
          }
          chunks.push(c);
        });
        res.on('end', () => {
          if (tooLarge) return;
          let parsed: unknown;
          try {
            parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          } catch {
            reject(new LearnerError('MALFORMED', `${command}: the learner's reply (HTTP ${res.statusCode}) is not JSON`));
            return;
          }
          if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
            reject(new LearnerError('MALFORMED', `${command}: the learner's reply is not a JSON object`));
            return;
          }
          const reply = parsed as Record<string, unknown>;
          if (res.statusCode !== 200 || reply.ok !== true) {
            reject(new LearnerError('FAILED', `${command}: the learner answered HTTP ${res.statusCode}: ${String(reply.error ?? '(no error message)')}`));
            return;
          }
          resolveCall(reply);
        });
        res.on('error', reject);
      },
    );
    req.setTimeout(o.timeoutMs, () =>
      req.destroy(new LearnerError('TIMEOUT', `${command}: no answer from the learner within learner.timeout_s (${o.timeoutMs / 1000} s)`)),
    );
    req.on('error', (e: NodeJS.ErrnoException) => {
      if (e instanceof LearnerError) reject(e);
      else reject(new LearnerError('UNREACHABLE', `${command}: cannot reach the learner at ${endpoint}: ${e.code ?? e.message}`));
    });
    req.end(payload);
  });
}

function hostPort(url: string): { host: string; port: number } {
  const u = new URL(url);
  if (u.protocol !== 'http:') throw new LearnerError('UNREACHABLE', `learner.url ${url}: only http:// and unix: endpoints are supported`);
  return { host: u.hostname, port: Number(u.port || 80) };
}

/** Checks a reply field; errors name the command and the field. */
function field<T>(reply: Record<string, unknown>, command: string, name: string, check: (v: unknown) => boolean, what: string): T {
  const v = reply[name];
  if (!check(v))
    throw new LearnerError(
      'MALFORMED',
      `${command}: the learner's reply field "${name}" is ${v === undefined ? 'missing' : JSON.stringify(v)?.slice(0, 80)}, expected ${what}`,
    );
  return v as T;
}
const isNum = (v: unknown) => typeof v === 'number';
const isFiniteNum = (v: unknown) => typeof v === 'number' && Number.isFinite(v);

/** What a critic model regresses per example (rl/critics.ts): the ids it reads, its target and its value at sampling time. */
export interface ValueExample {
  input: number[];
  target: number;
  oldValue: number;
}

/**
 * One agent's learner in a PyTorch learner process, or with `critic` its critic model (IAC's
 * separate critic, MAAC's shared one as agent 0's): the same model with a value head. With a
 * `head` (spec.critic for an actor, always for a critic model) the learner holds the head too, its
 * value term in the loss and its parameters in AdamW. The weights are pulled into `lm` (and
 * `head`) after each update.
 */
export class TorchLearner implements Learner {
  readonly kind = 'torch';
  private readonly created: Promise<unknown>;
  private readonly head: ValueHead | null;
  private readonly critic: boolean;

  constructor(
    private readonly spec: LearnerSpec,
    private readonly lm: LanguageModel,
    private readonly t: TorchLearnerSpec,
    o: { head?: ValueHead | null; critic?: boolean } = {},
  ) {
    this.head = o.head ?? null;
    this.critic = o.critic ?? false;
    const critic = spec.critic ?? null;
    if ((critic === null) !== (this.head === null)) throw new Error(`agent ${spec.index}: a value head needs its critic settings, and they need the head`);
    if (this.critic && critic === null) throw new Error(`agent ${spec.index}: a critic model needs a value head`);
    // The learner starts from this agent's weights: the base folder and, with LoRA, the initial
    // adapter; a value head's initial weights beside it.
    const init = join(this.agentDir, 'init');
    let initAdapter: string | null = null;
    if (spec.lora) {
      initAdapter = init;
      saveLora(lm.model, initAdapter, spec.modelDir);
    }
    if (this.head) {
      mkdirSync(init, { recursive: true });
      this.head.save(init);
    }
    this.created = this.request(
      'create_agent',
      {
        model_dir: resolve(spec.modelDir),
        init_adapter: initAdapter,
        dtype: t.dtype,
        lora: spec.lora,
        value_head:
          critic === null ? null : { type: critic.type, value_clip_range: critic.valueClipRange, value_loss_coef: critic.valueLossCoef, init: resolve(init) },
        optimizer: {
          lr: spec.lr,
          betas: spec.betas,
          eps: spec.eps,
          weight_decay: spec.weightDecay,
          max_grad_norm: spec.maxGradNorm,
          lr_scheduler: spec.lrScheduler,
          warmup_steps: spec.warmupSteps,
          total_steps: spec.totalSteps,
        },
        loss: {
          aggregation: spec.lossAggregation,
          max_new_tokens: spec.maxNewTokens,
          ppo_clip_eps: spec.ppoClipEps,
          reference_kl: spec.referenceKl,
          algorithm: spec.algorithm ?? 'magrpo',
        },
      },
      true,
    );
    this.created.catch(() => undefined); // surfaced by the first call that awaits it
  }

  private get agentDir(): string {
    const dir = join(this.t.exchangeDir, `agent_${this.spec.index}`);
    return this.critic ? join(dir, 'critic') : dir;
  }

  /** Sends one command for this agent; the first one retries while the learner is starting. */
  private async request(command: string, body: Record<string, unknown>, starting = false): Promise<Record<string, unknown>> {
    if (!starting) await this.created;
    const deadline = Date.now() + (starting ? this.t.startupTimeoutMs : 0);
    for (;;) {
      const proc = started.get(this.t.endpoint);
      if (proc?.exit) throw this.died(proc, command);
      try {
        return await call(this.t.endpoint, command, { agent: this.spec.index, ...(this.critic ? { critic: true } : {}), ...body }, this.t);
      } catch (e) {
        if (proc?.exit) throw this.died(proc, command);
        if (!(e instanceof LearnerError) || e.code !== 'UNREACHABLE' || Date.now() >= deadline) throw e;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  private died(proc: LearnerProcess, command: string): LearnerError {
    const how = proc.exit?.signal ? `was killed by ${proc.exit.signal}` : `exited with code ${proc.exit?.code}`;
    return new LearnerError('DIED', `${command}: the learner process ${how}; its last output:\n${proc.tail() || '(none)'}`);
  }

  async forwardBackward(samples: LossSample[]): Promise<ForwardBackwardResult> {
    const c = 'forward_backward';
    const reply = await this.request(c, {
      samples: samples.map((s) => ({
        prompt_ids: s.promptIds,
        completions: s.completions,
        advantages: s.advantages,
        old_logprobs: s.oldLogprobs,
        ref_logprobs: s.refLogprobs ?? null,
        token_weights: s.tokenWeights ?? null,
        preference: s.preference ? { beta: s.preference.beta, other_delta: s.preference.otherDelta, ref_delta: s.preference.refDelta } : null,
        // the value term's inputs, for an agent with a value head (MAAC's actors carry joint ones for the shared critic: not sent)
        critic: this.head && s.critic ? { old_values: s.critic.oldValues, targets: s.critic.targets } : null,
      })),
    });
    const logprobs = field<number[][][]>(reply, c, 'logprobs', Array.isArray, 'a list per sample');
    if (logprobs.length !== samples.length)
      throw new LearnerError('MALFORMED', `${c}: reply field "logprobs" has ${logprobs.length} samples, sent ${samples.length}`);
    for (const [i, s] of samples.entries()) {
      for (const [g, ids] of s.completions.entries()) {
        const got = logprobs[i]?.[g];
        if (!Array.isArray(got) || got.length !== ids.length || !got.every(isNum))
          throw new LearnerError('MALFORMED', `${c}: reply field "logprobs[${i}][${g}]" should hold ${ids.length} numbers`);
      }
    }
    return {
      loss: field(reply, c, 'loss', isFiniteNum, 'a finite number'),
      logprobs,
      entropySum: field(reply, c, 'entropy_sum', isNum, 'a number'),
      tokens: field(reply, c, 'tokens', Number.isInteger, 'an integer'),
      sequences: field(reply, c, 'sequences', Number.isInteger, 'an integer'),
      kl: field(reply, c, 'kl', (v) => v === null || isNum(v), 'a number or null'),
      clipFraction: field(reply, c, 'clip_fraction', isNum, 'a number'),
      ...(this.head ? { valueLoss: field<number>(reply, c, 'value_loss', isFiniteNum, 'a finite number (the agent has a value head)') } : {}),
    };
  }

  /**
   * A critic model's minibatch: value_loss_coef · mean over `examples` of the (clipped) value
   * error at each input's last token, its gradient accumulated as forwardBackward's. Returns the
   * mean value error.
   */
  async valueForwardBackward(examples: readonly ValueExample[]): Promise<{ valueLoss: number }> {
    const c = 'value_forward_backward';
    const reply = await this.request(c, { examples: examples.map((e) => ({ ids: e.input, target: e.target, old_value: e.oldValue })) });
    return { valueLoss: field(reply, c, 'value_loss', isFiniteNum, 'a finite number') };
  }

  async optimStep(): Promise<OptimStepResult> {
    const c = 'optim_step';
    const reply = await this.request(c, {});
    const gradNorm = field<number>(reply, c, 'grad_norm', isNum, 'a number');
    if (!Number.isFinite(gradNorm))
      throw new Error(`agent ${this.spec.index}: gradient norm is ${gradNorm}; refusing to update (check rewards and learning rate)`);
    return { gradNorm, lr: field(reply, c, 'lr', isFiniteNum, 'a finite number'), step: field(reply, c, 'step', Number.isInteger, 'an integer') };
  }

  async saveAdapter(dir: string): Promise<void> {
    await this.request('save_adapter', { dir: resolve(dir) });
  }

  /** Writes the current weights (and value head) to the exchange folder and returns it (for the agent to load). */
  async pullWeights(): Promise<string> {
    const dir = join(this.agentDir, 'current');
    await this.saveAdapter(dir);
    return dir;
  }

  /**
   * Sets the learner's trainable weights (and value head) to this side's `lm` (and head) as they
   * are now; the optimizer state is untouched. For weights changed after the learner was created
   * (the parity tests set fixtures' starting weights this way).
   */
  async pushWeights(): Promise<void> {
    const dir = join(this.agentDir, 'push');
    if (this.spec.lora) saveLora(this.lm.model, dir, this.spec.modelDir);
    else this.lm.save(dir);
    mkdirSync(dir, { recursive: true });
    this.head?.save(dir);
    await this.request('load_weights', { dir: resolve(dir) });
  }

  async saveState(dir: string): Promise<void> {
    await this.request('save_state', { dir: resolve(dir) });
  }

  async loadState(dir: string): Promise<void> {
    await this.request('load_state', { dir: resolve(dir) });
  }

  async close(): Promise<void> {}
}
