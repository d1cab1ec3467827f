/**
 * Returns, credit assignment and advantages: the arithmetic of CoMLRL's
 * `compute_returns`, `post_order_update` and `_compute_advantages` (comlrl/trainers/reinforce/magrpo.py) and
 * comlrl/utils/reference_kl.py as pure functions over plain arrays (docs/algorithms.md has the equations).
 */

export type AdvantageMode = 'mean' | 'raw' | 'max' | 'rloo';

/**
 * Joint returns of one node (CoMLRL `compute_returns`): R^k = r^k + γ · mean_j R_child(k)^j, or R^k = r^k when
 * joint action k has no child (leaf, or early termination).
 */
export function jointReturns(rewards: readonly number[], childReturns: readonly (readonly number[] | null)[], gamma: number): number[] {
  return rewards.map((r, k) => {
    const child = childReturns[k];
    return child && child.length > 0 ? r + gamma * mean(child) : r;
  });
}

/**
 * Agent i's returns vector over its G completions at a node (CoMLRL `post_order_update`).
 * aligned: joint action k used completion k of every agent, so returns_i = R.
 * cross: joint action k = (g_0, …, g_{N−1}); completion g of agent i is credited with the mean
 * (magrpo default) or sum (reference) of the returns of the G^{N−1} joint actions it is part of.
 */
export function agentReturns(joint: readonly number[], indices: readonly (readonly number[])[], agent: number, G: number, credit: 'mean' | 'sum'): number[] {
  const sums = new Array<number>(G).fill(0);
  const counts = new Array<number>(G).fill(0);
  for (const [k, idx] of indices.entries()) {
    sums[idx[agent]] += joint[k];
    counts[idx[agent]] += 1;
  }
  return credit === 'sum' ? sums : sums.map((s, g) => (counts[g] ? s / counts[g] : 0));
}

/** Agent `agent`'s value of a key that is one value for all agents or a list with one per agent. */
export function perAgent<T>(value: T | T[], agent: number): T {
  return Array.isArray(value) ? (value.length === 1 ? value[0] : value[agent]) : value;
}

/** Reference-KL reward shaping (comlrl/utils/reference_kl.py): R'_g = R_g − β · KL_g (KL detached). */
export function shapeWithKl(returns: readonly number[], kl: readonly number[] | null, beta: number): number[] {
  return returns.map((r, g) => r - beta * (kl?.[g] ?? 0));
}

/**
 * Advantages of one node sample (CoMLRL `_compute_advantages`):
 *   mean: A = R − mean(R)           (MAGRPO)      raw:  A = R            (MAREINFORCE)
 *   max:  A = R − max(R)            (MAReMax)     rloo: A = R − mean_{j≠g} R_j (MARLOO)
 * then, if `normalize` and G > 1, A ← (A − mean A) / max(std_pop A, 1e-6).
 */
export function advantages(R: readonly number[], mode: AdvantageMode, normalize: boolean): number[] {
  const G = R.length;
  const m = mean(R);
  let A: number[];
  switch (mode) {
    case 'mean':
      A = R.map((r) => r - m);
      break;
    case 'raw':
      A = [...R];
      break;
    case 'max': {
      const mx = Math.max(...R);
      A = R.map((r) => r - mx);
      break;
    }
    case 'rloo': {
      const total = R.reduce((s, r) => s + r, 0);
      A = G > 1 ? R.map((r) => (G * r - total) / (G - 1)) : R.map((r) => r - m);
      break;
    }
  }
  if (normalize && G > 1) {
    const am = mean(A);
    const std = Math.sqrt(A.reduce((s, a) => s + (a - am) ** 2, 0) / G);
    A = A.map((a) => (a - am) / Math.max(std, 1e-6));
  }
  return A;
}

export function mean(xs: readonly number[]): number {
  return xs.length === 0 ? 0 : xs.reduce((s, x) => s + x, 0) / xs.length;
}

/** How a tree node pairs the agents' G completions into joint actions. */
export type JointMode = 'aligned' | 'cross';

/** K, the joint actions of one tree node: G aligned (the k-th completions together), G^N cross (every combination; = G for N = 1). */
export function jointActionsPerNode(mode: JointMode, N: number, G: number): number {
  return mode === 'cross' ? G ** N : G;
}

/**
 * The turn of each node of one item's full rollout tree (K joint actions per node, `numTurns`
 * levels), in env-step order (depth-first pre-order) as the buffers receive them; its length is
 * the tree's node count, Σ_{t<T} K^t.
 */
export function treeNodeTurns(K: number, numTurns: number): number[] {
  const order: number[] = [];
  const visit = (t: number): void => {
    order.push(t);
    if (t + 1 < numTurns) for (let k = 0; k < K; k++) visit(t + 1);
  };
  if (numTurns > 0) visit(0);
  return order;
}

/** Index tuples of a node's joint actions: aligned (k,…,k) or the Cartesian product, last agent fastest. */
export function jointIndices(mode: JointMode, N: number, G: number): number[][] {
  if (mode === 'aligned' || N === 1) return Array.from({ length: G }, (_, k) => new Array<number>(N).fill(k));
  const out: number[][] = [];
  const idx = new Array<number>(N).fill(0);
  for (let k = 0; k < jointActionsPerNode(mode, N, G); k++) {
    out.push([...idx]);
    for (let a = N - 1; a >= 0; a--) {
      if (++idx[a] < G) break;
      idx[a] = 0;
    }
  }
  return out;
}

/** Schulman's k3 estimate of one token's KL(π‖π_ref): exp(d) − d − 1 with d = log π_ref − log π (≥ 0). */
export function k3(policyLogprob: number, refLogprob: number): number {
  const d = refLogprob - policyLogprob;
  return Math.exp(d) - d - 1;
}

/** The k3 estimate of KL(π‖π_ref) from per-token log-probs, summed over tokens (≥ 0). */
export function klK3(policyLogprobs: ArrayLike<number>, refLogprobs: ArrayLike<number>): number {
  let kl = 0;
  for (let t = 0; t < policyLogprobs.length; t++) kl += k3(policyLogprobs[t], refLogprobs[t]);
  return kl;
}
