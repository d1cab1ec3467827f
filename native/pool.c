/*
 * The thread pool behind PARALLEL_RANGE and the builtin sgemm: plain pthreads, so the addon needs
 * no OpenMP runtime (libgomp is not installed on a machine that only has Node.js, and a static
 * libgomp cannot go into a shared object).
 *
 * One job runs at a time: the caller posts it, wakes the workers it needs, runs slice 0 itself and
 * waits for the others. Idle workers sleep on a condition variable (no spinning: on a machine
 * shared with other jobs a spinning thread steals the core a busy one needs; this is what
 * OMP_WAIT_POLICY=passive did for the OpenMP build). A job started while another runs (from a
 * second JS worker thread) or from inside a job runs on the calling thread alone.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "magrpo.h"

static __thread int tl_tid = 0, tl_team = 1;

int thread_index(void) { return tl_tid; }
int team_size(void) { return tl_team; }

static pthread_mutex_t g_owner = PTHREAD_MUTEX_INITIALIZER; /* held by the caller of the running job */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;    /* guards everything below */
static pthread_cond_t g_wake = PTHREAD_COND_INITIALIZER, g_done = PTHREAD_COND_INITIALIZER;
static int g_started;  /* workers running, ids 1..g_started */
static uint64_t g_gen; /* bumped once per job */
static int g_team, g_pending;
static TaskFn g_fn;
static void *g_ctx;

typedef struct {
  int id;
  uint64_t seen; /* the job generation at creation: the worker waits for the next one */
} WorkerStart;

static void *worker_main(void *arg) {
  WorkerStart st = *(WorkerStart *)arg;
  free(arg);
  uint64_t seen = st.seen;
  pthread_mutex_lock(&g_mu);
  for (;;) {
    while (g_gen == seen) pthread_cond_wait(&g_wake, &g_mu);
    seen = g_gen;
    if (st.id >= g_team) continue;
    TaskFn fn = g_fn;
    void *ctx = g_ctx;
    int T = g_team;
    pthread_mutex_unlock(&g_mu);
    tl_tid = st.id;
    tl_team = T;
    fn(st.id, T, ctx);
    tl_tid = 0;
    tl_team = 1;
    pthread_mutex_lock(&g_mu);
    if (--g_pending == 0) pthread_cond_signal(&g_done);
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
    *st = (WorkerStart){g_started + 1, g_gen};
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
  if (workers < T - 1) T = workers + 1;
  g_team = T;
  g_fn = fn;
  g_ctx = ctx;
  g_pending = T - 1;
  g_gen++;
  pthread_cond_broadcast(&g_wake);
  pthread_mutex_unlock(&g_mu);
  tl_team = T;
  fn(0, T, ctx);
  tl_team = 1;
  pthread_mutex_lock(&g_mu);
  while (g_pending > 0) pthread_cond_wait(&g_done, &g_mu);
  pthread_mutex_unlock(&g_mu);
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
