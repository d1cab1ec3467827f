/**
 * Off-policy correction for completions sampled elsewhere (inference servers, rollout.backend
 * openai): truncated importance sampling (TIS; Yao et al., "Your efficient RL framework secretly
 * brings you off-policy RL training", 2025). The sampler's and the learner's log-probs of the same
 * tokens differ (other kernels, precision, a stale adapter); each token's policy-gradient term is
 * weighted by w = min(exp(log π_learner,old − log π_sampler), C). With the local sampler both are
 * the same numbers and nothing is weighted.
 */

/** Running |Δ log p| and weight statistics over the tokens of one update. */
export class TisStats {
  private sum = 0;
  private max = 0;
  private tokens = 0;
  private weight = 0;
  private clipped = 0;

  record(diff: number, weight: number, clipped: boolean): void {
    const a = Math.abs(diff);
    this.sum += a;
    this.max = Math.max(this.max, a);
    this.tokens++;
    this.weight += weight;
    if (clipped) this.clipped++;
  }

  /** Metrics since the last call (none if no token was compared), then reset. */
  take(): Record<string, number> {
    const out: Record<string, number> = {};
    if (this.tokens > 0) {
      out.rollout_logprob_diff_mean = this.sum / this.tokens;
      out.rollout_logprob_diff_max = this.max;
      out.rollout_tis_weight_mean = this.weight / this.tokens;
      out.rollout_tis_clip_frac = this.clipped / this.tokens;
    }
    Object.assign(this, { sum: 0, max: 0, tokens: 0, weight: 0, clipped: 0 });
    return out;
  }
}

/**
 * Per loss token t (sequences concatenated as `sequenceOf` says): w_t = min(exp(old − sampler), cap),
 * 1 where the sampler gave no per-token log-probs (an empty or misaligned list). Returns null when
 * there are no sampler log-probs at all (local sampling): the caller leaves the loss untouched.
 * `cap` null measures the gap but weights nothing (all 1).
 */
export function tisWeights(
  samplerLogprobs: readonly (readonly number[])[] | undefined,
  oldLogprobs: readonly (readonly number[])[],
  sequenceOf: Int32Array,
  cap: number | null,
  stats: TisStats,
): Float64Array | null {
  if (!samplerLogprobs) return null;
  const w = new Float64Array(sequenceOf.length).fill(1);
  const pos = new Array<number>(oldLogprobs.length).fill(0);
  for (let t = 0; t < w.length; t++) {
    const g = sequenceOf[t];
    const k = pos[g]++;
    const s = samplerLogprobs[g];
    if (!s || s.length !== oldLogprobs[g].length) continue;
    const d = oldLogprobs[g][k] - s[k];
    const ratio = Math.exp(d);
    if (cap !== null) w[t] = Math.min(ratio, cap);
    stats.record(d, w[t], cap !== null && ratio > cap);
  }
  return w;
}
