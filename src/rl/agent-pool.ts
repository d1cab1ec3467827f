/**
 * Agents behind one async interface: in-process (`parallel_training: none`: agents on one base
 * model sample in one batch, `sampleEach`; updates take turns and share the BLAS threads) or one
 * worker thread per agent (`mp`, like the reference library's per-agent workers). Callers get
 * results in agent order either way; the first failure is re-raised after every agent has finished
 * its task.
 */
import { cpus } from 'node:os';
import { Worker } from 'node:worker_threads';
import { backend } from '../engine/runtime.js';
import { type AgentSpec, type LossSample, PolicyAgent, type SampledGroup, type SamplingParams, type UpdateStats } from './agent.js';
import type { SampleRequest } from './sampler.js';

export interface AgentHandle {
  readonly index: number;
  sample(requests: SampleRequest[], params: SamplingParams): Promise<SampledGroup[]>;
  update(minibatches: LossSample[][]): Promise<UpdateStats>;
  /** Σ_t log π of each completion of each sample, current weights, no gradient (PolicyAgent.sequenceLogprobs). */
  sequenceLogprobs(samples: LossSample[]): Promise<number[][]>;
  save(dir: string): Promise<void>;
  load(dir: string): Promise<void>;
  close(): Promise<void>;
}

/** The agent lives in this thread; calls run one after another. */
export class LocalAgent implements AgentHandle {
  readonly agent: PolicyAgent;
  constructor(spec: AgentSpec) {
    this.agent = new PolicyAgent(spec);
  }
  get index(): number {
    return this.agent.spec.index;
  }
  async sample(requests: SampleRequest[], params: SamplingParams) {
    return this.agent.sample(requests, params);
  }
  async update(minibatches: LossSample[][]) {
    const stats = await this.agent.update(minibatches);
    // A remote sampler gets the new weights right away (rl/sampler.ts).
    await this.agent.syncSampler();
    return stats;
  }
  async sequenceLogprobs(samples: LossSample[]) {
    return this.agent.sequenceLogprobs(samples);
  }
  async save(dir: string) {
    await this.agent.save(dir);
  }
  async load(dir: string) {
    await this.agent.load(dir);
  }
  async close() {}
}

type Pending = { resolve: (v: unknown) => void; reject: (e: Error) => void };

/** The agent lives in its own worker thread with its own kernels and RNG. */
export class WorkerAgent implements AgentHandle {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private readonly ready: Promise<unknown>;

  constructor(readonly spec: AgentSpec) {
    const here = import.meta.url;
    const workerUrl = new URL(`./agent-worker.${here.endsWith('.ts') ? 'ts' : 'js'}`, here);
    this.worker = here.endsWith('.ts')
      ? // Running from TypeScript sources (tests, dev): register tsx's loader inside the worker first.
        new Worker(`import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(workerUrl.href)}); })`, { eval: true, workerData: spec })
      : new Worker(workerUrl, { workerData: spec });
    this.worker.on('message', (m: { id: number; ok: boolean; value?: unknown; error?: string }) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.ok) p.resolve(m.value);
      else p.reject(new Error(`agent ${spec.index} (worker): ${m.error}`));
    });
    this.worker.on('error', (e) => {
      for (const p of this.pending.values()) p.reject(new Error(`agent ${spec.index} worker crashed: ${e.message}`));
      this.pending.clear();
    });
    this.ready = this.call('ready');
  }

  get index(): number {
    return this.spec.index;
  }

  private call(method: string, ...args: unknown[]): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, method, args });
    });
  }

  async sample(requests: SampleRequest[], params: SamplingParams) {
    await this.ready;
    return (await this.call('sample', requests, params)) as SampledGroup[];
  }
  async update(minibatches: LossSample[][]) {
    await this.ready;
    return (await this.call('update', minibatches)) as UpdateStats;
  }
  async sequenceLogprobs(samples: LossSample[]) {
    await this.ready;
    return (await this.call('sequenceLogprobs', samples)) as number[][];
  }
  async save(dir: string) {
    await this.ready;
    await this.call('save', dir);
  }
  async load(dir: string) {
    await this.ready;
    await this.call('load', dir);
  }
  async close() {
    await this.worker.terminate();
  }
}

/** Creates the team's agents; in `mp` mode each worker gets an equal share of the cores. */
export function createAgents(specs: AgentSpec[], mode: 'none' | 'mp'): AgentHandle[] {
  if (mode === 'none' || specs.length === 1) return specs.map((s) => new LocalAgent(s));
  const threads = Math.max(1, Math.floor(cpus().length / specs.length));
  return specs.map((s) => new WorkerAgent({ ...s, backend: s.backend ?? backend().name, threads }));
}

/**
 * Every agent's `sample` of its own requests: agents of this thread that share a base model
 * sample in one batch (PolicyAgent.sampleEach), the others (worker threads) concurrently.
 */
export async function sampleEach(agents: AgentHandle[], requests: (a: AgentHandle) => SampleRequest[], params: SamplingParams): Promise<SampledGroup[][]> {
  if (agents.every((a) => a instanceof LocalAgent)) {
    return PolicyAgent.sampleEach(
      agents.map((a) => (a as LocalAgent).agent),
      agents.map(requests),
      params,
    );
  }
  return forEachAgent(agents, (a) => a.sample(requests(a), params));
}

/** Runs one task per agent concurrently; results in agent order; the first error after all finish. */
export async function forEachAgent<T>(agents: AgentHandle[], task: (a: AgentHandle) => Promise<T>): Promise<T[]> {
  const settled = await Promise.allSettled(agents.map(task));
  const failed = settled.find((s) => s.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
  return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
}
