/*
 * RMSNorm and LayerNorm, forward and backward. Row statistics accumulate in double; parameter
 * gradients (gw, gb) are summed over rows by column blocks (COL_BLOCK), one block per task.
 */
#include "magrpo.h"

/* ---------------------------------------------------------------------------------------------
 * rmsnorm, rmsnormBackward
 * ------------------------------------------------------------------------------------------- */

INLINE void rmsnorm_rows(int64_t lo, int64_t hi, const NormArgs *a) {
  int64_t C = a->C;
  const float *x = a->x, *w = a->w;
  double eps = a->eps;
  float *out = a->out, *rstd = a->rstd;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = x + r * C;
    float *o = out + r * C;
    double ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t j = 0; j < C; j++) ss += (double)xr[j] * xr[j];
    float rs = (float)(1.0 / sqrt(ss / (double)C + eps));
    rstd[r] = rs;
    for (int64_t j = 0; j < C; j++) o[j] = xr[j] * rs * w[j];
  }
}

void rmsnorm_forward(int64_t rows, int64_t C, const float *x, const float *w, double eps, float *out, float *rstd) {
  NormArgs a = {.rows = rows, .C = C, .eps = eps, .x = x, .w = w, .out = out, .rstd = rstd};
  PARALLEL_RANGE((double)rows * C, rows, kern->rmsnorm_rows, &a);
}

/* gx += rstd·w·gy − x · rstd³/C · Σ_j gy_j w_j x_j */
INLINE void rmsnorm_backward_rows(int64_t lo, int64_t hi, const NormArgs *a) {
  int64_t C = a->C;
  const float *x = a->x, *w = a->w, *rstd = a->rstd, *gy = a->gy;
  float *gx = a->gx;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = x + r * C, *gr = gy + r * C;
    float *o = gx + r * C;
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < C; j++) dot += (double)gr[j] * w[j] * xr[j];
    double rs = rstd[r];
    float k = (float)(dot * rs * rs * rs / (double)C), rsf = rstd[r];
    for (int64_t j = 0; j < C; j++) o[j] += rsf * w[j] * gr[j] - k * xr[j];
  }
}

/* gw[j] += Σ_r gy[r,j] · x[r,j] · rstd[r] for the column blocks [lo, hi). */
INLINE void rmsnorm_gw_blocks(int64_t lo, int64_t hi, const NormArgs *a) {
  int64_t rows = a->rows, C = a->C;
  const float *x = a->x, *rstd = a->rstd, *gy = a->gy;
  float *gw = a->gw;
  for (int64_t bk = lo; bk < hi; bk++) {
    int64_t j0 = bk * COL_BLOCK, j1 = j0 + COL_BLOCK < C ? j0 + COL_BLOCK : C;
    double acc[COL_BLOCK] = {0};
    for (int64_t r = 0; r < rows; r++) {
      const float *xr = x + r * C, *gr = gy + r * C;
      double rs = rstd[r];
      for (int64_t j = j0; j < j1; j++) acc[j - j0] += (double)gr[j] * xr[j] * rs;
    }
    for (int64_t j = j0; j < j1; j++) gw[j] = (float)(gw[j] + acc[j - j0]);
  }
}

void rmsnorm_backward(int64_t rows, int64_t C, const float *x, const float *w, const float *rstd, const float *gy, float *gx, float *gw) {
  double n = (double)rows * C;
  NormArgs a = {.rows = rows, .C = C, .x = x, .w = w, .rstd = (float *)rstd, .gy = gy, .gx = gx, .gw = gw};
  PARALLEL_RANGE(n, rows, kern->rmsnorm_backward_rows, &a);
  PARALLEL_RANGE(n, (C + COL_BLOCK - 1) / COL_BLOCK, kern->rmsnorm_gw_blocks, &a);
}

/* ---------------------------------------------------------------------------------------------
 * layernorm, layernormBackward
 * ------------------------------------------------------------------------------------------- */

INLINE void layernorm_rows(int64_t lo, int64_t hi, const NormArgs *a) {
  int64_t C = a->C;
  const float *x = a->x, *w = a->w, *b = a->b;
  double eps = a->eps;
  float *out = a->out, *mean = a->mean, *rstd = a->rstd;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = x + r * C;
    float *o = out + r * C;
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < C; j++) s += xr[j];
    double mu = s / (double)C, v = 0;
#pragma omp simd reduction(+ : v)
    for (int64_t j = 0; j < C; j++) v += ((double)xr[j] - mu) * ((double)xr[j] - mu);
    double rs = 1.0 / sqrt(v / (double)C + eps);
    mean[r] = (float)mu;
    rstd[r] = (float)rs;
    /* In double: x − mean cancels when x is near the mean. */
    for (int64_t j = 0; j < C; j++) o[j] = (float)(((double)xr[j] - mu) * rs * w[j] + b[j]);
  }
}

void layernorm_forward(int64_t rows, int64_t C, const float *x, const float *w, const float *b, double eps, float *out, float *mean, float *rstd) {
  NormArgs a = {.rows = rows, .C = C, .eps = eps, .x = x, .w = w, .b = b, .out = out, .mean = mean, .rstd = rstd};
  PARALLEL_RANGE((double)rows * C, rows, kern->layernorm_rows, &a);
}

/* With xhat = (x − mean)·rstd and d = gy·w: gx += rstd · (d − mean(d) − xhat · mean(d · xhat)). */
INLINE void layernorm_backward_rows(int64_t lo, int64_t hi, const NormArgs *a) {
  int64_t C = a->C;
  const float *x = a->x, *w = a->w, *mean = a->mean, *rstd = a->rstd, *gy = a->gy;
  float *gx = a->gx;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = x + r * C, *gr = gy + r * C;
    float *o = gx + r * C;
    float mu = mean[r], rs = rstd[r];
    double sd = 0, sdx = 0;
#pragma omp simd reduction(+ : sd, sdx)
    for (int64_t j = 0; j < C; j++) {
      float d = gr[j] * w[j], xh = (xr[j] - mu) * rs;
      sd += d;
      sdx += (double)d * xh;
    }
    float md = (float)(sd / (double)C), mdx = (float)(sdx / (double)C);
    for (int64_t j = 0; j < C; j++) {
      float d = gr[j] * w[j], xh = (xr[j] - mu) * rs;
      o[j] += rs * (d - md - xh * mdx);
    }
  }
}

/* gw[j] += Σ_r gy · xhat and gb[j] += Σ_r gy for the column blocks [lo, hi). */
INLINE void layernorm_gwb_blocks(int64_t lo, int64_t hi, const NormArgs *a) {
  int64_t rows = a->rows, C = a->C;
  const float *x = a->x, *mean = a->mean, *rstd = a->rstd, *gy = a->gy;
  float *gw = a->gw, *gb = a->gb;
  for (int64_t bk = lo; bk < hi; bk++) {
    int64_t j0 = bk * COL_BLOCK, j1 = j0 + COL_BLOCK < C ? j0 + COL_BLOCK : C;
    double aw[COL_BLOCK] = {0}, ab[COL_BLOCK] = {0};
    for (int64_t r = 0; r < rows; r++) {
      const float *xr = x + r * C, *gr = gy + r * C;
      float mu = mean[r], rs = rstd[r];
      for (int64_t j = j0; j < j1; j++) {
        aw[j - j0] += (double)gr[j] * ((xr[j] - mu) * rs);
        ab[j - j0] += gr[j];
      }
    }
    for (int64_t j = j0; j < j1; j++) {
      gw[j] = (float)(gw[j] + aw[j - j0]);
      gb[j] = (float)(gb[j] + ab[j - j0]);
    }
  }
}

void layernorm_backward(int64_t rows, int64_t C, const float *x, const float *w, const float *mean, const float *rstd, const float *gy, float *gx,
                        float *gw, float *gb) {
  double n = (double)rows * C;
  NormArgs a = {.rows = rows, .C = C, .x = x, .w = w, .mean = (float *)mean, .rstd = (float *)rstd, .gy = gy, .gx = gx, .gw = gw, .gb = gb};
  PARALLEL_RANGE(n, rows, kern->layernorm_backward_rows, &a);
  PARALLEL_RANGE(n, (C + COL_BLOCK - 1) / COL_BLOCK, kern->layernorm_gwb_blocks, &a);
}

NORMS_LOOPS(LOOP_VARIANTS)
