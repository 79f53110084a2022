/* hali HAL — worker pool (see hal/worker_pool.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "hal/command_list.h"
#include "base/alloc.h"
#include "hal/worker_pool.h"

typedef struct hali_hal_pool_job_t {
  hali_hal_executable_t *executable;
  uint32_t ordinal;
  const hali_kernel_dispatch_state_t *dispatch;
  const hali_hal_tracer_t *tracer; /* NULL = off */
  hali_hal_stop_t *stop;           /* borrowed; NULL = none */
  uint32_t trace_tid;              /* 0: the worker's own track */
  uint32_t scratch_size;
  uint64_t total;  /* workgroups in the grid */
  uint64_t chunk;  /* workgroups claimed at a time */
  atomic_uint_fast64_t next;
  atomic_bool failed;
  /* Guarded by the pool mutex. */
  hali_status_t failure;
  struct hali_hal_pool_job_t *next_job; /* in pool->jobs while listed */
  bool listed;     /* in pool->jobs: workers may still join it */
  uint32_t active; /* workers inside hali_hal_worker_run_job for it */
} hali_hal_pool_job_t;

typedef struct hali_hal_worker_t {
  hali_hal_worker_pool_t *pool;
  uint32_t id;
  pthread_t thread;
  /* Owned by the worker thread, or by the dispatching thread that has
   * borrowed the worker (below). */
  void *scratch;
  size_t scratch_size;
  /* Guarded by the pool mutex.  |idle|: waiting for a job.  |borrowed|: a
   * dispatching thread runs a one-workgroup grid as this worker (its id
   * and scratch) while the thread keeps waiting. */
  bool idle, borrowed;
} hali_hal_worker_t;

/* Several dispatches may be in flight at once (one per local-task queue
 * runner): their jobs wait in a FIFO, and every idle worker joins the
 * oldest job that still has workgroups to claim.  A worker that finds its
 * job exhausted unlists it, so the next job gets the workers as soon as
 * the previous one has none left to hand out (its last chunks may still
 * be running: that is where two dispatches overlap). */
struct hali_hal_worker_pool_t {
  pthread_mutex_t mutex;
  pthread_cond_t work_cond; /* a new job or shutdown */
  pthread_cond_t done_cond; /* a job was unlisted or a worker left one */
  /* Guarded by |mutex|. */
  hali_hal_pool_job_t *jobs, *jobs_tail; /* listed jobs, oldest first */
  bool shutdown;
  uint32_t worker_count;
  uint32_t started;
  hali_hal_worker_t workers[];
};

static void hali_hal_pool_job_fail(hali_hal_worker_pool_t *pool,
                                   hali_hal_pool_job_t *job,
                                   hali_status_t status) {
  atomic_store(&job->failed, true);
  pthread_mutex_lock(&pool->mutex);
  if (!job->failure)
    job->failure = status;
  else
    hali_status_free(status);
  pthread_mutex_unlock(&pool->mutex);
}

static void hali_hal_worker_run_job(hali_hal_worker_t *worker,
                                    hali_hal_pool_job_t *job) {
  if (job->scratch_size > worker->scratch_size) {
    hali_aligned_free(worker->scratch);
    worker->scratch = NULL;
    worker->scratch_size = 0;
    if (!(worker->scratch = hali_aligned_alloc(64, job->scratch_size))) {
      worker->scratch = NULL;
      hali_hal_pool_job_fail(
          worker->pool, job,
          hali_status_annotate(hali_status_oom(),
                               "for %u bytes of scratch on "
                               "worker %u",
                               job->scratch_size, worker->id));
      return;
    }
    worker->scratch_size = job->scratch_size;
  }
  while (!atomic_load_explicit(&job->failed, memory_order_relaxed)) {
    /* |next| ends at most one chunk per worker past |total|, and total <=
     * HALI_HAL_MAX_WORKGROUPS (2^32 - 1), so neither this add nor
     * begin + chunk below can wrap. */
    uint64_t begin = atomic_fetch_add(&job->next, job->chunk);
    if (begin >= job->total) break;
    uint64_t end = begin + job->chunk < job->total ? begin + job->chunk
                                                   : job->total;
    const hali_hal_tracer_t *t = job->tracer;
    int64_t t0 = t ? t->now(t->user) : 0;
    hali_status_t status = hali_hal_dispatch_run_workgroups(
        job->executable, job->ordinal, job->dispatch, begin, end, worker->id,
        job->scratch_size ? worker->scratch : NULL, job->scratch_size,
        job->stop);
    if (t)
      hali_hal_trace_dispatch(t, job->executable, job->ordinal,
                              job->trace_tid ? job->trace_tid : 2 + worker->id,
                              begin, end, t0);
    if (status) {
      hali_hal_pool_job_fail(worker->pool, job, status);
      break;
    }
  }
}

/* Takes |job| out of the FIFO (no worker joins it from now on).  Caller
 * holds the pool mutex. */
static void hali_hal_pool_unlist(hali_hal_worker_pool_t *pool,
                                 hali_hal_pool_job_t *job) {
  if (!job->listed) return;
  hali_hal_pool_job_t **link = &pool->jobs, *prev = NULL;
  while (*link != job) {
    prev = *link;
    link = &(*link)->next_job;
  }
  *link = job->next_job;
  if (pool->jobs_tail == job) pool->jobs_tail = prev;
  job->listed = false;
  pthread_cond_broadcast(&pool->done_cond);
}

static void *hali_hal_worker_main(void *arg) {
  hali_hal_worker_t *worker = arg;
  hali_hal_worker_pool_t *pool = worker->pool;
  pthread_mutex_lock(&pool->mutex);
  for (;;) {
    worker->idle = true;
    while (!pool->shutdown && (!pool->jobs || worker->borrowed))
      pthread_cond_wait(&pool->work_cond, &pool->mutex);
    worker->idle = false;
    if (pool->shutdown) break;
    hali_hal_pool_job_t *job = pool->jobs;
    job->active++;
    pthread_mutex_unlock(&pool->mutex);
    /* Returns once nothing is left to claim (or a workgroup failed). */
    hali_hal_worker_run_job(worker, job);
    pthread_mutex_lock(&pool->mutex);
    hali_hal_pool_unlist(pool, job);
    if (--job->active == 0) pthread_cond_broadcast(&pool->done_cond);
  }
  pthread_mutex_unlock(&pool->mutex);
  hali_aligned_free(worker->scratch);
  return NULL;
}

hali_status_t hali_hal_worker_pool_create(uint32_t worker_count,
                                          hali_hal_worker_pool_t **out_pool) {
  *out_pool = NULL;
  if (worker_count == 0) worker_count = 1;
  hali_hal_worker_pool_t *pool =
      hali_calloc(1, sizeof(*pool) + worker_count * sizeof(hali_hal_worker_t));
  if (!pool)
    return hali_status_annotate(hali_status_oom(),
                                "creating %u workers",
                                worker_count);
  pthread_mutex_init(&pool->mutex, NULL);
  pthread_cond_init(&pool->work_cond, NULL);
  pthread_cond_init(&pool->done_cond, NULL);
  pool->worker_count = worker_count;
  for (uint32_t i = 0; i < worker_count; ++i) {
    hali_hal_worker_t *worker = &pool->workers[i];
    worker->pool = pool;
    worker->id = i;
    if (pthread_create(&worker->thread, NULL, hali_hal_worker_main, worker)) {
      hali_hal_worker_pool_destroy(pool);
      return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                              "could not start worker thread %u of %u", i,
                              worker_count);
    }
    pool->started = i + 1;
  }
  *out_pool = pool;
  return HALI_OK;
}

void hali_hal_worker_pool_destroy(hali_hal_worker_pool_t *pool) {
  if (!pool) return;
  pthread_mutex_lock(&pool->mutex);
  pool->shutdown = true;
  pthread_cond_broadcast(&pool->work_cond);
  pthread_mutex_unlock(&pool->mutex);
  for (uint32_t i = 0; i < pool->started; ++i)
    pthread_join(pool->workers[i].thread, NULL);
  pthread_cond_destroy(&pool->done_cond);
  pthread_cond_destroy(&pool->work_cond);
  pthread_mutex_destroy(&pool->mutex);
  hali_free(pool);
}

uint32_t hali_hal_worker_pool_size(const hali_hal_worker_pool_t *pool) {
  return pool->worker_count;
}

hali_hal_worker_t *hali_hal_worker_pool_hold(hali_hal_worker_pool_t *pool) {
  hali_hal_worker_t *idle = NULL;
  pthread_mutex_lock(&pool->mutex);
  for (uint32_t i = 0; !idle && i < pool->worker_count; ++i)
    if (pool->workers[i].idle && !pool->workers[i].borrowed)
      idle = &pool->workers[i];
  if (idle) idle->borrowed = true;
  pthread_mutex_unlock(&pool->mutex);
  return idle;
}

void hali_hal_worker_pool_unhold(hali_hal_worker_pool_t *pool,
                                 hali_hal_worker_t *held) {
  if (!held) return;
  pthread_mutex_lock(&pool->mutex);
  held->borrowed = false;
  /* It slept through the jobs queued meanwhile. */
  if (pool->jobs) pthread_cond_broadcast(&pool->work_cond);
  pthread_mutex_unlock(&pool->mutex);
}

static hali_status_t hali_hal_worker_pool_dispatch_as(
    hali_hal_worker_pool_t *pool, hali_hal_worker_t *held,
    hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch,
    const hali_hal_tracer_t *tracer, hali_hal_stop_t *stop);

bool hali_hal_worker_pool_lend(hali_hal_worker_t *held, size_t scratch_size,
                               uint32_t *out_worker_id, void **out_scratch,
                               size_t *out_scratch_size) {
  /* The holder owns a borrowed worker's scratch (see the struct). */
  if (scratch_size > held->scratch_size) {
    void *scratch = hali_aligned_alloc(64, scratch_size);
    if (!scratch) return false;
    hali_aligned_free(held->scratch);
    held->scratch = scratch;
    held->scratch_size = scratch_size;
  }
  *out_worker_id = held->id;
  *out_scratch = held->scratch;
  *out_scratch_size = held->scratch_size;
  return true;
}

hali_status_t hali_hal_worker_pool_dispatch(
    hali_hal_worker_pool_t *pool, hali_hal_executable_t *executable,
    uint32_t ordinal, const hali_kernel_dispatch_state_t *dispatch,
    const hali_hal_tracer_t *tracer, hali_hal_stop_t *stop) {
  return hali_hal_worker_pool_dispatch_as(pool, NULL, executable, ordinal,
                                          dispatch, tracer, stop);
}

hali_status_t hali_hal_worker_pool_dispatch_held(
    hali_hal_worker_pool_t *pool, hali_hal_worker_t *held,
    hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch,
    const hali_hal_tracer_t *tracer, hali_hal_stop_t *stop) {
  return hali_hal_worker_pool_dispatch_as(pool, held, executable, ordinal,
                                          dispatch, tracer, stop);
}

static hali_status_t hali_hal_worker_pool_dispatch_as(
    hali_hal_worker_pool_t *pool, hali_hal_worker_t *held,
    hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch,
    const hali_hal_tracer_t *tracer, hali_hal_stop_t *stop) {
  /* A held worker runs a single workgroup here with no lock: nobody else
   * can join it (and without the job's atomic claim).  Its scratch grows,
   * or fails, through hali_hal_worker_run_job below. */
  if (held && hali_hal_dispatch_workgroup_total(dispatch) == 1) {
    uint32_t scratch_size =
        hali_hal_executable_export(executable, ordinal)->scratch_size;
    if (scratch_size <= held->scratch_size) {
      int64_t t0 = tracer ? tracer->now(tracer->user) : 0;
      hali_status_t status = hali_hal_dispatch_run_workgroups(
          executable, ordinal, dispatch, 0, 1, held->id,
          scratch_size ? held->scratch : NULL, scratch_size, stop);
      if (tracer)
        hali_hal_trace_dispatch(tracer, executable, ordinal, 2 + held->id, 0,
                                1, t0);
      return status;
    }
  }
  hali_hal_pool_job_t job = {
      .stop = stop,
      .executable = executable,
      .ordinal = ordinal,
      .dispatch = dispatch,
      .tracer = tracer,
      .scratch_size =
          hali_hal_executable_export(executable, ordinal)->scratch_size,
      .total = hali_hal_dispatch_workgroup_total(dispatch),
      .failure = NULL,
  };
  /* About 4 chunks per worker: enough to balance uneven workgroups without
   * hammering the counter. */
  job.chunk = job.total / ((uint64_t)pool->worker_count * 4);
  if (job.chunk == 0) job.chunk = 1;
  atomic_init(&job.next, 0);
  atomic_init(&job.failed, false);
  if (held && job.total == 1) {
    hali_hal_worker_run_job(held, &job);
    return job.failure; /* (written under the mutex by a failure) */
  }
  pthread_mutex_lock(&pool->mutex);
  /* A single workgroup gains nothing from waking a worker: run it here as
   * an idle worker (its id and scratch), which keeps waiting meanwhile.
   * Ids stay unique (include/hali/kernel.h) while several threads
   * dispatch. */
  hali_hal_worker_t *idle = NULL;
  for (uint32_t i = 0; !held && job.total == 1 && !idle &&
                      i < pool->worker_count;
       ++i)
    if (pool->workers[i].idle && !pool->workers[i].borrowed)
      idle = &pool->workers[i];
  if (idle) {
    idle->borrowed = true;
    pthread_mutex_unlock(&pool->mutex);
    hali_hal_worker_run_job(idle, &job);
    pthread_mutex_lock(&pool->mutex);
    idle->borrowed = false;
    /* It may have slept through jobs queued meanwhile. */
    if (pool->jobs) pthread_cond_broadcast(&pool->work_cond);
    pthread_mutex_unlock(&pool->mutex);
    return job.failure;
  }
  job.listed = true;
  if (pool->jobs_tail) pool->jobs_tail->next_job = &job;
  else pool->jobs = &job;
  pool->jobs_tail = &job;
  /* The dispatching thread works too, as an idle worker it borrows (its id
   * and scratch; that worker keeps sleeping): with one worker the dispatch
   * then needs no wake-up at all, and with N the other N - 1 join it.  It
   * wakes the others only when there is more than one chunk to share. */
  idle = held;
  for (uint32_t i = 0; !idle && i < pool->worker_count; ++i)
    if (pool->workers[i].idle && !pool->workers[i].borrowed)
      idle = &pool->workers[i];
  if (!idle || job.total > job.chunk) pthread_cond_broadcast(&pool->work_cond);
  if (idle) {
    idle->borrowed = true; /* (already, when held) */
    job.active++;
    pthread_mutex_unlock(&pool->mutex);
    hali_hal_worker_run_job(idle, &job);
    pthread_mutex_lock(&pool->mutex);
    hali_hal_pool_unlist(pool, &job);
    job.active--;
    if (!held) {
      idle->borrowed = false;
      if (pool->jobs) pthread_cond_broadcast(&pool->work_cond);
    }
  }
  /* Done when no worker can join any more and none is still inside. */
  while (job.listed || job.active > 0)
    pthread_cond_wait(&pool->done_cond, &pool->mutex);
  hali_status_t failure = job.failure;
  pthread_mutex_unlock(&pool->mutex);
  return failure;
}
