/*
 * The kernels over vocabulary rows: log-softmax gathered at targets (token log-probabilities and
 * cross-entropy) with its backward, entropy, and top-k for sampling.
 */
#include <stdlib.h>

#include "magrpo.h"

/* ---------------------------------------------------------------------------------------------
 * logSoftmaxGather, logSoftmaxGatherBackward, entropy
 * ------------------------------------------------------------------------------------------- */

INLINE void log_softmax_gather_rows(int64_t lo, int64_t hi, const VocabArgs *a) {
  int64_t V = a->V;
  const float *logits = a->logits;
  const int32_t *targets = a->targets;
  float *logp = a->logp, *lse = a->lse;
  for (int64_t r = lo; r < hi; r++) {
    const float *l = logits + r * V;
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t v = 0; v < V; v++) m = l[v] > m ? l[v] : m;
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t v = 0; v < V; v++) s += fast_expf(l[v] - m);
    float lr = (float)((double)m + log(s)); /* logp uses the stored lse, as the backward does */
    lse[r] = lr;
    logp[r] = targets[r] < 0 ? 0.0f : (float)((double)l[targets[r]] - lr);
  }
}

void log_softmax_gather_forward(int64_t rows, int64_t V, const float *logits, const int32_t *targets, float *logp, float *lse) {
  VocabArgs a = {.V = V, .logits = logits, .targets = targets, .logp = logp, .lse = lse};
  PARALLEL_RANGE((double)rows * V, rows, kern->log_softmax_gather_rows, &a);
}

INLINE void log_softmax_gather_backward_rows(int64_t lo, int64_t hi, const VocabArgs *a) {
  int64_t V = a->V;
  const float *logits = a->logits, *lse = a->lse, *gLogp = a->gLogp;
  const int32_t *targets = a->targets;
  float *gLogits = a->gLogits;
  for (int64_t r = lo; r < hi; r++) {
    int32_t t = targets[r];
    float *g = gLogits + r * V;
    if (t < 0) {
      if (!a->accumulate) memset(g, 0, (size_t)V * sizeof(float));
      continue;
    }
    const float *l = logits + r * V;
    float gr = gLogp[r], lr = lse[r];
    /* simd: g and l are distinct rows (the compiler cannot know it; scalar, this loop took 4% of
     * a 1m training step). Written as 0 - x, not -x, so that both modes give the same bits. */
    if (a->accumulate) {
#pragma omp simd
      for (int64_t v = 0; v < V; v++) g[v] -= gr * fast_expf(l[v] - lr);
    } else {
#pragma omp simd
      for (int64_t v = 0; v < V; v++) g[v] = 0.0f - gr * fast_expf(l[v] - lr);
    }
    g[t] += gr;
  }
}

void log_softmax_gather_backward(int64_t rows, int64_t V, const float *logits, const float *lse, const int32_t *targets, const float *gLogp,
                                 float *gLogits, bool accumulate) {
  VocabArgs a = {.V = V, .logits = logits, .lse = (float *)lse, .targets = targets, .gLogp = gLogp, .gLogits = gLogits, .accumulate = accumulate};
  PARALLEL_RANGE((double)rows * V, rows, kern->log_softmax_gather_backward_rows, &a);
}

INLINE void entropy_rows(int64_t lo, int64_t hi, const VocabArgs *a) {
  int64_t V = a->V;
  const float *logits = a->logits, *lse = a->lse;
  float *out = a->out;
  for (int64_t r = lo; r < hi; r++) {
    const float *l = logits + r * V;
    float lr = lse[r];
    double h = 0;
#pragma omp simd reduction(+ : h)
    for (int64_t v = 0; v < V; v++) {
      float lp = l[v] - lr, p = fast_expf(lp);
      h -= p > 0.0f ? (double)(p * lp) : 0.0; /* p = 0 (a -inf logit) contributes 0, not NaN */
    }
    out[r] = (float)h;
  }
}

void entropy_forward(int64_t rows, int64_t V, const float *logits, const float *lse, float *out) {
  VocabArgs a = {.V = V, .logits = logits, .lse = (float *)lse, .out = out};
  PARALLEL_RANGE((double)rows * V, rows, kern->entropy_rows, &a);
}

SAMPLING_LOOPS(LOOP_VARIANTS)

/* ---------------------------------------------------------------------------------------------
 * topk: a size-k heap whose root is the worst kept entry ("worse" = smaller value, then larger
 * index; NaN is worse than any number), then heap-sorted into best-first order. O(n log k).
 * ------------------------------------------------------------------------------------------- */

typedef struct {
  float v;
  int32_t i;
} Entry;

static inline bool worse(Entry a, Entry b) {
  if (isnan(a.v) != isnan(b.v)) return isnan(a.v);
  if (a.v != b.v && !isnan(a.v)) return a.v < b.v;
  return a.i > b.i;
}

static void sift_down(Entry *h, int64_t k, int64_t i) {
  for (;;) {
    int64_t l = 2 * i + 1, r = l + 1, w = i;
    if (l < k && worse(h[l], h[w])) w = l;
    if (r < k && worse(h[r], h[w])) w = r;
    if (w == i) return;
    Entry t = h[i];
    h[i] = h[w];
    h[w] = t;
    i = w;
  }
}

/* Rows [lo, hi); `heaps` has k entries of scratch per row. */
typedef struct {
  int64_t n, k;
  const float *x;
  Entry *heaps;
  float *vals;
  int32_t *idx;
} TopkArgs;

static void topk_range(int64_t lo, int64_t hi, const TopkArgs *a) {
  int64_t n = a->n, k = a->k;
  const float *x = a->x;
  Entry *heaps = a->heaps;
  float *vals = a->vals;
  int32_t *idx = a->idx;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = x + r * n;
    Entry *h = heaps + r * k;
    for (int64_t i = 0; i < k; i++) h[i] = (Entry){xr[i], (int32_t)i};
    for (int64_t i = k / 2 - 1; i >= 0; i--) sift_down(h, k, i);
    for (int64_t i = k; i < n; i++) {
      Entry e = {xr[i], (int32_t)i};
      if (worse(h[0], e)) {
        h[0] = e;
        sift_down(h, k, 0);
      }
    }
    /* Pop the worst to the back: the array ends best-first. */
    for (int64_t end = k - 1; end > 0; end--) {
      Entry t = h[0];
      h[0] = h[end];
      h[end] = t;
      sift_down(h, end, 0);
    }
    for (int64_t j = 0; j < k; j++) {
      vals[r * k + j] = h[j].v;
      idx[r * k + j] = h[j].i;
    }
  }
}

bool topk_rows(int64_t rows, int64_t n, int64_t k, const float *x, float *vals, int32_t *idx) {
  if (k == 0 || rows == 0) return true;
  Entry *heaps = malloc((size_t)(rows * k) * sizeof(Entry));
  if (heaps == NULL) return false;
  TopkArgs a = {n, k, x, heaps, vals, idx};
  PARALLEL_RANGE((double)rows * n, rows, topk_range, &a);
  free(heaps);
  return true;
}
