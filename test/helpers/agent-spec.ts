import type { AgentSpec } from '../../src/rl/agent.js';

/** An AgentSpec for tests: plain SGD-like settings (lr 0, no clipping, no KL, no LoRA), with `over` on top. */
export function agentSpec(modelDir: string, over: Partial<AgentSpec> = {}): AgentSpec {
  return {
    index: 0,
    modelDir,
    seed: 1,
    lr: 0,
    weightDecay: 0,
    betas: [0.9, 0.999],
    eps: 1e-8,
    maxGradNorm: null,
    lrScheduler: 'constant',
    warmupSteps: 0,
    totalSteps: 1,
    lora: null,
    lossAggregation: 'sequence_sum',
    maxNewTokens: 4,
    ppoClipEps: null,
    referenceKl: null,
    ...over,
  };
}
