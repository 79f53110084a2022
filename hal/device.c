/* hali HAL — the local-sync and local-task devices (see hal/device.h).
 *
 * Both keep one FIFO of submissions; they differ in who runs it:
 *
 *   local-sync  hali_hal_local_sync_pump() runs every submission at the head
 *               whose wait fence is reached, on the calling thread.  When the
 *               head is not ready it *arms* a semaphore timepoint on the first
 *               unreached point; the timepoint's callback pumps again from
 *               the signalling thread.  A |pumping| flag makes pumping
 *               single-threaded and non-reentrant: a pump that finds another
 *               one running returns, and the running one re-checks the head
 *               after every submission.
 *   local-task  queue runner threads (as many as workers) take any
 *               submission whose wait fence is reached (or failed, or
 *               whose submitter gave up), oldest first, and run it, so
 *               submissions that do not wait on each other run at the
 *               same time.  Submissions not ready have a semaphore
 *               timepoint on every unreached point of their wait fence;
 *               its callback wakes the runners (which also look again
 *               every 20 ms, for stops and abandon).
 *
 * Lock order: device mutex -> fence mutex -> semaphore mutex.  Semaphore
 * callbacks run with no semaphore lock held, so the arm callback may take
 * the device mutex.
 */
#include <inttypes.h>
#include <stdio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hal/command_list.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "hal/device.h"
#include "hal/validate.h"
#include "hal/worker_pool.h"
#include "hal/binding_table.h"

/* How many freed fences a device keeps for reuse (hal/fence.h's pool):
 * a host or a VM context rarely has more in flight at once. */
#define HALI_HAL_DEVICE_FENCE_POOL_MAX 16

typedef enum hali_hal_submission_kind_e {
  HALI_HAL_SUBMISSION_EXECUTE,
  HALI_HAL_SUBMISSION_ALLOCA,
  HALI_HAL_SUBMISSION_DEALLOCA,
} hali_hal_submission_kind_t;

typedef struct hali_hal_submission_t {
  struct hali_hal_submission_t *next;
  uint64_t id; /* 1, 2, ...: submission order */
  hali_hal_submission_kind_t kind;
  hali_hal_fence_t *wait_fence;   /* retained, may be NULL */
  hali_hal_fence_t *signal_fence; /* retained, may be NULL */
  hali_hal_buffer_t *buffer;      /* alloca/dealloca: retained */
  hali_hal_stop_t *stop;          /* retained, may be NULL */
  bool armed; /* local-task: timepoints registered on its wait fence */
  void *validate_token;           /* hal/validate.h; NULL when off */
  bool small; /* room for one command buffer: may be the device's spare */
  size_t command_buffer_count;
  hali_hal_command_buffer_t *command_buffers[]; /* retained */
} hali_hal_submission_t;

/* local-task: one queue runner thread. */
typedef struct hali_hal_runner_t {
  hali_hal_device_t *device;
  pthread_t thread;
  uint32_t trace_tid;  /* 1 for the first runner, then after the workers */
  uint32_t index;      /* 0, 1, ...: the lowest idle runner takes work */
  /* Guarded by the device mutex. */
  bool busy;           /* running a submission */
  bool waiting;        /* asleep on |cond|, nobody has woken it yet */
  bool spinning;       /* runner 0 looking for work without the mutex:
                        * it will see what is queued meanwhile */
  /* Runner 0's: how long it spins next time its queue empties (adaptive:
   * hali_hal_local_task_main). */
  _Atomic int64_t spin_ns; /* (atomic only for hali_hal_device_runner_spin_ns) */
  /* When it was last woken for work while asleep (0: not since it went
   * idle).  Guarded by the device mutex. */
  int64_t woken_ns;
  pthread_cond_t cond;
  /* The worker it holds while it replays one command buffer (none across
   * a collective: hal/worker_pool.h), or NULL.  The runner's own. */
  hali_hal_worker_t *held;
} hali_hal_runner_t;

/* local-sync: one registration of a semaphore timepoint for the head. */
typedef struct hali_hal_arm_t {
  hali_hal_semaphore_timepoint_t timepoint;
  struct hali_hal_arm_t *next;       /* in device->arms */
  hali_hal_device_t *device;
  hali_hal_semaphore_t *semaphore;   /* retained */
  uint64_t submission_id;
} hali_hal_arm_t;

struct hali_hal_device_t {
  hali_ref_t ref;
  hali_hal_device_kind_t kind;
  uint8_t validate; /* hali_hal_validate_mode_t; 0 = off */
  hali_hal_allocator_t *allocator; /* owned */
  /* The command buffers it makes are recycled through this (owned). */
  hali_hal_command_buffer_cache_t *command_cache;
  /* The fences it makes come from this pool (owned: closed at destroy;
   * each fence's block keeps it until it comes back). */
  hali_hal_fence_pool_t *fence_pool;
  /* One freed submission with room for one command buffer, kept for the
   * next (NULL: none).  Exchanged atomically: a submission is freed on
   * whichever thread completed it. */
  _Atomic(struct hali_hal_submission_t *) spare_submission;
  pthread_mutex_t mutex;
  pthread_cond_t cond; /* broadcast when a submission completes, when an arm
                          callback finishes and when work is queued */
  /* Guarded by |mutex|. */
  hali_hal_submission_t *head;
  hali_hal_submission_t *tail;
  uint64_t next_id;
  size_t pending; /* queued or executing */
  hali_hal_tracer_t tracer; /* |now| NULL = off */
  bool abandoning; /* hali_hal_device_abandon: stop waiting on fences */
  /* local-task: submissions taken by a runner and not yet completed. */
  size_t running;
  /* local-task: counts enqueues and fired timepoints (written under
   * |mutex|, read without it by runner 0 while it spins for work) and
   * whether it spins at all (more than one core online). */
  atomic_uint_fast64_t work_events;
  bool spin;

  /* local-sync.  Guarded by |mutex| except the scratch, which only the
   * pumping thread touches. */
  bool pumping;
  uint64_t armed_for;   /* id of the submission an arm is pending for */
  hali_hal_arm_t *arms; /* registered arms (not yet fired/cancelled) */
  size_t arms_live;     /* registered + callbacks still running */
  void *scratch;
  size_t scratch_size;

  /* local-task (|arms|, |arms_live| above hold its timepoints too). */
  bool shutdown;
  uint32_t runner_count;    /* started */
  uint32_t runner_slots;    /* allocated, their conds initialized */
  hali_hal_runner_t *runners;
  hali_hal_worker_pool_t *pool;

  /* Collectives: the default channel (made on first use unless given) and
   * the timeout it is made with; guarded by |channel_mutex|. */
  pthread_mutex_t channel_mutex;
  hali_hal_channel_t *channel;
  hali_timeout_ns_t collective_timeout_ns;
};

/* ---- Parameters and names. ---- */

void hali_hal_device_params_initialize(hali_hal_device_params_t *out_params) {
  memset(out_params, 0, sizeof(*out_params));
  out_params->kind = HALI_HAL_DEVICE_LOCAL_SYNC;
}

const char *hali_hal_device_kind_name(hali_hal_device_kind_t kind) {
  switch (kind) {
    case HALI_HAL_DEVICE_LOCAL_SYNC:
      return "local-sync";
    case HALI_HAL_DEVICE_LOCAL_TASK:
      return "local-task";
  }
  return "?";
}

hali_status_t hali_hal_device_kind_parse(const char *name,
                                         hali_hal_device_kind_t *out_kind) {
  if (strcmp(name, "local-sync") == 0) {
    *out_kind = HALI_HAL_DEVICE_LOCAL_SYNC;
    return HALI_OK;
  }
  if (strcmp(name, "local-task") == 0) {
    *out_kind = HALI_HAL_DEVICE_LOCAL_TASK;
    return HALI_OK;
  }
  *out_kind = HALI_HAL_DEVICE_LOCAL_SYNC;
  return hali_status_make(HALI_STATUS_NOT_FOUND,
                          "unknown device '%s' (known: local-sync, "
                          "local-task)",
                          name);
}

hali_hal_device_kind_t hali_hal_device_kind(const hali_hal_device_t *device) {
  return device->kind;
}

int64_t hali_hal_device_runner_spin_ns(hali_hal_device_t *device) {
  if (device->kind != HALI_HAL_DEVICE_LOCAL_TASK || !device->runner_count ||
      !device->spin)
    return 0;
  return atomic_load_explicit(&device->runners[0].spin_ns,
                              memory_order_relaxed);
}

uint32_t hali_hal_device_worker_count(const hali_hal_device_t *device) {
  return device->pool ? hali_hal_worker_pool_size(device->pool) : 1;
}

hali_hal_allocator_t *hali_hal_device_allocator(
    const hali_hal_device_t *device) {
  return device->allocator;
}

/* ---- Running one submission (both devices). ---- */

static void hali_hal_submission_free(hali_hal_device_t *device,
                                     hali_hal_submission_t *sub) {
  hali_hal_fence_release(sub->wait_fence);
  hali_hal_fence_release(sub->signal_fence);
  hali_hal_buffer_release(sub->buffer);
  hali_hal_stop_release(sub->stop);
  for (size_t i = 0; i < sub->command_buffer_count; ++i)
    hali_hal_command_buffer_release(sub->command_buffers[i]);
  if (HALI_UNLIKELY(sub->validate_token != NULL))
    hali_hal_validate_submission_release(sub->validate_token);
  if (sub->small) {
    /* Kept for the next one (the device outlives its submissions: its
     * destroy waits until none is pending). */
    sub = atomic_exchange_explicit(&device->spare_submission, sub,
                                   memory_order_acq_rel);
  }
  hali_free(sub);
}

static hali_status_t hali_hal_local_sync_run_dispatch(
    void *self, hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch, hali_hal_stop_t *stop) {
  hali_hal_device_t *device = self;
  size_t scratch_size =
      hali_hal_executable_export(executable, ordinal)->scratch_size;
  if (scratch_size > device->scratch_size) {
    hali_aligned_free(device->scratch);
    device->scratch = NULL;
    device->scratch_size = 0;
    if (!(device->scratch = hali_aligned_alloc(64, scratch_size))) {
      device->scratch = NULL;
      return hali_status_annotate(hali_status_oom(),
                                  "for %zu bytes of scratch",
                                  scratch_size);
    }
    device->scratch_size = scratch_size;
  }
  uint64_t total = hali_hal_dispatch_workgroup_total(dispatch);
  const hali_hal_tracer_t *t = device->tracer.now ? &device->tracer : NULL;
  int64_t t0 = t ? t->now(t->user) : 0;
  hali_status_t status = hali_hal_dispatch_run_workgroups(
      executable, ordinal, dispatch, 0, total, 0,
      scratch_size ? device->scratch : NULL, scratch_size, stop);
  if (t) hali_hal_trace_dispatch(t, executable, ordinal, 0, 0, total, t0);
  return status;
}

/* local-sync: its worker 0, with the device's scratch grown to at least
 * |need| bytes, for a replay's op loop; false when that scratch cannot be
 * had (the dispatches then go through the runner, which fails the first
 * that needs it).  Only the pumping thread calls it. */
static bool hali_hal_local_sync_lend(hali_hal_device_t *device, size_t need,
                                     hali_hal_replay_worker_t *out) {
  if (need > device->scratch_size) {
    void *scratch = hali_aligned_alloc(64, need);
    if (!scratch) return false;
    hali_aligned_free(device->scratch);
    device->scratch = scratch;
    device->scratch_size = need;
  }
  *out = (hali_hal_replay_worker_t){
      .worker_id = 0,
      .scratch = device->scratch,
      .scratch_size = device->scratch_size,
  };
  return true;
}

/* |self| is the runner.  Every grid goes to the worker pool, which takes
 * dispatches from several runners at once (hal/worker_pool.h), so that
 * workgroup ids stay in [0, workers) (include/hali/kernel.h) even when
 * independent submissions run together. */
static hali_status_t hali_hal_local_task_run_dispatch(
    void *self, hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch, hali_hal_stop_t *stop) {
  hali_hal_runner_t *runner = self;
  hali_hal_device_t *device = runner->device;
  return hali_hal_worker_pool_dispatch_held(
      device->pool, runner->held, executable, ordinal, dispatch,
      device->tracer.now ? &device->tracer : NULL, stop);
}

/* Runs |sub| on the calling thread: |runner| is the local-task runner
 * (NULL on local-sync). */
static hali_status_t hali_hal_submission_run(hali_hal_device_t *device,
                                             hali_hal_runner_t *runner,
                                             hali_hal_submission_t *sub) {
  switch (sub->kind) {
    case HALI_HAL_SUBMISSION_EXECUTE: {
      hali_hal_dispatch_runner_t run = runner
                                           ? hali_hal_local_task_run_dispatch
                                           : hali_hal_local_sync_run_dispatch;
      void *self = runner ? (void *)runner : (void *)device;
      uint32_t tid = runner ? runner->trace_tid : 0;
      const hali_hal_tracer_t *t = device->tracer.now ? &device->tracer : NULL;
      /* Validation: unwritten reads first, then every dispatch through the
       * guard-page runner (hal/validate.h). */
      hali_hal_validate_runner_t guarded = {run, self};
      if (HALI_UNLIKELY(device->validate)) {
        HALI_RETURN_IF_ERROR_PLAIN(hali_hal_validate_submission_run(
            sub->validate_token, sub->command_buffers,
            sub->command_buffer_count));
        run = hali_hal_validate_runner;
        self = &guarded;
      }
      for (size_t i = 0; i < sub->command_buffer_count; ++i) {
        int64_t t0 = t ? t->now(t->user) : 0;
        /* local-task: one worker held for the whole command buffer, so
         * that its one-workgroup dispatches take no lock (not across a
         * collective, which may wait for another queue's dispatches). */
        hali_hal_command_buffer_t *cb = sub->command_buffers[i];
        /* A bound command buffer runs its recording with its table
         * (hal/binding_table.h). */
        const hali_hal_binding_table_t *table = cb->base ? &cb->table : NULL;
        if (cb->base) cb = cb->base;
        if (runner && cb->command_count >= 2 && !cb->collective_count)
          runner->held = hali_hal_worker_pool_hold(device->pool);
        /* The worker a replay's one-workgroup C kernels run as, called
         * from its op loop (hal/command_list.h): the held one on
         * local-task, the device's own scratch on local-sync.  Not under
         * validation, whose runner wraps every dispatch. */
        hali_hal_replay_worker_t lent, *lend = NULL;
        if (!device->validate && !t &&
            hali_hal_command_buffer_has_op_loop(cb)) {
          size_t need = hali_hal_command_buffer_replay_scratch(cb);
          if (runner ? runner->held &&
                           hali_hal_worker_pool_lend(runner->held, need,
                                                     &lent.worker_id,
                                                     &lent.scratch,
                                                     &lent.scratch_size)
                     : device->kind == HALI_HAL_DEVICE_LOCAL_SYNC &&
                           hali_hal_local_sync_lend(device, need, &lent))
            lend = &lent;
        }
        hali_status_t s = hali_hal_command_buffer_execute_lent(
            cb, table, lend, run, self, t, sub->stop);
        if (runner && runner->held) {
          hali_hal_worker_pool_unhold(device->pool, runner->held);
          runner->held = NULL;
        }
        if (t) {
          char name[64], args[96];
          snprintf(name, sizeof(name), "command buffer #%u",
                   ((hali_ref_t *)sub->command_buffers[i])->id);
          snprintf(args, sizeof(args), "{\"submission\":%" PRIu64
                   ",\"commands\":%zu}", sub->id,
                   hali_hal_command_buffer_command_count(sub->command_buffers[i]));
          t->span(t->user, "command_buffer", name, tid, t0, t->now(t->user),
                  args);
        }
        if (s) {
          for (size_t j = i + 1; j < sub->command_buffer_count; ++j)
            hali_hal_command_buffer_abort_collectives(sub->command_buffers[j],
                                                      0, s);
          return hali_status_annotate(s, "in command buffer %zu of %zu", i,
                                      sub->command_buffer_count);
        }
      }
      return HALI_OK;
    }
    case HALI_HAL_SUBMISSION_ALLOCA:
      HALI_RETURN_IF_ERROR(hali_hal_buffer_commit(sub->buffer),
                           "in queue_alloca of %" PRIu64 " bytes",
                           hali_hal_buffer_length(sub->buffer));
      return HALI_OK;
    case HALI_HAL_SUBMISSION_DEALLOCA:
      HALI_RETURN_IF_ERROR(hali_hal_buffer_decommit(sub->buffer),
                           "in queue_dealloca of %" PRIu64 " bytes",
                           hali_hal_buffer_length(sub->buffer));
      return HALI_OK;
  }
  return hali_status_make(HALI_STATUS_INTERNAL, "unknown submission kind");
}

/* Runs |sub| whose wait fence is reached or failed (|wait_status|, owned),
 * then signals or fails its signal fence.  Takes no device lock.
 * |runner|: the local-task runner running it (NULL: local-sync, or
 * failing it without running). */
static void hali_hal_submission_complete(hali_hal_device_t *device,
                                         hali_hal_runner_t *runner,
                                         hali_hal_submission_t *sub,
                                         hali_status_t wait_status) {
  const hali_hal_tracer_t *t = device->tracer.now ? &device->tracer : NULL;
  int64_t t0 = t ? t->now(t->user) : 0;
  hali_status_code_t stopped =
      wait_status ? HALI_STATUS_OK : hali_hal_stop_check(sub->stop);
  const bool never_ran = wait_status || stopped;
  hali_status_t status =
      wait_status ? hali_status_annotate(wait_status,
                                         "the wait fence of queue submission "
                                         "%" PRIu64 " failed",
                                         sub->id)
      : stopped   ? hali_status_annotate(hali_hal_stop_status(stopped),
                                         "abandoned before it started")
                  : hali_hal_submission_run(device, runner, sub);
  if (never_ran && sub->kind == HALI_HAL_SUBMISSION_EXECUTE)
    for (size_t i = 0; i < sub->command_buffer_count; ++i)
      hali_hal_command_buffer_abort_collectives(sub->command_buffers[i], 0,
                                                status);
  if (t) {
    static const char *const kinds[] = {"execute", "alloca", "dealloca"};
    char name[64], args[160];
    snprintf(name, sizeof(name), "submission %" PRIu64 " (%s)", sub->id,
             (unsigned)sub->kind < 3 ? kinds[sub->kind] : "?");
    snprintf(args, sizeof(args),
             "{\"wait_fence\":%u,\"signal_fence\":%u,\"status\":\"%s\"}",
             sub->wait_fence ? ((hali_ref_t *)sub->wait_fence)->id : 0,
             sub->signal_fence ? ((hali_ref_t *)sub->signal_fence)->id : 0,
             hali_status_code_name(hali_status_code(status)));
    t->span(t->user, "queue", name,
            runner ? runner->trace_tid
                   : device->kind == HALI_HAL_DEVICE_LOCAL_TASK ? 1 : 0,
            t0, t->now(t->user), args);
  }
  if (status) {
    status = hali_status_annotate(status, "queue submission %" PRIu64 " on %s",
                                  sub->id,
                                  hali_hal_device_kind_name(device->kind));
    /* With no signal fence nobody can observe the failure. */
    if (sub->signal_fence)
      hali_hal_fence_fail_untraced(sub->signal_fence, status);
    else
      hali_status_free(status);
  } else {
    status = hali_hal_fence_signal_untraced(sub->signal_fence);
    /* A signal fence that cannot be signalled (already failed or already
     * past the value): mark it failed so waiters see why. */
    if (status && sub->signal_fence)
      hali_hal_fence_fail_untraced(sub->signal_fence, status);
    else
      hali_status_free(status);
  }
}

/* ---- local-sync: pumping and arming. ---- */

static void hali_hal_local_sync_pump(hali_hal_device_t *device);

static void hali_hal_local_sync_on_ready(void *user_data,
                                         hali_status_t status) {
  hali_hal_arm_t *arm = user_data;
  hali_hal_device_t *device = arm->device;
  pthread_mutex_lock(&device->mutex);
  for (hali_hal_arm_t **link = &device->arms; *link; link = &(*link)->next) {
    if (*link == arm) {
      *link = arm->next;
      break;
    }
  }
  if (device->armed_for == arm->submission_id) device->armed_for = 0;
  pthread_mutex_unlock(&device->mutex);
  hali_hal_semaphore_release(arm->semaphore);
  hali_free(arm);
  hali_hal_local_sync_pump(device);
  /* Last touch of |device|: destroy waits for arms_live to reach 0. */
  pthread_mutex_lock(&device->mutex);
  device->arms_live--;
  pthread_cond_broadcast(&device->cond);
  pthread_mutex_unlock(&device->mutex);
}

/* Cancels every registered arm; arms whose callbacks are already running
 * stay listed until those callbacks unlink them.  Caller holds the device
 * mutex (lock order device -> semaphore allows cancelling under it). */
static void hali_hal_local_sync_disarm(hali_hal_device_t *device) {
  hali_hal_arm_t **link = &device->arms;
  while (*link) {
    hali_hal_arm_t *arm = *link;
    if (hali_hal_semaphore_cancel(arm->semaphore, &arm->timepoint)) {
      *link = arm->next;
      hali_hal_semaphore_release(arm->semaphore);
      hali_free(arm);
      device->arms_live--;
    } else {
      link = &arm->next; /* firing: its callback unlinks it */
    }
  }
  device->armed_for = 0;
}

/* Registers a timepoint on EVERY unreached point of |sub|'s wait fence, so
 * that any of them reaching its value or failing pumps again (a failure of
 * a later point must not wait for earlier points).  Returns false when it
 * registered nothing because the fence is ready or failed by now (pump
 * must query again).  Caller holds the device mutex. */
static bool hali_hal_local_sync_arm(hali_hal_device_t *device,
                                    hali_hal_submission_t *sub) {
  hali_hal_local_sync_disarm(device);
  bool armed = false;
  size_t count = hali_hal_fence_point_count(sub->wait_fence);
  for (size_t i = 0; i < count; ++i) {
    hali_hal_semaphore_t *semaphore = NULL;
    uint64_t value = 0;
    hali_hal_fence_point(sub->wait_fence, i, &semaphore, &value);
    if (!semaphore) break;
    hali_hal_arm_t *arm = hali_calloc(1, sizeof(*arm));
    if (!arm) {
      /* Cannot park without memory: block instead, which is what a
       * local-sync device without timepoints would do. */
      hali_status_free(hali_hal_semaphore_wait(semaphore, value,
                                               HALI_INFINITE));
      continue;
    }
    arm->device = device;
    arm->semaphore = semaphore;
    arm->submission_id = sub->id;
    hali_hal_semaphore_retain(semaphore);
    if (hali_hal_semaphore_notify(semaphore, value, &arm->timepoint,
                                  hali_hal_local_sync_on_ready, arm)) {
      arm->next = device->arms;
      device->arms = arm;
      device->arms_live++;
      armed = true;
      continue;
    }
    /* Reached, or failed: a failure makes the fence ready now. */
    uint64_t current = 0;
    hali_status_t failure = hali_hal_semaphore_query(semaphore, &current);
    hali_hal_semaphore_release(semaphore);
    hali_free(arm);
    if (failure) {
      hali_status_free(failure);
      hali_hal_local_sync_disarm(device);
      return false;
    }
  }
  if (armed) device->armed_for = sub->id;
  return armed;
}

/* The pump with the device mutex held (and held again when it returns). */
static void hali_hal_local_sync_pump_locked(hali_hal_device_t *device) {
  /* The pumping thread re-checks the head after every submission. */
  if (device->pumping) return;
  device->pumping = true;
  for (;;) {
    hali_hal_submission_t *sub = device->head;
    if (!sub) break;
    bool ready = true;
    hali_status_t wait_status = hali_hal_fence_query_untraced(sub->wait_fence, &ready);
    /* Its submitter gave up: complete() fails it without waiting. */
    if (!ready && hali_hal_stop_check(sub->stop)) ready = true;
    if (!ready) {
      if (device->armed_for == sub->id) break;  /* a callback will pump */
      if (hali_hal_local_sync_arm(device, sub)) break;
      /* Every point got reached meanwhile: query again. */
      continue;
    }
    device->head = sub->next;
    if (!device->head) device->tail = NULL;
    pthread_mutex_unlock(&device->mutex);
    hali_hal_submission_complete(device, NULL, sub, wait_status);
    hali_hal_submission_free(device, sub);
    pthread_mutex_lock(&device->mutex);
    device->pending--;
    pthread_cond_broadcast(&device->cond);
  }
  device->pumping = false;
}

static void hali_hal_local_sync_pump(hali_hal_device_t *device) {
  pthread_mutex_lock(&device->mutex);
  hali_hal_local_sync_pump_locked(device);
  pthread_mutex_unlock(&device->mutex);
}

/* ---- local-task: the queue runners. ---- */

/* How long runner 0 spins for new work before it sleeps, at most; a spin
 * that finds nothing halves the next one, down to none below the
 * minimum, and work arriving within the maximum after the queue emptied
 * restores it (hali_hal_local_task_main). */
#define HALI_HAL_RUNNER_SPIN_NS 20000
#define HALI_HAL_RUNNER_SPIN_MIN_NS 1000

/* Wakes the lowest-numbered runner asleep (one is enough: a runner that
 * takes a submission wakes the next if more are queued, and busy ones
 * look again when they finish).  Caller holds the device mutex. */
static hali_hal_runner_t *hali_hal_local_task_pick(hali_hal_device_t *device) {
  /* Runner 0 spinning takes it (the others would defer to it anyway). */
  if (device->runner_count && device->runners[0].spinning) return NULL;
  for (uint32_t i = 0; i < device->runner_count; ++i) {
    hali_hal_runner_t *r = &device->runners[i];
    if (r->waiting) {
      r->waiting = false;
      /* (a clock read only when a wake-up is paid for anyway) */
      if (r->index == 0) r->woken_ns = hali_clock_now_ns();
      return r;
    }
  }
  return NULL;
}

static void hali_hal_local_task_wake(hali_hal_device_t *device) {
  hali_hal_runner_t *r = hali_hal_local_task_pick(device);
  if (r) pthread_cond_signal(&r->cond);
}

/* Signals |r| (from hali_hal_local_task_pick under the mutex) once the
 * caller has dropped the mutex, so that the woken runner does not block
 * on it at once.  Safe: |r| was asleep in its wait (|waiting| is set and
 * cleared under the mutex around it), and a wake-up that comes after it
 * woke otherwise only makes a later wait look again. */
static void hali_hal_local_task_signal(hali_hal_runner_t *r) {
  if (r) pthread_cond_signal(&r->cond);
}

/* Wakes every runner (shutdown, abandon).  Caller holds the mutex. */
static void hali_hal_local_task_wake_all(hali_hal_device_t *device) {
  for (uint32_t i = 0; i < device->runner_count; ++i) {
    device->runners[i].waiting = false;
    pthread_cond_signal(&device->runners[i].cond);
  }
}

/* A timepoint of a waiting submission fired: wake a runner. */
static void hali_hal_local_task_on_ready(void *user_data,
                                         hali_status_t status) {
  (void)status;
  hali_hal_arm_t *arm = user_data;
  hali_hal_device_t *device = arm->device;
  pthread_mutex_lock(&device->mutex);
  for (hali_hal_arm_t **link = &device->arms; *link; link = &(*link)->next) {
    if (*link == arm) {
      *link = arm->next;
      break;
    }
  }
  atomic_fetch_add_explicit(&device->work_events, 1, memory_order_release);
  hali_hal_runner_t *wake = hali_hal_local_task_pick(device);
  pthread_mutex_unlock(&device->mutex);
  hali_hal_local_task_signal(wake);
  hali_hal_semaphore_release(arm->semaphore);
  hali_free(arm);
  /* Last touch of |device|: destroy waits for arms_live to reach 0. */
  pthread_mutex_lock(&device->mutex);
  device->arms_live--;
  pthread_cond_broadcast(&device->cond);
  pthread_mutex_unlock(&device->mutex);
}

/* Cancels the timepoints registered for submission |id| (0: all); those
 * whose callbacks are running unlink themselves.  Caller holds the device
 * mutex. */
static void hali_hal_local_task_disarm(hali_hal_device_t *device,
                                       uint64_t id) {
  hali_hal_arm_t **link = &device->arms;
  while (*link) {
    hali_hal_arm_t *arm = *link;
    if ((!id || arm->submission_id == id) &&
        hali_hal_semaphore_cancel(arm->semaphore, &arm->timepoint)) {
      *link = arm->next;
      hali_hal_semaphore_release(arm->semaphore);
      hali_free(arm);
      device->arms_live--;
    } else {
      link = &arm->next;
    }
  }
}

/* Registers a timepoint on every unreached point of |sub|'s wait fence.
 * False when a point turned out reached or failed meanwhile (look at the
 * fence again).  Without memory for a timepoint the runners' 20 ms look
 * finds the submission ready instead.  Caller holds the device mutex. */
static bool hali_hal_local_task_arm(hali_hal_device_t *device,
                                    hali_hal_submission_t *sub) {
  sub->armed = true;
  size_t count = hali_hal_fence_point_count(sub->wait_fence);
  for (size_t i = 0; i < count; ++i) {
    hali_hal_semaphore_t *semaphore = NULL;
    uint64_t value = 0;
    hali_hal_fence_point(sub->wait_fence, i, &semaphore, &value);
    if (!semaphore) break;
    hali_hal_arm_t *arm = hali_calloc(1, sizeof(*arm));
    if (!arm) continue;
    arm->device = device;
    arm->semaphore = semaphore;
    arm->submission_id = sub->id;
    hali_hal_semaphore_retain(semaphore);
    if (hali_hal_semaphore_notify(semaphore, value, &arm->timepoint,
                                  hali_hal_local_task_on_ready, arm)) {
      arm->next = device->arms;
      device->arms = arm;
      device->arms_live++;
      continue;
    }
    hali_hal_semaphore_release(semaphore);
    hali_free(arm);
    return false;
  }
  return true;
}

/* Whether |sub| can be taken now: its wait fence is reached or failed
 * (|*out_wait_status| owned), its submitter gave up (complete() fails
 * it), or the device is being abandoned.  Caller holds the device
 * mutex. */
static bool hali_hal_local_task_ready(hali_hal_device_t *device,
                                      hali_hal_submission_t *sub,
                                      hali_status_t *out_wait_status) {
  *out_wait_status = HALI_OK;
  for (;;) {
    bool ready = false;
    hali_status_t q = hali_hal_fence_query_untraced(sub->wait_fence, &ready);
    if (q) {
      *out_wait_status = q;
      return true;
    }
    if (ready || hali_hal_stop_check(sub->stop)) return true;
    if (device->abandoning) {
      *out_wait_status = hali_status_make(
          HALI_STATUS_CANCELLED,
          "abandoned: the device was shut down while this submission "
          "waited on a fence nobody signalled");
      return true;
    }
    if (sub->armed || hali_hal_local_task_arm(device, sub)) return false;
    /* A point was reached while arming: look again. */
  }
}

static void *hali_hal_local_task_main(void *arg) {
  hali_hal_runner_t *runner = arg;
  hali_hal_device_t *device = runner->device;
  bool spun = false; /* since it last took work (below) */
  /* Runner 0: the queue emptied at |idle_since| and no work came since. */
  bool idle = false;
  int64_t idle_since = 0;
  pthread_mutex_lock(&device->mutex);
  for (;;) {
    /* The oldest submission that is ready, taken by the lowest-numbered
     * idle runner (all of them wake on every change, and scan under the
     * mutex): work done one submission at a time stays on runner 0, as
     * it was on the single queue thread (trace track 1). */
    bool lower_idle = false;
    for (uint32_t i = 0; i < runner->index && !lower_idle; ++i)
      lower_idle = !device->runners[i].busy;
    hali_hal_submission_t *sub = NULL, *prev = NULL;
    hali_status_t wait_status = HALI_OK;
    for (hali_hal_submission_t *s = lower_idle ? NULL : device->head; s;
         prev = s, s = s->next) {
      if (hali_hal_local_task_ready(device, s, &wait_status)) {
        sub = s;
        break;
      }
    }
    if (sub) {
      /* Work soon after the queue emptied: spinning pays again (a
       * submit, await, submit loop).  Long gaps leave the spin off, so
       * an idle host costs this thread nothing.  The gap ends when the
       * work woke it, not when it got the core back. */
      if (idle) {
        int64_t came = runner->woken_ns ? runner->woken_ns : hali_clock_now_ns();
        if (came - idle_since <= HALI_HAL_RUNNER_SPIN_NS)
          atomic_store_explicit(&runner->spin_ns, HALI_HAL_RUNNER_SPIN_NS,
                                memory_order_relaxed);
      }
      idle = false;
      spun = false;
      if (prev) prev->next = sub->next;
      else device->head = sub->next;
      if (device->tail == sub) device->tail = prev;
      sub->next = NULL;
      if (sub->armed) hali_hal_local_task_disarm(device, sub->id);
      /* Another may be ready too: let the next idle runner look. */
      if (device->head) hali_hal_local_task_wake(device);
      device->running++;
      runner->busy = true;
      pthread_mutex_unlock(&device->mutex);
      hali_hal_submission_complete(device, runner, sub, wait_status);
      hali_hal_submission_free(device, sub);
      pthread_mutex_lock(&device->mutex);
      runner->busy = false;
      device->running--;
      device->pending--;
      pthread_cond_broadcast(&device->cond);
      continue;
    }
    if (!device->head && device->shutdown) break; /* drained */
    /* Runner 0 with an empty queue first spins a little (about 20 us,
     * on a machine with more than one core): work submitted one piece
     * at a time (submit, await, submit again) then finds it awake, and
     * neither side pays a futex wake-up and a thread switch.  Anything
     * queued meanwhile counts |work_events|; then it looks again.  The
     * spin adapts (|spin_ns|): one that finds nothing halves the next,
     * down to none, so a host that submits rarely does not pay ~20 us of
     * this thread's CPU per submission; work that comes within 20 us of
     * the queue emptying turns it back on. */
    if (!device->head && runner->index == 0 && !idle) {
      idle = true;
      idle_since = hali_clock_now_ns();
      runner->woken_ns = 0;
    }
    const int64_t spin_ns =
        atomic_load_explicit(&runner->spin_ns, memory_order_relaxed);
    if (!device->head && device->spin && runner->index == 0 && !spun &&
        spin_ns > 0) {
      spun = true;
      uint64_t seen =
          atomic_load_explicit(&device->work_events, memory_order_acquire);
      runner->spinning = true;
      pthread_mutex_unlock(&device->mutex);
      bool more = false;
      int64_t until = hali_clock_now_ns() + spin_ns;
      /* Yielding between looks: on a busy machine the submitter may be
       * waiting for this core. */
      do {
        for (int k = 0; k < 16 && !more; ++k) {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
          more = atomic_load_explicit(&device->work_events,
                                      memory_order_acquire) != seen;
        }
        if (!more) sched_yield();
      } while (!more && hali_clock_now_ns() < until);
      if (!more)
        atomic_store_explicit(
            &runner->spin_ns,
            spin_ns / 2 < HALI_HAL_RUNNER_SPIN_MIN_NS ? 0 : spin_ns / 2,
            memory_order_relaxed);
      pthread_mutex_lock(&device->mutex);
      runner->spinning = false;
      continue; /* look again (also at |shutdown|) before sleeping */
    }
    /* Sleep until woken (new work, a timepoint, shutdown); while
     * submissions wait, also every 20 ms (stops, abandon, fences that
     * gained points after they were armed). */
    runner->waiting = true;
    if (!device->head) {
      pthread_cond_wait(&runner->cond, &device->mutex);
    } else {
      struct timespec deadline;
      hali_deadline_from_timeout(20000000, &deadline);
      pthread_cond_timedwait(&runner->cond, &device->mutex, &deadline);
    }
    runner->waiting = false;
  }
  pthread_mutex_unlock(&device->mutex);
  return NULL;
}

void hali_hal_device_abandon(hali_hal_device_t *device) {
  pthread_mutex_lock(&device->mutex);
  device->abandoning = true;
  hali_hal_submission_t *subs = device->head;
  device->head = device->tail = NULL;
  if (device->kind == HALI_HAL_DEVICE_LOCAL_SYNC)
    hali_hal_local_sync_disarm(device);
  else
    hali_hal_local_task_disarm(device, 0);
  if (device->kind == HALI_HAL_DEVICE_LOCAL_TASK)
    hali_hal_local_task_wake_all(device);
  pthread_mutex_unlock(&device->mutex);
  while (subs) {
    hali_hal_submission_t *next = subs->next;
    hali_hal_submission_complete(
        device, NULL, subs,
        hali_status_make(HALI_STATUS_CANCELLED,
                         "abandoned: the device was shut down while this "
                         "submission waited on a fence nobody signalled"));
    hali_hal_submission_free(device, subs);
    pthread_mutex_lock(&device->mutex);
    device->pending--;
    pthread_cond_broadcast(&device->cond);
    pthread_mutex_unlock(&device->mutex);
    subs = next;
  }
}

hali_status_t hali_hal_device_create_command_buffer(
    hali_hal_device_t *device, hali_hal_command_buffer_mode_bits_t mode,
    hali_hal_command_category_bits_t categories,
    hali_hal_command_buffer_t **out_command_buffer) {
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_command_buffer_create_cached(device->command_cache, mode,
                                           categories, out_command_buffer));
  (*out_command_buffer)->validate = device->validate;
  if (HALI_UNLIKELY(device->tracer.line != NULL)) {
    hali_hal_command_buffer_set_tracer(*out_command_buffer, &device->tracer);
    hali_hal_tracer_printf(&device->tracer,
                           "[hal] command_buffer.create mode=%u "
                           "categories=%u -> !hal.command_buffer#%u",
                           mode, categories,
                           hali_hal_trace_id(*out_command_buffer));
  }
  return HALI_OK;
}

hali_status_t hali_hal_device_create_fence(hali_hal_device_t *device,
                                          hali_hal_fence_t **out_fence) {
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_hal_fence_create_pending_pooled(device->fence_pool, out_fence));
  if (HALI_UNLIKELY(device->tracer.line != NULL)) {
    hali_hal_fence_trace_to(*out_fence, device->allocator);
    hali_hal_tracer_printf(&device->tracer, "[hal] fence.create -> !hal.fence#%u",
                           hali_hal_trace_id(*out_fence));
  }
  return HALI_OK;
}

const hali_hal_tracer_t *hali_hal_device_tracer(
    const hali_hal_device_t *device) {
  return device && device->tracer.line ? &device->tracer : NULL;
}

void hali_hal_device_set_tracer(hali_hal_device_t *device,
                                const hali_hal_tracer_t *tracer) {
  pthread_mutex_lock(&device->mutex);
  if (tracer) device->tracer = *tracer;
  else memset(&device->tracer, 0, sizeof(device->tracer));
  pthread_mutex_unlock(&device->mutex);
  hali_hal_allocator_set_tracer(device->allocator, tracer);
}

/* Whether |sub| is ready or failed (it completes without anyone else's
 * help).  Caller holds the device mutex. */
static bool hali_hal_submission_can_complete(const hali_hal_device_t *device,
                                             hali_hal_submission_t *sub) {
  bool ready = false;
  hali_status_t s = hali_hal_fence_query_untraced(sub->wait_fence, &ready);
  if (s) ready = true; /* it completes, failing */
  hali_status_free(s);
  /* Being given up (abandon, or its submitter's stop): a local-task runner
   * fails it within ~20 ms, local-sync at its next pump. */
  if (!ready && device->kind == HALI_HAL_DEVICE_LOCAL_TASK &&
      (device->abandoning || hali_hal_stop_check(sub->stop)))
    ready = true;
  return ready;
}

bool hali_hal_device_queue_can_progress(hali_hal_device_t *device) {
  pthread_mutex_lock(&device->mutex);
  bool ready = false;
  if (device->kind == HALI_HAL_DEVICE_LOCAL_TASK) {
    /* Any submission may be the next to run, not only the oldest. */
    ready = device->running != 0;
    for (hali_hal_submission_t *s = device->head; s && !ready; s = s->next)
      ready = hali_hal_submission_can_complete(device, s);
  } else if (device->head) {
    /* A failed wait fence also lets the submission complete (failing). */
    bool r = false;
    hali_status_t st = hali_hal_fence_query_untraced(device->head->wait_fence,
                                                     &r);
    ready = st || r;
    hali_status_free(st);
  }
  pthread_mutex_unlock(&device->mutex);
  return ready;
}

void hali_hal_device_queue_state(hali_hal_device_t *device, bool *out_pending,
                                 hali_hal_fence_t **out_blocked_on) {
  *out_blocked_on = NULL;
  pthread_mutex_lock(&device->mutex);
  *out_pending = device->pending != 0;
  if (device->kind == HALI_HAL_DEVICE_LOCAL_TASK) {
    /* Blocked only when nothing runs and no submission can start: then
     * the oldest waiting one names the fence. */
    bool progress = device->running != 0;
    for (hali_hal_submission_t *s = device->head; s && !progress; s = s->next)
      progress = hali_hal_submission_can_complete(device, s);
    if (!progress && device->head) {
      *out_blocked_on = device->head->wait_fence;
      hali_hal_fence_retain(device->head->wait_fence);
    }
  } else if (device->head) {
    hali_hal_submission_t *next = device->head;
    bool ready = false;
    hali_status_t s = hali_hal_fence_query_untraced(next->wait_fence, &ready);
    if (s) ready = true; /* it completes, failing */
    hali_status_free(s);
    if (!ready) {
      *out_blocked_on = next->wait_fence;
      hali_hal_fence_retain(next->wait_fence);
    }
  }
  pthread_mutex_unlock(&device->mutex);
}

/* ---- Submitting. ---- */

/* local-task: a submission this small runs on the submitting thread
 * when nothing is queued and its wait fence is reached (below): a handful
 * of fills, copies and updates of at most 64 KiB in all, which take less
 * time than handing them to a runner and waking the host again.  Never a
 * dispatch (its kernel's duration is unknown, and its workgroups need a
 * worker id) or a collective (it may wait for other queues). */
#define HALI_HAL_INLINE_MAX_BYTES ((uint64_t)64 << 10)
enum { HALI_HAL_INLINE_MAX_COMMANDS = 16 };

static bool hali_hal_local_task_tiny(const hali_hal_submission_t *sub) {
  if (sub->kind != HALI_HAL_SUBMISSION_EXECUTE) return false;
  uint64_t bytes = 0;
  size_t commands = 0;
  for (size_t i = 0; i < sub->command_buffer_count; ++i) {
    const hali_hal_command_buffer_t *cb = sub->command_buffers[i];
    if (cb->base) cb = cb->base; /* a bound one runs its recording */
    for (const hali_hal_command_header_t *h = hali_hal_command_list_first(cb);
         h; h = hali_hal_command_list_next(cb, h)) {
      if (++commands > HALI_HAL_INLINE_MAX_COMMANDS) return false;
      uint64_t length = 0;
      switch ((hali_hal_command_type_t)h->type) {
        case HALI_HAL_COMMAND_FILL:
          length = ((const hali_hal_command_fill_t *)(const void *)h)->length;
          break;
        case HALI_HAL_COMMAND_COPY:
          length = ((const hali_hal_command_copy_t *)(const void *)h)->length;
          break;
        case HALI_HAL_COMMAND_UPDATE:
          length =
              ((const hali_hal_command_update_t *)(const void *)h)->length;
          break;
        case HALI_HAL_COMMAND_BARRIER:
        case HALI_HAL_COMMAND_PUSH_CONSTANTS:
        case HALI_HAL_COMMAND_PUSH_DESCRIPTOR_SET:
          break;
        default: /* dispatch, collective */
          return false;
      }
      if (length > HALI_HAL_INLINE_MAX_BYTES - bytes) return false;
      bytes += length;
    }
  }
  return true;
}

/* Whether to run |sub| on the submitting thread now (local-task): tiny,
 * nothing queued (only fences order submissions, but a queue with work
 * waiting keeps handing it out oldest first), its wait fence reached, its
 * stop not requested, no tracing (the spans name the runners' tracks) and
 * no validation (its submission bookkeeping expects a runner).  Caller
 * holds the device mutex. */
static bool hali_hal_local_task_inline(hali_hal_device_t *device,
                                       hali_hal_submission_t *sub) {
  if (device->validate || device->tracer.now || device->head ||
      device->abandoning || device->shutdown || !hali_hal_local_task_tiny(sub) ||
      hali_hal_stop_check(sub->stop) != HALI_STATUS_OK)
    return false;
  bool ready = false;
  hali_status_t q = hali_hal_fence_query_untraced(sub->wait_fence, &ready);
  if (q) { /* a failed wait fence: the runner fails it as usual */
    hali_status_free(q);
    return false;
  }
  return ready;
}

/* Queues |sub|; under validation the submission may be refused
 * (hal/validate.h), and then nothing is queued and |sub| stays the
 * caller's. */
static hali_status_t hali_hal_device_enqueue(hali_hal_device_t *device,
                                             hali_hal_submission_t *sub) {
  pthread_mutex_lock(&device->mutex);
  sub->id = ++device->next_id;
  if (HALI_UNLIKELY(device->validate)) {
    hali_status_t s = hali_hal_validate_submit(
        device, (hali_hal_validate_mode_t)device->validate, sub->id,
        sub->wait_fence, sub->signal_fence, sub->command_buffers,
        sub->command_buffer_count, sub->buffer,
        sub->kind == HALI_HAL_SUBMISSION_ALLOCA ? "queue_alloca"
                                                : "queue_dealloca",
        &sub->validate_token);
    if (s) {
      device->next_id--;
      pthread_mutex_unlock(&device->mutex);
      return s;
    }
  }
  if (device->kind == HALI_HAL_DEVICE_LOCAL_TASK &&
      hali_hal_local_task_inline(device, sub)) {
    /* Counted as running, as a runner's would be (wait_idle, queue state). */
    device->pending++;
    device->running++;
    pthread_mutex_unlock(&device->mutex);
    hali_hal_submission_complete(device, NULL, sub, HALI_OK);
    hali_hal_submission_free(device, sub);
    pthread_mutex_lock(&device->mutex);
    device->running--;
    device->pending--;
    pthread_cond_broadcast(&device->cond);
    pthread_mutex_unlock(&device->mutex);
    return HALI_OK;
  }
  if (device->tail)
    device->tail->next = sub;
  else
    device->head = sub;
  device->tail = sub;
  device->pending++;
  hali_hal_runner_t *wake = NULL;
  if (device->kind == HALI_HAL_DEVICE_LOCAL_TASK)
    wake = hali_hal_local_task_pick(device);
  else /* local-sync: pump now, without dropping the mutex in between */
    hali_hal_local_sync_pump_locked(device);
  pthread_mutex_unlock(&device->mutex);
  if (device->kind == HALI_HAL_DEVICE_LOCAL_TASK) {
    /* After the unlock: a spinning runner that sees it takes the mutex
     * (the submitter's reference keeps |device| alive). */
    atomic_fetch_add_explicit(&device->work_events, 1, memory_order_release);
    hali_hal_local_task_signal(wake);
  }
  return HALI_OK;
}

/* Storage for a submission of |command_buffer_count| command buffers
 * (uninitialized); NULL when out of memory. */
static hali_hal_submission_t *hali_hal_submission_new(
    size_t command_buffer_count) {
  /* The caller's array already holds |command_buffer_count| pointers, so
   * this cannot overflow in practice; checked all the same. */
  uint64_t bytes;
  if (hali_mul_overflows_u64(command_buffer_count,
                             sizeof(hali_hal_command_buffer_t *), &bytes) ||
      hali_add_overflows_u64(bytes, sizeof(hali_hal_submission_t), &bytes) ||
      bytes > SIZE_MAX)
    return NULL;
  /* malloc, not calloc: glibc's calloc skips its per-thread cache (~400
   * instructions per submission); the caller initializes it and fills
   * command_buffers[0 .. count). */
  return hali_malloc((size_t)bytes);
}

/* A new submission retaining both fences; NULL when out of memory.  One
 * of at most one command buffer reuses the device's spare (the warm
 * one-submission path allocates nothing). */
static hali_hal_submission_t *hali_hal_submission_allocate(
    hali_hal_device_t *device, hali_hal_submission_kind_t kind,
    hali_hal_fence_t *wait_fence, hali_hal_fence_t *signal_fence,
    size_t command_buffer_count) {
  /* The caller's array already holds |command_buffer_count| pointers, so
   * this cannot overflow in practice; checked all the same. */
  bool small = command_buffer_count <= 1;
  hali_hal_submission_t *sub =
      small ? atomic_exchange_explicit(&device->spare_submission, NULL,
                                       memory_order_acq_rel)
            : NULL;
  if (!sub) {
    sub = hali_hal_submission_new(small ? 1 : command_buffer_count);
    if (!sub) return NULL;
  }
  *sub = (hali_hal_submission_t){.kind = kind, .small = small};
  sub->wait_fence = wait_fence;
  hali_hal_fence_retain(wait_fence);
  sub->signal_fence = signal_fence;
  hali_hal_fence_retain(signal_fence);
  return sub;
}

static hali_status_t hali_hal_submission_oom(void) {
  return hali_status_annotate(hali_status_oom(), "queueing a submission");
}

hali_status_t hali_hal_device_queue_execute(
    hali_hal_device_t *device, hali_hal_fence_t *wait_fence,
    hali_hal_fence_t *signal_fence,
    hali_hal_command_buffer_t *const *command_buffers, size_t count) {
  return hali_hal_device_queue_execute_stoppable(
      device, wait_fence, signal_fence, command_buffers, count, NULL);
}

hali_status_t hali_hal_device_queue_execute_stoppable(
    hali_hal_device_t *device, hali_hal_fence_t *wait_fence,
    hali_hal_fence_t *signal_fence,
    hali_hal_command_buffer_t *const *command_buffers, size_t count,
    hali_hal_stop_t *stop) {
  for (size_t i = 0; i < count; ++i) {
    if (!command_buffers[i])
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "queue_execute: command buffer %zu of %zu is "
                              "NULL",
                              i, count);
    if (!hali_hal_command_buffer_is_finalized(command_buffers[i]))
      return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                              "queue_execute: command buffer %zu of %zu is "
                              "not finalized",
                              i, count);
    if (HALI_UNLIKELY(command_buffers[i]->base != NULL))
      HALI_RETURN_IF_ERROR(
          hali_hal_binding_table_check(command_buffers[i]->base,
                                       &command_buffers[i]->table),
          "queue_execute: command buffer %zu of %zu (#%u, bound to #%u)", i,
          count, hali_hal_trace_id(command_buffers[i]),
          hali_hal_trace_id(command_buffers[i]->base));
    else if (HALI_UNLIKELY(command_buffers[i]->slot_count ||
                           command_buffers[i]->constant_slot_count))
      return hali_status_make(
          HALI_STATUS_FAILED_PRECONDITION,
          "queue_execute: command buffer %zu of %zu (#%u) has %u binding and "
          "%u constant slots: submit it with a binding table "
          "(queue_execute_indirect)",
          i, count, hali_hal_trace_id(command_buffers[i]),
          command_buffers[i]->slot_count,
          command_buffers[i]->constant_slot_count);
  }
  for (size_t i = 0; i < count; ++i) {
    hali_status_t status =
        hali_hal_command_buffer_begin_submit(command_buffers[i]);
    if (status) {
      /* Undo the one-shot marks made so far: nothing was queued. */
      for (size_t j = 0; j < i; ++j)
        if (hali_hal_command_buffer_mode(command_buffers[j]) &
            HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT)
          atomic_store(&command_buffers[j]->submitted, false);
      return hali_status_annotate(status,
                                  "queue_execute: command buffer %zu of %zu",
                                  i, count);
    }
  }
  hali_hal_submission_t *sub = hali_hal_submission_allocate(
      device, HALI_HAL_SUBMISSION_EXECUTE, wait_fence, signal_fence, count);
  if (!sub) return hali_hal_submission_oom();
  sub->stop = stop;
  hali_hal_stop_retain(stop);
  sub->command_buffer_count = count;
  for (size_t i = 0; i < count; ++i) {
    sub->command_buffers[i] = command_buffers[i];
    hali_hal_command_buffer_retain(command_buffers[i]);
  }
  hali_status_t refused = hali_hal_device_enqueue(device, sub);
  if (HALI_UNLIKELY(refused != NULL)) {
    for (size_t j = 0; j < count; ++j)
      if (hali_hal_command_buffer_mode(command_buffers[j]) &
          HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT)
        atomic_store(&command_buffers[j]->submitted, false);
    hali_hal_submission_free(device, sub);
    return hali_status_annotate(refused, "queue_execute");
  }
  /* After the enqueue: on local-sync the submission ran inside it, and its
   * spans come before this line. */
  if (HALI_UNLIKELY(device->tracer.line != NULL)) {
    char list[256];
    size_t n = 0;
    list[0] = 0;
    for (size_t i = 0; i < count && n < sizeof(list) - 16; ++i)
      n += (size_t)snprintf(list + n, sizeof(list) - n, "%s#%u", i ? " " : "",
                            hali_hal_trace_id(command_buffers[i]));
    hali_hal_tracer_printf(&device->tracer,
                           "[hal] queue.execute wait=!hal.fence#%u "
                           "signal=!hal.fence#%u command_buffers=[%s]",
                           hali_hal_trace_id(wait_fence),
                           hali_hal_trace_id(signal_fence), list);
  }
  return HALI_OK;
}

hali_status_t hali_hal_device_queue_execute_indirect(
    hali_hal_device_t *device, hali_hal_fence_t *wait_fence,
    hali_hal_fence_t *signal_fence, hali_hal_command_buffer_t *command_buffer,
    const hali_hal_binding_table_t *table, hali_hal_stop_t *stop) {
  if (!command_buffer || !table)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "queue_execute_indirect: %s is NULL",
                            command_buffer ? "the binding table"
                                           : "the command buffer");
  hali_hal_command_buffer_t *bound = NULL;
  HALI_RETURN_IF_ERROR(
      hali_hal_command_buffer_bind(command_buffer, table->bindings,
                                   table->binding_count, &bound),
      "queue_execute_indirect");
  hali_status_t s = hali_hal_command_buffer_bind_constants(
      bound, table->constants, table->constant_count);
  if (!s)
    s = hali_hal_device_queue_execute_stoppable(device, wait_fence,
                                                signal_fence, &bound, 1, stop);
  hali_hal_command_buffer_release(bound);
  return s ? hali_status_annotate(s, "queue_execute_indirect") : HALI_OK;
}

hali_status_t hali_hal_device_queue_alloca(hali_hal_device_t *device,
                                           hali_hal_fence_t *wait_fence,
                                           hali_hal_fence_t *signal_fence,
                                           hali_hal_buffer_params_t params,
                                           hali_hal_device_size_t size,
                                           hali_hal_buffer_t **out_buffer) {
  *out_buffer = NULL;
  hali_hal_buffer_t *buffer = NULL;
  HALI_RETURN_IF_ERROR(hali_hal_buffer_create_uncommitted(
                           device->allocator, params, size, &buffer),
                       "queue_alloca of %" PRIu64 " bytes", size);
  hali_hal_submission_t *sub = hali_hal_submission_allocate(
      device, HALI_HAL_SUBMISSION_ALLOCA, wait_fence, signal_fence, 0);
  if (!sub) {
    hali_hal_buffer_release(buffer);
    return hali_hal_submission_oom();
  }
  sub->buffer = buffer;
  hali_hal_buffer_retain(buffer);
  hali_status_t refused = hali_hal_device_enqueue(device, sub);
  if (HALI_UNLIKELY(refused != NULL)) {
    hali_hal_submission_free(device, sub);
    hali_hal_buffer_release(buffer);
    return refused;
  }
  *out_buffer = buffer;
  hali_hal_tracer_printf(
      &device->tracer,
      "[hal] queue.alloca %" PRIu64 " bytes wait=!hal.fence#%u "
      "signal=!hal.fence#%u -> !hal.buffer#%u",
      size, hali_hal_trace_id(wait_fence), hali_hal_trace_id(signal_fence),
      hali_hal_trace_id(buffer));
  return HALI_OK;
}

hali_status_t hali_hal_device_queue_dealloca(hali_hal_device_t *device,
                                             hali_hal_fence_t *wait_fence,
                                             hali_hal_fence_t *signal_fence,
                                             hali_hal_buffer_t *buffer) {
  if (!buffer || hali_hal_buffer_allocated_buffer(buffer) != buffer)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "queue_dealloca needs an allocated buffer, not %s",
                            buffer ? "a subspan" : "NULL");
  hali_hal_submission_t *sub = hali_hal_submission_allocate(
      device, HALI_HAL_SUBMISSION_DEALLOCA, wait_fence, signal_fence, 0);
  if (!sub) return hali_hal_submission_oom();
  sub->buffer = buffer;
  hali_hal_buffer_retain(buffer);
  hali_status_t refused = hali_hal_device_enqueue(device, sub);
  if (HALI_UNLIKELY(refused != NULL)) {
    hali_hal_submission_free(device, sub);
    return refused;
  }
  hali_hal_tracer_printf(&device->tracer,
                         "[hal] queue.dealloca !hal.buffer#%u "
                         "wait=!hal.fence#%u signal=!hal.fence#%u",
                         hali_hal_trace_id(buffer),
                         hali_hal_trace_id(wait_fence),
                         hali_hal_trace_id(signal_fence));
  return HALI_OK;
}

hali_status_t hali_hal_device_wait_idle(hali_hal_device_t *device,
                                        hali_timeout_ns_t timeout_ns) {
  struct timespec deadline;
  if (timeout_ns > 0) hali_deadline_from_timeout(timeout_ns, &deadline);
  hali_status_t status = HALI_OK;
  pthread_mutex_lock(&device->mutex);
  while (device->pending) {
    if (timeout_ns < 0) {
      pthread_cond_wait(&device->cond, &device->mutex);
      continue;
    }
    if (timeout_ns == 0 ||
        pthread_cond_timedwait(&device->cond, &device->mutex, &deadline)) {
      if (!device->pending) break;
      status = hali_status_make(HALI_STATUS_DEADLINE_EXCEEDED,
                                "%zu queue submissions still pending on %s "
                                "after %" PRId64 " ns",
                                device->pending,
                                hali_hal_device_kind_name(device->kind),
                                timeout_ns);
      break;
    }
  }
  pthread_mutex_unlock(&device->mutex);
  if (HALI_UNLIKELY(device->validate) && !status)
    hali_hal_validate_observe_device(device);
  return status;
}

/* ---- Lifetime. ---- */

static void hali_hal_device_destroy(hali_ref_t *ref) {
  hali_hal_device_t *device = (hali_hal_device_t *)ref;
  if (device->kind == HALI_HAL_DEVICE_LOCAL_TASK) {
    /* The runners drain the queue before they see |shutdown|. */
    pthread_mutex_lock(&device->mutex);
    device->shutdown = true;
    hali_hal_local_task_wake_all(device);
    pthread_mutex_unlock(&device->mutex);
    for (uint32_t i = 0; i < device->runner_count; ++i)
      pthread_join(device->runners[i].thread, NULL);
    if (device->runners)
      for (uint32_t i = 0; i < device->runner_slots; ++i)
        pthread_cond_destroy(&device->runners[i].cond);
    hali_free(device->runners);
    /* Timepoints left by submissions that ran: cancel them, and wait for
     * callbacks already running. */
    pthread_mutex_lock(&device->mutex);
    hali_hal_local_task_disarm(device, 0);
    while (device->arms_live)
      pthread_cond_wait(&device->cond, &device->mutex);
    pthread_mutex_unlock(&device->mutex);
    hali_hal_worker_pool_destroy(device->pool);
  } else {
    /* Parked submissions whose submitters gave up (hal/stop.h) end now;
     * the rest run from signalling threads: drain. */
    hali_hal_local_sync_pump(device);
    hali_status_free(hali_hal_device_wait_idle(device, HALI_INFINITE));
    /* Unregister arms left from the last parked submission; wait for
     * callbacks already running. */
    pthread_mutex_lock(&device->mutex);
    hali_hal_local_sync_disarm(device);
    while (device->arms_live)
      pthread_cond_wait(&device->cond, &device->mutex);
    pthread_mutex_unlock(&device->mutex);
    hali_aligned_free(device->scratch);
  }
  hali_hal_channel_release(device->channel);
  pthread_mutex_destroy(&device->channel_mutex);
  if (HALI_UNLIKELY(device->validate))
    hali_hal_validate_device_destroyed(device);
  hali_hal_allocator_release(device->allocator);
  hali_hal_command_buffer_cache_release(device->command_cache);
  hali_hal_fence_pool_close(device->fence_pool);
  hali_free(atomic_load(&device->spare_submission));
  pthread_cond_destroy(&device->cond);
  pthread_mutex_destroy(&device->mutex);
  hali_free(device);
}

static const hali_ref_vtable_t hali_hal_device_vtable = {
    .destroy = hali_hal_device_destroy,
};

hali_status_t hali_hal_device_create(const hali_hal_device_params_t *params,
                                     hali_hal_device_t **out_device) {
  *out_device = NULL;
  hali_hal_device_params_t defaults;
  if (!params) {
    hali_hal_device_params_initialize(&defaults);
    params = &defaults;
  }
  if (params->kind != HALI_HAL_DEVICE_LOCAL_SYNC &&
      params->kind != HALI_HAL_DEVICE_LOCAL_TASK)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "unknown device kind %d", (int)params->kind);
  hali_hal_device_t *device = hali_calloc(1, sizeof(*device));
  if (!device)
    return hali_status_annotate(hali_status_oom(), "creating a device");
  hali_ref_init(&device->ref, HALI_TYPE_DEVICE, &hali_hal_device_vtable);
  device->kind = params->kind;
  pthread_mutex_init(&device->mutex, NULL);
  pthread_mutex_init(&device->channel_mutex, NULL);
  device->collective_timeout_ns = params->collective_timeout_ns;
  device->channel = params->channel;
  hali_hal_channel_retain(device->channel);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&device->cond, &attr);
  pthread_condattr_destroy(&attr);
  hali_hal_allocator_params_t allocator_params = {.hooks = params->hooks,
                                                 .max_bytes =
                                                      params->max_bytes};
  hali_status_t status =
      hali_hal_allocator_create(&allocator_params, &device->allocator);
  if (!status)
    status = hali_hal_command_buffer_cache_create(&device->command_cache);
  if (!status)
    status = hali_hal_fence_pool_create(HALI_HAL_DEVICE_FENCE_POOL_MAX,
                                        &device->fence_pool);
  if (!status && params->validate > HALI_HAL_VALIDATE_WARN)
    status = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "unknown validation mode %u", params->validate);
  if (!status && params->validate) {
    device->validate = (uint8_t)params->validate;
    hali_hal_allocator_set_validate(device->allocator, device->validate);
    hali_hal_validate_device_created();
  }
  if (!status && device->kind == HALI_HAL_DEVICE_LOCAL_TASK) {
    uint32_t workers = params->worker_count;
    if (workers == 0) {
      long cores = sysconf(_SC_NPROCESSORS_ONLN);
      workers = cores > 0 ? (uint32_t)cores : 1;
    }
    status = hali_hal_worker_pool_create(workers, &device->pool);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    device->spin = online > 1;
    /* One queue runner per worker: as many submissions in flight as there
     * are workers to run them. */
    uint32_t runners = workers;
    if (!status &&
        !(device->runners = hali_calloc(runners, sizeof(hali_hal_runner_t))))
      status = hali_status_annotate(hali_status_oom(),
                                    "for %u queue runners", runners);
    for (uint32_t i = 0; !status && i < runners; ++i)
      pthread_cond_init(&device->runners[i].cond, NULL);
    if (!status) device->runner_slots = runners;
    for (uint32_t i = 0; !status && i < runners; ++i) {
      hali_hal_runner_t *r = &device->runners[i];
      r->device = device;
      /* Trace tracks: 1 for the first (the old queue thread's), then
       * 500 + R, clear of the workers' 2 .. 1 + workers (vm/trace.c names
       * them "queue R"). */
      r->trace_tid = i == 0 ? 1 : 500 + i;
      r->index = i;
      atomic_init(&r->spin_ns, HALI_HAL_RUNNER_SPIN_NS);
      if (pthread_create(&r->thread, NULL, hali_hal_local_task_main, r))
        status = hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                                  "could not start queue runner %u of %u", i,
                                  runners);
      else
        device->runner_count = i + 1;
    }
  }
  if (status) {
    hali_hal_device_destroy(&device->ref);
    return hali_status_annotate(status, "creating a %s device",
                                hali_hal_device_kind_name(params->kind));
  }
  *out_device = device;
  return HALI_OK;
}

void hali_hal_device_retain(hali_hal_device_t *device) {
  if (device) hali_ref_retain(&device->ref);
}

void hali_hal_device_release(hali_hal_device_t *device) {
  if (device) hali_ref_release(&device->ref);
}

hali_status_t hali_hal_device_default_channel(
    hali_hal_device_t *device, hali_hal_channel_t **out_channel) {
  *out_channel = NULL;
  hali_status_t s = HALI_OK;
  pthread_mutex_lock(&device->channel_mutex);
  if (!device->channel) {
    hali_timeout_ns_t t = device->collective_timeout_ns;
    s = hali_hal_channel_create_default(t == 0 ? 10 * 1000000000LL : t,
                                        &device->channel);
  }
  if (!s) {
    hali_hal_channel_retain(device->channel);
    *out_channel = device->channel;
  }
  pthread_mutex_unlock(&device->channel_mutex);
  return s;
}
