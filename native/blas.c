/*
 * BLAS glue. The addon links no BLAS: at load it looks for an OpenBLAS with dlopen and uses its
 * cblas_sgemm when found (a tuned library the user installed), else the builtin sgemm (sgemm.c).
 * MAGRPO_BLAS chooses: unset or `auto` (OpenBLAS if found, else builtin), `builtin`, `openblas`
 * (an OpenBLAS must load) or the path of a library that exports cblas_sgemm. Also the thread
 * count, which OpenBLAS and the pool share.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "magrpo.h"

int g_threads = 1;

/* cblas_sgemm's CBLAS enums, so that no cblas.h is needed to build. */
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };
typedef void (*CblasSgemm)(int order, int tA, int tB, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                           float *C, int ldc);

static struct {
  CblasSgemm sgemm;
  void (*set_num_threads)(int);
  char *(*get_corename)(void);
  char *(*get_config)(void);
  /* An OpenMP build of OpenBLAS sizes its team from the calling thread's OpenMP setting. */
  int (*omp_get_max_threads)(void);
  void (*omp_set_num_threads)(int);
} g_ob;

static char g_path[PATH_MAX], g_corename[64], g_config[256], g_why[512];

/* Rows a row split (gemm_split_rows) must fall on for the halves to be bit for bit the whole
 * product, by OpenBLAS core (0: never split). Found by cutting products at every multiple of 8
 * rows and comparing with the whole (OpenBLAS 0.3.21, cores forced with OPENBLAS_CORETYPE on an
 * AMD Zen 5): Haswell and Zen (the same kernels) are exact at multiples of 24 only; Sandybridge at
 * multiples of 16; SkylakeX and Cooperlake at any multiple of 8. A core not checked that way keeps
 * its products whole. */
static int64_t g_split_align;

static int64_t split_row_align(const char *core) {
  static const struct {
    const char *core;
    int64_t rows;
  } known[] = {{"haswell", 24}, {"zen", 24}, {"sandybridge", 16}, {"skylakex", 16}, {"cooperlake", 16}, {"sapphirerapids", 16}};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (strcasecmp(core, known[i].core) == 0) return known[i].rows;
  return 0;
}
static BlasInfo g_info = {false, "", "", "", ""};

const BlasInfo *blas_info(void) { return &g_info; }

/* The names an OpenBLAS goes by, in the order tried. */
#if defined(__APPLE__)
static const char *const CANDIDATES[] = {"libopenblas.dylib", "/opt/homebrew/opt/openblas/lib/libopenblas.dylib", "/usr/local/opt/openblas/lib/libopenblas.dylib"};
#else
static const char *const CANDIDATES[] = {"libopenblas.so.0", "libopenblas.so"};
#endif
#define N_CANDIDATES (sizeof CANDIDATES / sizeof *CANDIDATES)

static void copy_str(char *dst, size_t cap, const char *src) { snprintf(dst, cap, "%s", src ? src : ""); }

/* Loads `name` and takes its cblas_sgemm; on failure fills `err` and leaves nothing loaded. */
static bool try_open(const char *name, char *err, size_t cap) {
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    const char *e = dlerror();
    copy_str(err, cap, e ? e : name);
    return false;
  }
  CblasSgemm sgemm = (CblasSgemm)dlsym(h, "cblas_sgemm");
  if (sgemm == NULL) {
    snprintf(err, cap, "%s has no cblas_sgemm", name);
    dlclose(h);
    return false;
  }
  g_ob.sgemm = sgemm;
  g_ob.set_num_threads = (void (*)(int))dlsym(h, "openblas_set_num_threads");
  g_ob.get_corename = (char *(*)(void))dlsym(h, "openblas_get_corename");
  g_ob.get_config = (char *(*)(void))dlsym(h, "openblas_get_config");
  g_ob.omp_get_max_threads = (int (*)(void))dlsym(h, "omp_get_max_threads");
  g_ob.omp_set_num_threads = (void (*)(int))dlsym(h, "omp_set_num_threads");
  if (!g_ob.omp_get_max_threads || !g_ob.omp_set_num_threads) g_ob.omp_get_max_threads = NULL, g_ob.omp_set_num_threads = NULL;
  Dl_info di;
  const char *file = dladdr((void *)sgemm, &di) && di.dli_fname ? di.dli_fname : name;
  if (realpath(file, g_path) == NULL) copy_str(g_path, sizeof g_path, file);
  copy_str(g_corename, sizeof g_corename, g_ob.get_corename ? g_ob.get_corename() : "");
  copy_str(g_config, sizeof g_config, g_ob.get_config ? g_ob.get_config() : "");
  /* Trailing blanks in OpenBLAS's strings. */
  for (char *s = g_corename + strlen(g_corename); s > g_corename && s[-1] == ' '; *--s = '\0') {
  }
  for (char *s = g_config + strlen(g_config); s > g_config && s[-1] == ' '; *--s = '\0') {
  }
  g_split_align = split_row_align(g_corename);
  g_info = (BlasInfo){true, g_path, g_corename, g_config, g_why};
  return true;
}

/* Tries every candidate name; `tried` lists them with the first error. */
static bool open_any(char *tried, size_t cap) {
  char first[256] = "";
  for (size_t i = 0; i < N_CANDIDATES; i++) {
    char err[256];
    if (try_open(CANDIDATES[i], err, sizeof err)) return true;
    if (first[0] == '\0') copy_str(first, sizeof first, err);
  }
  size_t n = 0;
  for (size_t i = 0; i < N_CANDIDATES && n < cap; i++) n += (size_t)snprintf(tried + n, cap - n, "%s%s", i ? ", " : "", CANDIDATES[i]);
  if (n < cap) snprintf(tried + n, cap - n, ": %s", first);
  return false;
}

static char g_blas_error[600];

const char *blas_init(void) {
  const char *want = getenv("MAGRPO_BLAS");
  char tried[400];
  if (want == NULL || *want == '\0' || strcmp(want, "auto") == 0) {
    if (open_any(tried, sizeof tried)) {
      copy_str(g_why, sizeof g_why, "found by dlopen (MAGRPO_BLAS=builtin turns it off)");
    } else {
      snprintf(g_why, sizeof g_why, "no OpenBLAS found (%s)", tried);
    }
  } else if (strcmp(want, "builtin") == 0) {
    copy_str(g_why, sizeof g_why, "MAGRPO_BLAS=builtin");
  } else if (strcmp(want, "openblas") == 0) {
    if (!open_any(tried, sizeof tried)) snprintf(g_blas_error, sizeof g_blas_error, "MAGRPO_BLAS=openblas: no OpenBLAS loads (%s)", tried);
    copy_str(g_why, sizeof g_why, "MAGRPO_BLAS=openblas");
  } else if (strchr(want, '/') != NULL) {
    char err[256];
    if (!try_open(want, err, sizeof err)) snprintf(g_blas_error, sizeof g_blas_error, "MAGRPO_BLAS=%.200s does not load: %s", want, err);
    copy_str(g_why, sizeof g_why, "MAGRPO_BLAS names it");
  } else {
    snprintf(g_blas_error, sizeof g_blas_error, "MAGRPO_BLAS=%.60s is not one of auto, builtin, openblas or a path to a BLAS library", want);
  }
  if (!g_info.openblas) g_info = (BlasInfo){false, "", "", "", g_why};
  return g_blas_error[0] ? g_blas_error : NULL;
}

/* Inside a pool task (gemm_pair's halves, attention's heads) OpenBLAS may run on the calling thread
 * alone only in an OpenMP build: its thread count is per calling thread there. A pthreads build's
 * count is global, so its tasks take the builtin sgemm. Single-threaded OpenBLAS is the faster of
 * the two on attention's small per-head products (docs/benchmarks.md, "Engine design measurements"). */
static bool blas_single_thread_ok(void) { return g_ob.omp_set_num_threads != NULL; }

/* gemm_pair and gemm_split_rows pair work up only with exactly two threads, outside any pool job:
 * with more, each product's own threading serves better than two threads of many idling. */
static bool two_free_threads(void) { return threads() == 2 && team_size() == 1; }

typedef struct {
  const GemmPairCall *call[2];
} PairJob;

static void run_call(const GemmPairCall *c) {
  gemm_f32(c->tA, c->tB, c->M, c->N, c->K, c->alpha, c->A, c->lda, c->B, c->ldb, c->beta, c->C, c->ldc);
}

static void pair_task(int t, int T, void *ctx) {
  const PairJob *job = ctx;
  if (T == 2)
    run_call(job->call[t]);
  else /* the pool was busy: both here, in order */
    for (int i = 0; i < 2; i++) run_call(job->call[i]);
}

/* The last byte C touches, for the overlap check. */
static const char *c_end(const GemmPairCall *c) { return (const char *)(c->C + (c->M - 1) * c->ldc + c->N); }

void gemm_pair(const GemmPairCall *a, const GemmPairCall *b) {
  if (a->M == 0 || a->N == 0 || b->M == 0 || b->N == 0) { /* nothing to share */
    run_call(a);
    run_call(b);
    return;
  }
  bool overlap = (const char *)a->C < c_end(b) && (const char *)b->C < c_end(a);
  double flops = 2.0 * ((double)a->M * a->N * a->K + (double)b->M * b->N * b->K);
  /* Overlapping outputs go one after the other. */
  if (!two_free_threads() || overlap || flops < PAIR_MIN_FLOPS) {
    run_call(a);
    run_call(b);
    return;
  }
  PairJob job = {{a, b}};
  parallel_run(2, pair_task, &job);
}

/* Row split. With exactly two threads and an OpenMP OpenBLAS, a product whose output has many rows
 * and not too many columns runs as two half-height products at once (gemm_pair), each on one
 * thread: OpenBLAS's own two-thread split of the small shapes of training is poor, and side by side
 * the halves share nothing. Splitting columns loses, and so does splitting few rows with many
 * columns: hence the shape rule below (the figures: docs/benchmarks.md, "Engine design measurements").
 *
 * The halves must be bit for bit the whole, so that two threads write what one writes. OpenBLAS
 * never cuts along K, but the rows a core's kernels leave over at the bottom of a product are
 * summed in another order than full tiles: the cut must fall on a multiple of split_row_align()
 * rows, so that each half's tiles are the whole's. And a half small enough for OpenBLAS's
 * small-matrix kernels (SkylakeX and later, up to 100^3 multiply-adds) sums in another order too:
 * such products stay whole. */
bool gemm_split_rows(const GemmPairCall *c) {
  int64_t M = c->M, N = c->N, align = g_split_align;
  if (!two_free_threads() || g_ob.sgemm == NULL || !blas_single_thread_ok() || align == 0) return false;
  if (M < SPLIT_MIN_ROWS || N > SPLIT_MAX_COLS_PER_ROW * M) return false;
  int64_t h = (M / 2 + align / 2) / align * align; /* the top half: the multiple of align nearest M / 2 */
  /* (an empty half fails this too) */
  if ((double)(h < M - h ? h : M - h) * N * c->K <= SPLIT_MIN_HALF_MACS) return false;
  GemmPairCall top = *c, bottom = *c;
  top.M = h;
  bottom.M = M - h;
  bottom.A = c->A + (c->tA ? h : h * c->lda);
  bottom.C = c->C + h * c->ldc;
  PairJob job = {{&top, &bottom}};
  parallel_run(2, pair_task, &job);
  return true;
}

void set_threads(int n) {
  __atomic_store_n(&g_threads, n, __ATOMIC_RELAXED);
  if (g_ob.set_num_threads) g_ob.set_num_threads(n);
  if (g_ob.omp_set_num_threads) g_ob.omp_set_num_threads(n);
}

void blas_sgemm(bool tA, bool tB, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                float *C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == 0.0f) {
    /* C = beta·C; OpenBLAS rejects K = 0 with lda = 1 on some paths, so do it here. */
    for (int64_t i = 0; i < M; i++) {
      float *row = C + i * ldc;
      for (int64_t j = 0; j < N; j++) row[j] = beta == 0.0f ? 0.0f : row[j] * beta;
    }
    return;
  }
  if (g_ob.sgemm != NULL && team_size() > 1 && blas_single_thread_ok()) {
    /* A pool task: OpenBLAS on this thread alone. An OpenMP build sizes its team from the calling
     * thread's own OpenMP setting (per thread), so two threads can each run one. */
    if (g_ob.omp_get_max_threads() != 1) g_ob.omp_set_num_threads(1);
    g_ob.sgemm(CBLAS_ROW_MAJOR, tA ? CBLAS_TRANS : CBLAS_NO_TRANS, tB ? CBLAS_TRANS : CBLAS_NO_TRANS, (int)M, (int)N, (int)K, alpha, A, (int)lda, B,
               (int)ldb, beta, C, (int)ldc);
    return;
  }
  if (g_ob.sgemm != NULL && team_size() == 1) {
    if (g_ob.omp_get_max_threads && g_ob.omp_get_max_threads() != threads()) g_ob.omp_set_num_threads(threads());
    g_ob.sgemm(CBLAS_ROW_MAJOR, tA ? CBLAS_TRANS : CBLAS_NO_TRANS, tB ? CBLAS_TRANS : CBLAS_NO_TRANS, (int)M, (int)N, (int)K, alpha, A, (int)lda, B,
               (int)ldb, beta, C, (int)ldc);
    return;
  }
  if (beta != 1.0f) {
    for (int64_t i = 0; i < M; i++) {
      float *row = C + i * ldc;
      if (beta == 0.0f)
        memset(row, 0, (size_t)N * sizeof(float));
      else
        for (int64_t j = 0; j < N; j++) row[j] *= beta;
    }
  }
  GemmCall g = {tA, tB, M, N, K, lda, ldb, ldc, alpha, A, B, C, NULL, false};
  kern->sgemm(&g);
}
