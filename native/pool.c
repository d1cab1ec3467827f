/*
 * The thread pool behind PARALLEL_RANGE and the builtin sgemm: plain pthreads, so the addon needs
 * no OpenMP runtime (libgomp is not installed on a machine that only has Node.js, and a static
 * libgomp cannot go into a shared object).
 *
 * One job runs at a time: the caller publishes it (a new generation number), wakes the workers it
 * needs, runs slice 0 itself and waits for the others. A decode step posts dozens of jobs a few
 * microseconds apart, and a sleeping thread takes tens of microseconds to wake, so waiting is
 * spin-then-sleep, as OpenMP's default wait policy and ggml's thread pool do: a worker that
 * finished a job polls for the next one for up to `g_spin_ns` (MAGRPO_SPIN_US, default 100 µs),
 * and so does the caller waiting for the last slice; after that they sleep on a condition
 * variable. The spin is bounded so that on a machine shared with other jobs an idle pool gives
 * its core back within a tenth of a millisecond; MAGRPO_SPIN_US=0 never spins.
 *
 * A job started while another runs (from a second JS worker thread) or from inside a job runs on
 * the calling thread alone.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "magrpo.h"

static __thread int tl_tid = 0, tl_team = 1;

int thread_index(void) { return tl_tid; }
int team_size(void) { return tl_team; }

static pthread_mutex_t g_owner = PTHREAD_MUTEX_INITIALIZER; /* held by the caller of the running job */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;    /* guards the sleepers and the condition variables */
static pthread_cond_t g_wake = PTHREAD_COND_INITIALIZER, g_done = PTHREAD_COND_INITIALIZER;
static int g_started;         /* workers running, ids 1..g_started (under g_mu) */
static int g_sleeping;        /* workers asleep on g_wake (under g_mu) */
static int g_caller_sleeping; /* the caller is asleep on g_done (under g_mu) */
/* The job: a generation number and the team size in one word, (generation << 16) | team, so a
 * worker outside the team never reads a later job's size half-published. fn and ctx are written
 * before the word is bumped (release) and read only by team members after it (acquire); the caller
 * waits for every member before it posts the next job. */
static uint64_t g_job;
static int g_pending;
static TaskFn g_fn;
static void *g_ctx;
static int64_t g_spin_ns = -1; /* -1: not read from the environment yet */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if MAGRPO_X86
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int64_t spin_ns(void) {
  int64_t v = __atomic_load_n(&g_spin_ns, __ATOMIC_RELAXED);
  if (v >= 0) return v;
  const char *e = getenv("MAGRPO_SPIN_US");
  char *end = NULL;
  long us = e && *e ? strtol(e, &end, 10) : 100;
  if (e && *e && (*end != '\0' || us < 0)) us = 100; /* a malformed value keeps the default */
  v = (int64_t)us * 1000;
  __atomic_store_n(&g_spin_ns, v, __ATOMIC_RELAXED);
  return v;
}

/* Polls `done(word, value)` until it holds (returns 1) or the spin budget is spent (returns 0). */
static inline int job_posted(const void *word, uint64_t seen) { return __atomic_load_n((const uint64_t *)word, __ATOMIC_ACQUIRE) != seen; }
static inline int team_finished(const void *word, uint64_t unused) { return __atomic_load_n((const int *)word, __ATOMIC_ACQUIRE) <= 0; }

static inline __attribute__((always_inline)) int spin_until(int (*done)(const void *, uint64_t), const void *word, uint64_t value, int64_t budget) {
  if (budget <= 0) return done(word, value);
  int64_t deadline = now_ns() + budget;
  for (int k = 0;; k++) {
    if (done(word, value)) return 1;
    cpu_relax();
    if ((k & 63) == 63 && now_ns() > deadline) return 0;
  }
}

typedef struct {
  int id;
  uint64_t seen; /* the job generation at creation: the worker waits for the next one */
} WorkerStart;

static void *worker_main(void *arg) {
  WorkerStart st = *(WorkerStart *)arg;
  free(arg);
  uint64_t seen = st.seen;
  for (;;) {
    if (!spin_until(job_posted, &g_job, seen, spin_ns())) {
      /* Sleep. The caller bumps g_job before it takes g_mu to look at g_sleeping, so checking
       * g_job again under g_mu cannot miss a job. */
      pthread_mutex_lock(&g_mu);
      g_sleeping++;
      while (!job_posted(&g_job, seen)) pthread_cond_wait(&g_wake, &g_mu);
      g_sleeping--;
      pthread_mutex_unlock(&g_mu);
    }
    seen = __atomic_load_n(&g_job, __ATOMIC_ACQUIRE);
    int T = (int)(seen & 0xffff);
    if (st.id >= T) continue;
    tl_tid = st.id;
    tl_team = T;
    g_fn(st.id, T, g_ctx);
    tl_tid = 0;
    tl_team = 1;
    if (__atomic_sub_fetch(&g_pending, 1, __ATOMIC_ACQ_REL) == 0) {
      pthread_mutex_lock(&g_mu);
      if (g_caller_sleeping) pthread_cond_signal(&g_done);
      pthread_mutex_unlock(&g_mu);
    }
  }
  return NULL;
}

/* Starts workers up to `want` (under g_mu); returns how many run. Workers block every signal:
 * signals stay with Node's own threads. */
static int grow_pool(int want) {
  if (g_started >= want) return g_started;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  while (g_started < want) {
    WorkerStart *st = malloc(sizeof *st);
    if (st == NULL) break;
    *st = (WorkerStart){g_started + 1, __atomic_load_n(&g_job, __ATOMIC_ACQUIRE)};
    pthread_t th;
    if (pthread_create(&th, &attr, worker_main, st) != 0) {
      free(st);
      break;
    }
    g_started++;
  }
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return g_started;
}

void parallel_run(int T, TaskFn fn, void *ctx) {
  if (T <= 1 || tl_team > 1 || pthread_mutex_trylock(&g_owner) != 0) {
    fn(0, 1, ctx);
    return;
  }
  pthread_mutex_lock(&g_mu);
  int workers = grow_pool(T - 1);
  pthread_mutex_unlock(&g_mu);
  if (workers < T - 1) T = workers + 1;
  if (T <= 1) {
    pthread_mutex_unlock(&g_owner);
    fn(0, 1, ctx);
    return;
  }
  /* Publish: every worker reads the job after it sees the new generation. Workers of the last
   * job have all finished it (g_pending reached 0), so none still reads these fields. */
  g_fn = fn;
  g_ctx = ctx;
  __atomic_store_n(&g_pending, T - 1, __ATOMIC_RELAXED);
  uint64_t job = __atomic_load_n(&g_job, __ATOMIC_RELAXED);
  __atomic_store_n(&g_job, (((job >> 16) + 1) << 16) | (uint64_t)T, __ATOMIC_RELEASE);
  pthread_mutex_lock(&g_mu);
  if (g_sleeping > 0) pthread_cond_broadcast(&g_wake);
  pthread_mutex_unlock(&g_mu);
  tl_team = T;
  fn(0, T, ctx);
  tl_team = 1;
  if (!spin_until(team_finished, &g_pending, 0, spin_ns())) {
    pthread_mutex_lock(&g_mu);
    g_caller_sleeping = 1;
    while (!team_finished(&g_pending, 0)) pthread_cond_wait(&g_done, &g_mu);
    g_caller_sleeping = 0;
    pthread_mutex_unlock(&g_mu);
  }
  pthread_mutex_unlock(&g_owner);
}

typedef struct {
  int64_t n;
  RangeFn fn;
  const void *args;
} RangeJob;

static void range_task(int t, int T, void *ctx) {
  const RangeJob *j = ctx;
  j->fn(j->n * t / T, j->n * (t + 1) / T, j->args);
}

void parallel_range(int64_t n, RangeFn fn, const void *args) {
  int T = threads();
  if (T > n) T = (int)n;
  RangeJob j = {n, fn, args};
  parallel_run(T, range_task, &j);
}
