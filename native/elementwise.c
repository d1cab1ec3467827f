/*
 * Elementwise kernels: binary ops with broadcasting, unary ops (activations) and their
 * gradients, axpy, scale, sums, strided copies, SwiGLU, embedding lookup.
 */
#include <stdlib.h>

#include "magrpo.h"

/* ---------------------------------------------------------------------------------------------
 * binary: strided, broadcasting elementwise op into a dense output
 * ------------------------------------------------------------------------------------------- */

/* Inner loop over `len` elements, specialised on the common stride patterns. */
#define BINARY_INNER(EXPR)                                                        \
  do {                                                                            \
    if (sa == 1 && sb == 1)                                                       \
      for (int64_t j = 0; j < len; j++) { float x = pa[j], y = pb[j]; po[j] = EXPR; } \
    else if (sa == 1 && sb == 0) {                                                \
      float y = pb[0];                                                            \
      for (int64_t j = 0; j < len; j++) { float x = pa[j]; po[j] = EXPR; }        \
    } else if (sa == 0 && sb == 1) {                                              \
      float x = pa[0];                                                            \
      for (int64_t j = 0; j < len; j++) { float y = pb[j]; po[j] = EXPR; }        \
    } else                                                                        \
      for (int64_t j = 0; j < len; j++) { float x = pa[j * sa], y = pb[j * sb]; po[j] = EXPR; } \
  } while (0)

/* Rows [lo, hi) of the view; a row is a multi-index over all dims but the last. */
INLINE void binary_rows(int64_t lo, int64_t hi, const BinaryArgs *v) {
  const float *a = v->a, *b = v->b;
  float *out = v->out;
  int rank = v->rank;
  const int64_t *shape = v->shape, *as = v->as, *bs = v->bs;
  int64_t len = shape[rank - 1], sa = as[rank - 1], sb = bs[rank - 1];
  int64_t idx[MAX_RANK] = {0};
  int64_t oa = 0, ob = 0, rem = lo;
  for (int d = rank - 2; d >= 0; d--) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
    oa += idx[d] * as[d];
    ob += idx[d] * bs[d];
  }
  for (int64_t row = lo; row < hi; row++) {
    const float *pa = a + oa, *pb = b + ob;
    float *po = out + row * len;
    switch (v->op) {
      case OP_ADD: BINARY_INNER(x + y); break;
      case OP_SUB: BINARY_INNER(x - y); break;
      case OP_MUL: BINARY_INNER(x * y); break;
      default: BINARY_INNER(x / y); break;
    }
    for (int d = rank - 2; d >= 0; d--) {
      oa += as[d];
      ob += bs[d];
      if (++idx[d] < shape[d]) break;
      oa -= shape[d] * as[d];
      ob -= shape[d] * bs[d];
      idx[d] = 0;
    }
  }
}

void binary_forward(int op, int rank, const int64_t *shape, const float *a, const int64_t *as, const float *b, const int64_t *bs, float *out) {
  double n = 1;
  for (int d = 0; d < rank; d++) n *= (double)shape[d];
  if (n == 0) return;
  /* Drop size-1 dims and merge neighbours that are contiguous in both inputs (out is dense). */
  BinaryArgs v = {.op = op, .rank = 0, .a = a, .b = b, .out = out};
  for (int d = 0; d < rank; d++) {
    int r = v.rank;
    if (shape[d] == 1) continue;
    if (r > 0 && v.as[r - 1] == as[d] * shape[d] && v.bs[r - 1] == bs[d] * shape[d]) {
      v.shape[r - 1] *= shape[d];
      v.as[r - 1] = as[d];
      v.bs[r - 1] = bs[d];
    } else {
      v.shape[r] = shape[d], v.as[r] = as[d], v.bs[r] = bs[d];
      v.rank++;
    }
  }
  if (v.rank == 0) v.shape[0] = 1, v.as[0] = 0, v.bs[0] = 0, v.rank = 1;
  PARALLEL_RANGE(n, (int64_t)n / v.shape[v.rank - 1], kern->binary_rows, &v);
}

/* ---------------------------------------------------------------------------------------------
 * unary, unaryBackward
 * ------------------------------------------------------------------------------------------- */

/* GELU tanh approximation, via 0.5·(1 + tanh u) = sigmoid(2u), which does not cancel for x ≪ 0. */
#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f
INLINE float gelu_(float x) {
  float u = GELU_K * (x + GELU_C * x * x * x);
  return x * sigmoidf_(2.0f * u);
}
INLINE float gelu_grad(float x) {
  float u = GELU_K * (x + GELU_C * x * x * x);
  float du = GELU_K * (1.0f + 3.0f * GELU_C * x * x);
  float q, s = sigmoid_pair(2.0f * u, &q), t = s * q; /* 1 - tanh² u = 4 s (1 - s) */
  return s + (t == 0.0f ? 0.0f : 2.0f * x * t * du); /* t = 0 guards inf·0 when x² overflows */
}

#define UNARY_LOOP(EXPR)                     \
  for (int64_t i = lo; i < hi; i++) {        \
    float v = x[i];                          \
    out[i] = EXPR;                           \
  }                                          \
  break

INLINE void unary_range(int64_t lo, int64_t hi, const UnaryArgs *a) {
  const float *x = a->x;
  float *out = a->out;
  switch (a->op) {
    case U_GELU: UNARY_LOOP(gelu_(v));
    case U_SILU: UNARY_LOOP(v * sigmoidf_(v));
    case U_RELU: UNARY_LOOP(v > 0.0f ? v : 0.0f);
    case U_EXP: UNARY_LOOP(fast_expf(v));
    case U_LOG: UNARY_LOOP(logf(v));
    case U_TANH: UNARY_LOOP(tanhf(v));
    case U_NEG: UNARY_LOOP(-v);
    case U_SQRT: UNARY_LOOP(sqrtf(v));
    default: UNARY_LOOP(v * v);
  }
}

void unary_forward(int op, int64_t n, const float *x, float *out) {
  UnaryArgs a = {.op = op, .x = x, .out = out};
  PARALLEL_RANGE(n, n, kern->unary_range, &a);
}

/* gx += gy · f'(v), v = x[i]. */
#define UNARY_BACK_LOOP(DERIV)               \
  for (int64_t i = lo; i < hi; i++) {        \
    float v = x[i];                          \
    gx[i] += gy[i] * (DERIV);                \
  }                                          \
  break

INLINE float silu_grad(float v) {
  float q, s = sigmoid_pair(v, &q);
  return s * (1.0f + v * q);
}

INLINE float tanh_grad(float v) {
  float t = tanhf(v);
  return 1.0f - t * t;
}

INLINE void unary_backward_range(int64_t lo, int64_t hi, const UnaryArgs *a) {
  const float *x = a->x, *gy = a->gy;
  float *gx = a->out;
  switch (a->op) {
    case U_GELU: UNARY_BACK_LOOP(gelu_grad(v));
    case U_SILU: UNARY_BACK_LOOP(silu_grad(v));
    case U_RELU: UNARY_BACK_LOOP(v > 0.0f ? 1.0f : 0.0f);
    case U_EXP: UNARY_BACK_LOOP(fast_expf(v));
    case U_LOG: UNARY_BACK_LOOP(1.0f / v);
    case U_TANH: UNARY_BACK_LOOP(tanh_grad(v));
    case U_NEG:
      for (int64_t i = lo; i < hi; i++) gx[i] -= gy[i];
      break;
    case U_SQRT: UNARY_BACK_LOOP(0.5f / sqrtf(v));
    default: UNARY_BACK_LOOP(2.0f * v);
  }
}

void unary_backward(int op, int64_t n, const float *x, const float *gy, float *gx) {
  UnaryArgs a = {.op = op, .x = x, .gy = gy, .out = gx};
  PARALLEL_RANGE(n, n, kern->unary_backward_range, &a);
}

/* ---------------------------------------------------------------------------------------------
 * axpy, scale, sumSquares, reduceSum
 * ------------------------------------------------------------------------------------------- */

/* In double so that alpha keeps all its bits, as in the reference. */
INLINE void axpy_range(int64_t lo, int64_t hi, const AxpyArgs *a) {
  double alpha = a->alpha;
  const float *x = a->x;
  float *y = a->y;
  for (int64_t i = lo; i < hi; i++) y[i] = (float)((double)y[i] + alpha * (double)x[i]);
}

void axpy_f32(int64_t n, double alpha, const float *x, float *y) {
  AxpyArgs a = {alpha, x, y};
  PARALLEL_RANGE(n, n, kern->axpy_range, &a);
}

INLINE void scale_range(int64_t lo, int64_t hi, const AxpyArgs *a) {
  double alpha = a->alpha;
  float *y = a->y;
  for (int64_t i = lo; i < hi; i++) y[i] = (float)((double)y[i] * alpha);
}

void scale_f32(int64_t n, double alpha, float *x) {
  AxpyArgs a = {alpha, NULL, x};
  PARALLEL_RANGE(n, n, kern->scale_range, &a);
}

INLINE void sum_squares_range(int64_t lo, int64_t hi, const SumSquaresArgs *a) {
  const float *x = a->x;
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = lo; i < hi; i++) s += (double)x[i] * (double)x[i];
  *a->sum = s;
}

typedef struct {
  int64_t n;
  const float *x;
  double *part; /* one per slice, zeroed: a team smaller than asked leaves the rest 0 */
} SumSquaresJob;

static void sum_squares_task(int t, int T, void *ctx) {
  const SumSquaresJob *j = ctx;
  SumSquaresArgs a = {j->x, &j->part[t]};
  kern->sum_squares_range(j->n * t / T, j->n * (t + 1) / T, &a);
}

double sum_squares(int64_t n, const float *x) {
  double s = 0;
  int T = threads();
  double *part = n >= PAR_MIN && T > 1 && team_size() == 1 ? calloc((size_t)T, sizeof(double)) : NULL;
  if (part != NULL) {
    SumSquaresJob j = {n, x, part};
    parallel_run(T, sum_squares_task, &j);
    for (int i = 0; i < T; i++) s += part[i];
    free(part);
    return s;
  }
  SumSquaresArgs a = {x, &s};
  kern->sum_squares_range(0, n, &a);
  return s;
}

#define RS_BLOCK 256

/* Tasks [lo, hi) of reduceSum: task t sums block t % blocks of RS_BLOCK columns of slab t / blocks. */
INLINE void reduce_sum_range(int64_t lo, int64_t hi, const ReduceSumArgs *a) {
  int64_t len = a->len, inner = a->inner;
  const float *x = a->x;
  float *out = a->out;
  bool acc = a->acc;
  int64_t blocks = (inner + RS_BLOCK - 1) / RS_BLOCK;
  for (int64_t t = lo; t < hi; t++) {
    int64_t o = t / blocks, j0 = (t % blocks) * RS_BLOCK, j1 = j0 + RS_BLOCK < inner ? j0 + RS_BLOCK : inner;
    const float *xo = x + o * len * inner;
    float *po = out + o * inner;
    if (inner == 1) {
      double s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t l = 0; l < len; l++) s += xo[l];
      po[0] = acc ? (float)(po[0] + s) : (float)s;
      continue;
    }
    double s[RS_BLOCK] = {0};
    for (int64_t l = 0; l < len; l++) {
      const float *row = xo + l * inner;
      for (int64_t j = j0; j < j1; j++) s[j - j0] += row[j];
    }
    for (int64_t j = j0; j < j1; j++) po[j] = acc ? (float)(po[j] + s[j - j0]) : (float)s[j - j0];
  }
}

void reduce_sum(int64_t outer, int64_t len, int64_t inner, const float *x, float *out, bool acc) {
  int64_t tasks = outer * ((inner + RS_BLOCK - 1) / RS_BLOCK);
  ReduceSumArgs a = {len, inner, acc, x, out};
  PARALLEL_RANGE((double)outer * len * inner, tasks, kern->reduce_sum_range, &a);
}

/* ---------------------------------------------------------------------------------------------
 * copy2d: strided row copies (slices, concatenation, KV-cache writes, broadcast rows)
 * ------------------------------------------------------------------------------------------- */

INLINE void copy2d_rows(int64_t lo, int64_t hi, const Copy2dArgs *a) {
  int64_t cols = a->cols, lds = a->lds, ldd = a->ldd;
  const float *src = a->src;
  float *dst = a->dst;
  bool acc = a->acc;
  for (int64_t r = lo; r < hi; r++) {
    const float *s = src + r * lds;
    float *d = dst + r * ldd;
    if (acc) {
#pragma omp simd
      for (int64_t j = 0; j < cols; j++) d[j] += s[j];
    } else {
      memcpy(d, s, (size_t)cols * sizeof(float));
    }
  }
}

void copy2d(int64_t rows, int64_t cols, const float *src, int64_t lds, float *dst, int64_t ldd, bool acc) {
  if (rows == 0 || cols == 0) return;
  Copy2dArgs a = {cols, lds, ldd, acc, src, dst};
  PARALLEL_RANGE((double)rows * cols, rows, kern->copy2d_rows, &a);
}

/* ---------------------------------------------------------------------------------------------
 * swiglu, swigluBackward
 * ------------------------------------------------------------------------------------------- */

INLINE void swiglu_range(int64_t lo, int64_t hi, const SwigluArgs *a) {
  const float *g = a->gate, *u = a->up;
  float *out = a->out;
  for (int64_t i = lo; i < hi; i++) out[i] = g[i] * sigmoidf_(g[i]) * u[i];
}

void swiglu_forward(int64_t n, const float *gate, const float *up, float *out) {
  SwigluArgs a = {.gate = gate, .up = up, .out = out};
  PARALLEL_RANGE(n, n, kern->swiglu_range, &a);
}

INLINE void swiglu_backward_range(int64_t lo, int64_t hi, const SwigluArgs *a) {
  const float *g = a->gate, *u = a->up, *gy = a->gy;
  float *gg = a->gGate, *gu = a->gUp;
  /* Written rather than added where the gradients are new: no zero fill before, no read here. */
  if (a->acc)
    for (int64_t i = lo; i < hi; i++) {
      float x = g[i], q, s = sigmoid_pair(x, &q);
      gg[i] += gy[i] * u[i] * s * (1.0f + x * q);
      gu[i] += gy[i] * x * s;
    }
  else
    for (int64_t i = lo; i < hi; i++) {
      float x = g[i], q, s = sigmoid_pair(x, &q);
      gg[i] = gy[i] * u[i] * s * (1.0f + x * q);
      gu[i] = gy[i] * x * s;
    }
}

void swiglu_backward(int64_t n, const float *gate, const float *up, const float *gy, float *gGate, float *gUp, bool acc) {
  SwigluArgs a = {.gate = gate, .up = up, .gy = gy, .gGate = gGate, .gUp = gUp, .acc = acc};
  PARALLEL_RANGE(n, n, kern->swiglu_backward_range, &a);
}

/* ---------------------------------------------------------------------------------------------
 * embedding, embeddingBackward
 * ------------------------------------------------------------------------------------------- */

typedef struct {
  int64_t C;
  const int32_t *ids;
  const float *W;
  float *out;
} EmbeddingRowsArgs;

static void embedding_rows(int64_t lo, int64_t hi, const EmbeddingRowsArgs *a) {
  for (int64_t i = lo; i < hi; i++) memcpy(a->out + i * a->C, a->W + (int64_t)a->ids[i] * a->C, (size_t)a->C * sizeof(float));
}

void embedding_forward(int64_t n, int64_t C, const int32_t *ids, const float *W, float *out) {
  EmbeddingRowsArgs a = {C, ids, W, out};
  PARALLEL_RANGE((double)n * C, n, embedding_rows, &a);
}

/* Column blocks [lo, hi): repeated ids stay race-free and summed in the reference's order. */
INLINE void embedding_backward_blocks(int64_t lo, int64_t hi, const EmbeddingArgs *a) {
  int64_t n = a->n, C = a->C;
  const int32_t *ids = a->ids;
  const float *gy = a->gy;
  float *gW = a->gW;
  for (int64_t bk = lo; bk < hi; bk++) {
    int64_t j0 = bk * COL_BLOCK, j1 = j0 + COL_BLOCK < C ? j0 + COL_BLOCK : C;
    for (int64_t i = 0; i < n; i++) {
      float *dst = gW + (int64_t)ids[i] * C;
      const float *src = gy + i * C;
      for (int64_t j = j0; j < j1; j++) dst[j] += src[j];
    }
  }
}

void embedding_backward(int64_t n, int64_t C, const int32_t *ids, const float *gy, float *gW) {
  EmbeddingArgs a = {n, C, ids, gy, gW};
  PARALLEL_RANGE((double)n * C, (C + COL_BLOCK - 1) / COL_BLOCK, kern->embedding_backward_blocks, &a);
}

ELEMENTWISE_LOOPS(LOOP_VARIANTS)
