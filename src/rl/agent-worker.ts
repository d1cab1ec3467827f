/** Worker-thread entry of a WorkerAgent: builds a PolicyAgent and serves its methods. */
import { parentPort, workerData } from 'node:worker_threads';
import { backend } from '../engine/runtime.js';
import { type AgentSpec, PolicyAgent } from './agent.js';

const spec = workerData as AgentSpec;
let agent: PolicyAgent | null = null;
let failure: string | null = null;
try {
  agent = new PolicyAgent(spec);
  if (spec.threads) backend().setNumThreads(spec.threads);
} catch (e) {
  failure = e instanceof Error ? e.message : String(e);
}

parentPort?.on('message', async (m: { id: number; method: string; args: unknown[] }) => {
  try {
    if (failure !== null || agent === null) throw new Error(failure ?? 'agent not built');
    const a = agent;
    let value: unknown;
    switch (m.method) {
      case 'ready':
        value = true;
        break;
      case 'sample':
        value = await a.sample(...(m.args as Parameters<PolicyAgent['sample']>));
        break;
      case 'update':
        value = await a.update(...(m.args as Parameters<PolicyAgent['update']>));
        await a.syncSampler();
        break;
      case 'sequenceLogprobs':
        value = a.sequenceLogprobs(...(m.args as Parameters<PolicyAgent['sequenceLogprobs']>));
        break;
      case 'save':
        await a.save(m.args[0] as string);
        break;
      case 'load':
        await a.load(m.args[0] as string);
        break;
      default:
        throw new Error(`unknown method ${m.method}`);
    }
    parentPort?.postMessage({ id: m.id, ok: true, value });
  } catch (e) {
    parentPort?.postMessage({ id: m.id, ok: false, error: e instanceof Error ? e.message : String(e) });
  }
});
