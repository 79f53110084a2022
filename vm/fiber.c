/* hali — fibers and the scheduler (see vm/fiber.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* PTHREAD_MUTEX_ADAPTIVE_NP (glibc) */
#endif
#include "vm/fiber.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "base/status.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hal/fence.h"
#include "hal/semaphore.h"
#include "vm/trace.h"

/* Register stacks of finished fibers kept for the next to start. */
#define STACK_POOL_MAX 1024

typedef enum {
  FIBER_READY,
  FIBER_RUNNING,
  FIBER_SUSPENDING, /* stopped at an await, wake-ups being registered */
  FIBER_SUSPENDED,
  FIBER_DONE
} fiber_state_t;

/* One registration on a semaphore for a suspended fiber: one per point of
 * the awaited fence not yet reached, so that any point failing wakes the
 * fiber at once.  Two references: the wake-up callback's and the fiber's
 * list's; whoever drops the last frees.  |detached| (under the scheduler
 * mutex) tells a late callback that the fiber no longer waits on it. */
typedef struct waiter_s {
  hali_hal_semaphore_timepoint_t timepoint;
  hali_vm_scheduler_t *scheduler;
  hali_vm_fiber_t *fiber;
  hali_hal_semaphore_t *semaphore; /* retained */
  struct waiter_s *next;           /* the fiber's list */
  uint64_t epoch;                  /* the fiber's wait_epoch it counts for */
  bool detached;
  bool fired; /* its callback runs (mutex held): nothing to cancel */
  atomic_int refs;
} waiter_t;

/* What the fibers of one invocation share: the host-started fiber and
 * every fiber it spawns, transitively.  Records are pooled in the
 * scheduler (a warm invocation allocates nothing); |refs| and |live| are
 * guarded by the scheduler mutex. */
typedef struct invocation_s {
  uint32_t refs;            /* fibers pointing here */
  uint32_t live;            /* of those, not finished */
  int64_t deadline_ns;      /* CLOCK_MONOTONIC; INT64_MAX = none */
  bool stopped;             /* the watchdog stopped it at its deadline */
  /* Made when the invocation first submits device work (or is stopped
   * with work in flight): queue submissions retain it, so cancelling the
   * invocation or its deadline abandons them (hal/stop.h).  Owned. */
  hali_hal_stop_t *stop;
  const char *name;         /* the host-started function, for messages */
  /* The host-started fiber's module, retained while the invocation has
   * fibers: the fibers it spawns (same module) borrow it, which saves two
   * atomic operations per spawn. */
  hali_vm_module_t *module;
  struct invocation_s *next; /* in the pool */
} invocation_t;

struct hali_vm_fiber_s {
  hali_vm_scheduler_t *scheduler;
  invocation_t *inv;        /* shared with the fibers it spawned */
  bool root;                /* started by the host: |inv| is its own */
  _Atomic(hali_status_code_t) cancel_code; /* set before cancel_requested */
  uint32_t id;
  fiber_state_t state;
  /* A spawned fiber takes its register stack (from the scheduler's pool)
   * when it first runs, and gives it back when it ends: a fan-out of N
   * fibers that have not run yet holds N records, not N stacks.  Until
   * then its function, link and arguments (refs retained) wait here;
   * mutex held to attach or detach it (stop_fiber reads it). */
  hali_vm_stack_t *stack;
  const hali_vm_link_t *start_link;
  hali_value_t *args;       /* |args_inline| or allocated */
  uint32_t arg_count;       /* held until the stack is set up */
  uint32_t arg_capacity;    /* of an allocated |args| */
  hali_value_t args_inline[4];
  uint32_t start_depth_base;
  uint64_t start_fuel;
  hali_vm_module_t *module; /* retained by |inv|, or by the fiber when
                             * |owns_module| */
  bool owns_module;
  const hali_vm_func_t *fn;
  hali_value_t *results;
  uint32_t result_count;
  uint32_t result_capacity;
  hali_hal_fence_t *fence;  /* completion; created when first asked for */
  hali_status_t status;     /* final, once done */
  waiter_t *waiters;        /* while suspending or suspended */
  /* Counting the wake-ups of one suspension (mutex held): a fence of N
   * points wakes its awaiter once, when the last point is reached (or at
   * once when one fails), not N times. */
  uint64_t wait_epoch;
  size_t wait_registered, wait_fired;
  bool wait_counting; /* registration finished: wait_registered is final */
  /* A point failed while the fiber was still SUSPENDING: resume(), which
   * is registering its wake-ups on the awaited fence, queues it when done
   * (queued at once, another thread could resume it and free that fence
   * under the registration). */
  bool wait_failed;
  bool host_owned;          /* started by the host (else by fiber.spawn) */
  bool released;            /* the host released it */
  bool finishing;           /* DONE, finish_complete not through yet */
  atomic_bool cancel_requested;
  hali_vm_fiber_t *next_ready;
  int64_t ready_at; /* when it was last queued (with fiber threads) */
  uint32_t home; /* the fiber thread whose queue it was last put on */
  hali_vm_fiber_t *prev, *next; /* all fibers */
};

/* One fiber thread: slot 0 is the thread inside run(), 1.. the workers.
 * Each has its own FIFO ready queue; a thread runs its own queue first
 * and steals the oldest fiber of another's when its own is empty.  All of
 * it is guarded by the scheduler mutex. */
typedef struct {
  hali_vm_fiber_t *head, *tail;
  size_t count;
  hali_vm_fiber_t *running; /* inside resume() on this thread */
  /* Which resume |running| is (unique: the scheduler's count), and, for
   * the watchdog's slices, the one it last saw and since when: a fiber
   * has run at least since |seen_at| when |run_seq| is still |seen_seq|
   * (a resume reads no clock). */
  uint64_t run_seq, seen_seq;
  int64_t seen_at;
  bool idle;        /* asleep until woken (it found nothing to run) */
  bool waking;      /* woken, not yet back: it will look for work */
  bool on_main;     /* asleep on the scheduler's |cond| (inside run()),
                     * else on |cond| below (a worker's own loop) */
  /* A pooled record put aside for this thread's next spawn (taken in the
   * hold of the mutex that readies the last one): a spawn then takes the
   * mutex once, not twice.  Only the thread in this slot touches it
   * outside the mutex. */
  hali_vm_fiber_t *spare;
  /* Asleep until the oldest fiber of a busy thread's queue has waited
   * its steal grace (take_ready): no need to wake it sooner. */
  bool eyeing;
  /* Inside resume() (|running| may be NULL meanwhile: a fiber that
   * suspends registers its wake-ups without the mutex): busy, for the
   * steal grace. */
  bool resuming;
  pthread_cond_t cond;
} fiber_thread_t;

struct hali_vm_scheduler_s {
  pthread_mutex_t mutex;
  pthread_cond_t cond; /* a fiber became ready, or a wake-up finished */
  uint32_t cond_waiters; /* threads in cond_wait() */
  hali_hal_device_t *device;
  hali_vm_scheduler_options_t options;
  /* Ready fibers: one queue per fiber thread (th[k]), |ready| in all. */
  fiber_thread_t th[HALI_VM_MAX_FIBER_THREADS];
  size_t ready;
  uint32_t idle;   /* threads asleep with th[k].idle */
  uint32_t waking; /* threads with th[k].waking */
  uint64_t steals; /* fibers a thread took from another's queue */
  /* Counts pushes and finishes: the run loop, which drops the mutex to
   * ask the device and the fences, sees whether anything happened. */
  uint64_t events;
  hali_vm_fiber_t *all;
  size_t live, suspended;
  /* |live|, also readable without the mutex (hali_vm_scheduler_live_hint:
   * the C API's direct invoke path); written next to it. */
  atomic_size_t live_hint;
  size_t waiters_live; /* callback references not yet dropped */
  /* Registrations whose references are all dropped, kept for the next
   * suspension (a warm await allocates nothing); linked through |next|. */
  waiter_t *waiter_pool;
  size_t waiter_pool_count;
  uint32_t next_id;
  bool allow_external;
  /* Finished fibers kept for reuse (with their register stacks), so that a
   * warm invocation allocates nothing. */
  hali_vm_fiber_t *pool;
  size_t pool_count;
  /* Register stacks of finished fibers, for the next fiber to start. */
  hali_vm_stack_t *stack_pool[STACK_POOL_MAX];
  size_t stack_pool_count;
  invocation_t *inv_pool;
  size_t inv_pool_count;
  size_t timed; /* live invocations with a deadline (the watchdog scans) */
  uint64_t created, reused;
  /* Fairness: while a fiber runs longer than its slice and others are
   * ready, a watchdog thread interrupts it (it yields at its next call or
   * branch).  Started when a second fiber appears. */
  uint32_t threads;     /* slots in use */
  size_t running_count; /* fibers inside resume() on any thread */
  /* Workers (threads - 1 of them): they run ready fibers while |runs| > 0
   * (a thread is inside run()), each asleep on its own th[k].cond when it
   * finds none. */
  pthread_t workers[HALI_VM_MAX_FIBER_THREADS];
  uint32_t workers_started;
  uint32_t runs;
  uint64_t worker_runs; /* resumes on worker threads */
  bool workers_stop;
  bool watchdog_started, watchdog_stop;
  /* The watchdog's own condition: scheduler events (spawn, wake, finish)
   * broadcast |cond| and never wake it.  It ticks every half slice while
   * a fiber runs or a deadline is pending, and otherwise sleeps until
   * told (|watchdog_idle|: a fiber starts running, a deadline appears, or
   * the scheduler stops). */
  pthread_cond_t watchdog_cond;
  bool watchdog_idle;
  uint64_t watchdog_wakeups; /* how often it woke: see the tests */
  pthread_t watchdog;
  uint64_t preemptions;
  uint64_t resume_seq; /* resumes so far: th[k].run_seq */
  uint64_t spawn_yields; /* spawners that yielded to their backlog */
  /* Spawned fibers' completion fences (fence and semaphore in one block,
   * reused): a warm spawn allocates nothing. */
  hali_hal_fence_pool_t *fence_pool;
  /* A bounded run (hali_vm_scheduler_run_until): past it, the watchdog
   * interrupts the running fiber even when no other fiber is ready. */
  int64_t run_deadline;
  int64_t steal_grace_ns; /* options.steal_grace_ns, or the default */
};

#define FIBER_SLICE_NS 10000000 /* 10 ms */
/* Ready fibers on a spawner's queue past which it yields (back-pressure:
 * see start_fiber). */
#define SPAWN_BACKLOG HALI_VM_SPAWN_BACKLOG

/* The fiber thread this thread is in its scheduler: a worker's slot, or
 * 0 while the thread is inside run().  Any other thread (the host outside
 * a run, queue threads, the watchdog) is none. */
typedef struct {
  const hali_vm_scheduler_t *s;
  uint32_t slot;
} tls_slot_t;
static _Thread_local tls_slot_t tls_worker;

#define NO_SLOT UINT32_MAX
static uint32_t my_slot(const hali_vm_scheduler_t *s) {
  return tls_worker.s == s ? tls_worker.slot : NO_SLOT;
}

/* |cond| is broadcast only when some thread waits on it (mutex held for
 * both): most events (a spawn, an end, a wake-up on a thread that runs
 * its own fibers) have nobody to tell. */
static void cond_notify(hali_vm_scheduler_t *s) {
  if (s->cond_waiters) pthread_cond_broadcast(&s->cond);
}
static void cond_wait(hali_vm_scheduler_t *s, const struct timespec *until) {
  s->cond_waiters++;
  if (until) pthread_cond_timedwait(&s->cond, &s->mutex, until);
  else pthread_cond_wait(&s->cond, &s->mutex);
  s->cond_waiters--;
}

/* Finished fibers kept for reuse: enough that a fan-out that recycles its
 * children as it spawns allocates (almost) nothing for them; each costs
 * ~1 KiB while pooled (record, stack bookkeeping, frames, first banks). */
#define FIBER_POOL_MAX 1024
#define WAITER_POOL_MAX 1024
#define INVOCATION_POOL_MAX 64
#define FENCE_POOL_MAX 1024

static int64_t now_ns(void) { return hali_clock_now_ns(); }

/* Drops one reference to |w| (the scheduler mutex is held); the last
 * puts it back in the pool. */
static void waiter_release(hali_vm_scheduler_t *s, waiter_t *w) {
  if (atomic_fetch_sub(&w->refs, 1) != 1) return;
  hali_hal_semaphore_release(w->semaphore);
  w->semaphore = NULL;
  if (s->waiter_pool_count >= WAITER_POOL_MAX) {
    hali_free(w);
    return;
  }
  w->next = s->waiter_pool;
  s->waiter_pool = w;
  s->waiter_pool_count++;
}

/* Wakes fiber thread |k| asleep for want of work (mutex held). */
static void wake_thread(hali_vm_scheduler_t *s, uint32_t k) {
  fiber_thread_t *t = &s->th[k];
  if (!t->idle) return;
  t->idle = false;
  s->idle--;
  t->waking = true;
  s->waking++;
  if (t->on_main) cond_notify(s);
  else pthread_cond_signal(&t->cond);
}

/* Wakes one idle fiber thread other than |not| (mutex held), unless the
 * idle ones only wait for a steal's grace to end: they look again then. */
static void wake_one_idle(hali_vm_scheduler_t *s, uint32_t not) {
  for (uint32_t k = 0; s->idle && k < s->threads; ++k)
    if (k != not && s->th[k].idle && !s->th[k].eyeing) {
      wake_thread(s, k);
      return;
    }
}

typedef enum { PUSH_WAKE, PUSH_SPAWN, PUSH_YIELD } push_kind_t;

static void start_worker(hali_vm_scheduler_t *s);

/* Makes |f| ready (the mutex is held): on the queue of the fiber thread
 * that calls (it ran the spawner, the signaller or |f| itself), or, from
 * any other thread, on the queue it was last put on.  Wakes a thread to
 * run it: the queue's own when it sleeps; else an idle one (it steals) for
 * a spawn, a yield, or when the queue already holds work, or the push
 * comes from outside; a fiber woken by the running one otherwise waits
 * for it to await or end (a hand-off stays on one thread). */
static void push_ready(hali_vm_scheduler_t *s, hali_vm_fiber_t *f,
                       push_kind_t kind) {
  uint32_t me = my_slot(s);
  uint32_t q = me != NO_SLOT ? me : f->home;
  if (q >= s->threads) q = 0;
  fiber_thread_t *t = &s->th[q];
  f->state = FIBER_READY;
  f->home = q;
  f->next_ready = NULL;
  if (s->threads > 1) f->ready_at = now_ns(); /* for take_ready's grace */
  if (t->tail) t->tail->next_ready = f;
  else t->head = f;
  t->tail = f;
  t->count++;
  s->ready++;
  s->events++;
  if (t->idle) {
    wake_thread(s, q);
    return;
  }
  if (!s->runs) return; /* no fiber runs until the next run() */
  if (kind == PUSH_WAKE && me == q && t->count < 2) return;
  if (s->idle) wake_one_idle(s, q);
  else if (!s->waking) start_worker(s); /* none to spare: one more */
}

static hali_vm_fiber_t *queue_pop(hali_vm_scheduler_t *s, uint32_t k) {
  fiber_thread_t *t = &s->th[k];
  hali_vm_fiber_t *f = t->head;
  if (!f) return NULL;
  t->head = f->next_ready;
  if (!t->head) t->tail = NULL;
  t->count--;
  s->ready--;
  return f;
}

/* The next fiber for thread |me| (mutex held): its own queue's oldest,
 * else the oldest of the fullest other queue (a steal): at once when
 * that queue's thread is not inside a resume, else once it has waited
 * there s->steal_grace_ns (the steal grace).  The busy thread is likely
 * to get to it sooner when its queue holds short fibers (a chain of them,
 * each awaiting the one before, then runs on one thread instead of
 * bouncing between two, every link a suspension and a wake-up across
 * threads); fibers that wait longer are taken (a fan-out of longer ones
 * runs on every thread).  NULL when there is none to take yet; then
 * |*retry_at| (when not NULL) is when to look again, or INT64_MAX. */
static hali_vm_fiber_t *take_ready(hali_vm_scheduler_t *s, uint32_t me,
                                   int64_t *retry_at) {
  if (retry_at) *retry_at = INT64_MAX;
  if (s->th[me].count) return queue_pop(s, me);
  if (!s->ready) return NULL;
  /* The fullest queue whose oldest fiber may be taken now; else the
   * earliest time one may. */
  uint32_t victim = NO_SLOT;
  size_t most = 0;
  int64_t now = 0, soonest = INT64_MAX;
  for (uint32_t k = 0; k < s->threads; ++k) {
    const fiber_thread_t *v = &s->th[k];
    if (k == me || v->count <= most) continue;
    if (v->resuming) {
      if (!now) now = now_ns();
      int64_t at = v->head->ready_at + s->steal_grace_ns;
      if (now < at) {
        if (at < soonest) soonest = at;
        continue;
      }
    }
    most = v->count;
    victim = k;
  }
  if (victim == NO_SLOT) {
    if (retry_at) *retry_at = soonest;
    return NULL;
  }
  s->steals++;
  return queue_pop(s, victim);
}

/* Stops waiting (the mutex is held): every registration of |f| is
 * detached, and cancelled when it has not fired (a callback already firing
 * finds it detached and leaves the fiber alone). */
static void detach_waiters(hali_vm_scheduler_t *s, hali_vm_fiber_t *f) {
  waiter_t *w = f->waiters;
  f->waiters = NULL;
  while (w) {
    waiter_t *next = w->next;
    w->detached = true;
    if (!w->fired && hali_hal_semaphore_cancel(w->semaphore, &w->timepoint)) {
      /* It will never fire: drop the callback's reference for it. */
      s->waiters_live--;
      waiter_release(s, w);
    }
    waiter_release(s, w); /* the list's */
    w = next;
  }
}

/* Makes a suspended (or suspending) fiber ready again (mutex held). */
static void wake_fiber(hali_vm_scheduler_t *s, hali_vm_fiber_t *f) {
  detach_waiters(s, f);
  if (f->state == FIBER_SUSPENDED) s->suspended--;
  push_ready(s, f, PUSH_WAKE);
}

/* A semaphore reached a point's value or failed: the fiber is ready (the
 * await re-runs and finds out which). */
static void wake(void *user, hali_status_t status) {
  waiter_t *w = user;
  hali_vm_scheduler_t *s = w->scheduler;
  pthread_mutex_lock(&s->mutex);
  hali_vm_fiber_t *f = w->fiber;
  w->fired = true;
  if (!w->detached &&
      (f->state == FIBER_SUSPENDED || f->state == FIBER_SUSPENDING)) {
    /* A failure wakes at once; a reached point only once it is the last
     * one this suspension registered. */
    bool last = false;
    if (w->epoch == f->wait_epoch) {
      f->wait_fired++;
      last = f->wait_counting && f->wait_fired >= f->wait_registered;
    }
    if (status && f->state == FIBER_SUSPENDING) f->wait_failed = true;
    else if (status || last) wake_fiber(s, f);
  }
  s->waiters_live--;
  /* Under the mutex: once |waiters_live| drops, the scheduler may be
   * freed as soon as the mutex is. */
  waiter_release(s, w);
  cond_notify(s);
  pthread_mutex_unlock(&s->mutex);
}

/* Registers |f| to wake when any point of |fence| not yet reached is
 * reached or fails.  Returns true when the fiber may run again at once (a
 * point already failed, or every point is reached).  Called without the
 * mutex while |f| is SUSPENDING. */
static bool register_wait(hali_vm_scheduler_t *s, hali_vm_fiber_t *f,
                          hali_hal_fence_t *fence, size_t *out_registered) {
  *out_registered = 0;
  /* The first points in one look (most fences have one). */
  enum { PEEK = 8 };
  hali_hal_semaphore_t *sems[PEEK];
  uint64_t values[PEEK];
  size_t n = hali_hal_fence_points_peek(fence, PEEK, sems, values);
  size_t registered = 0;
  for (size_t i = 0; i < n; ++i) {
    hali_hal_semaphore_t *sem;
    uint64_t value, now = 0;
    if (i < PEEK) {
      sem = sems[i];
      value = values[i];
    } else {
      hali_hal_fence_point(fence, i, &sem, &value);
    }
    hali_status_t q = hali_hal_semaphore_query(sem, &now);
    if (q) { /* failed: the await will see it */
      hali_status_free(q);
      return true;
    }
    if (now >= value) continue;
    /* A pooled registration is taken and linked in one hold of the
     * mutex; a new one is made outside it. */
    pthread_mutex_lock(&s->mutex);
    waiter_t *w = s->waiter_pool;
    if (w) {
      s->waiter_pool = w->next;
      s->waiter_pool_count--;
      memset(w, 0, sizeof(*w));
    } else {
      pthread_mutex_unlock(&s->mutex);
      w = hali_malloc(sizeof(*w)); /* not calloc: see fiber_acquire */
      if (w) memset(w, 0, sizeof(*w));
      if (!w) {
        /* Wake the fiber and fail its await: re-running the await would
         * only fail to register again (and spin while memory is short). */
        f->stack->await_oom = true;
        return true;
      }
      pthread_mutex_lock(&s->mutex);
    }
    atomic_init(&w->refs, 2);
    w->scheduler = s;
    w->fiber = f;
    w->semaphore = sem;
    hali_hal_semaphore_retain(sem);
    w->epoch = f->wait_epoch;
    w->next = f->waiters;
    f->waiters = w;
    s->waiters_live++;
    pthread_mutex_unlock(&s->mutex);
    if (hali_hal_semaphore_notify(sem, value, &w->timepoint, wake, w)) {
      registered++;
      *out_registered = registered;
      continue;
    }
    /* Reached (or failed) meanwhile: no callback will come. */
    pthread_mutex_lock(&s->mutex);
    s->waiters_live--;
    waiter_release(s, w);
    pthread_mutex_unlock(&s->mutex);
    q = hali_hal_semaphore_query(sem, &now);
    if (q) {
      hali_status_free(q);
      return true;
    }
  }
  return registered == 0;
}

static void stop_fiber(hali_vm_scheduler_t *s, hali_vm_fiber_t *f,
                       hali_status_code_t code);

/* Stops every fiber of an invocation past its deadline, and its device
 * work (mutex held). */
static void enforce_deadlines(hali_vm_scheduler_t *s, int64_t now) {
  for (hali_vm_fiber_t *f = s->all; f; f = f->next) {
    invocation_t *inv = f->inv;
    if (!inv || inv->deadline_ns > now || f->state == FIBER_DONE) continue;
    if (!inv->stopped) {
      inv->stopped = true;
      hali_hal_stop_request(inv->stop, HALI_STATUS_DEADLINE_EXCEEDED);
    }
    if (!atomic_load(&f->cancel_requested))
      stop_fiber(s, f, HALI_STATUS_DEADLINE_EXCEEDED);
  }
}

/* Wakes an idle watchdog (mutex held): something it must watch began. */
static void watchdog_poke(hali_vm_scheduler_t *s) {
  if (s->watchdog_idle) {
    s->watchdog_idle = false;
    pthread_cond_signal(&s->watchdog_cond);
  }
}

static void *watchdog_main(void *arg) {
  hali_vm_scheduler_t *s = arg;
  pthread_mutex_lock(&s->mutex);
  while (!s->watchdog_stop) {
    s->watchdog_wakeups++;
    if (!s->running_count && !s->timed && s->run_deadline == INT64_MAX) {
      /* Nothing to watch: sleep until told. */
      s->watchdog_idle = true;
      while (s->watchdog_idle && !s->watchdog_stop)
        pthread_cond_wait(&s->watchdog_cond, &s->mutex);
      continue;
    }
    int64_t now = now_ns();
    if (s->timed) enforce_deadlines(s, now);
    /* Ready fibers wait on a busy thread's queue while others sleep: wake
     * those (they steal) rather than preempt anyone; nor preempt while a
     * woken thread is on its way to steal. */
    if (s->runs && s->ready && !s->idle && !s->waking) start_worker(s);
    bool stealers = (s->idle || s->waking) && s->runs;
    if (stealers && s->ready)
      for (uint32_t k = 0; k < s->threads; ++k) wake_thread(s, k);
    for (uint32_t k = 0; k < s->threads; ++k) {
      fiber_thread_t *t = &s->th[k];
      hali_vm_fiber_t *r = t->running;
      if (r && t->run_seq != t->seen_seq) { /* a new resume since */
        t->seen_seq = t->run_seq;
        t->seen_at = now;
      }
      /* It has run since |seen_at| at least: a slice of 10 ms ends 10 to
       * 15 ms after the watchdog first saw it (a poke wakes the watchdog
       * when a fiber starts while it sleeps). */
      bool slice_over = s->ready && !stealers &&
                        now - t->seen_at >= FIBER_SLICE_NS;
      if (r && (slice_over || now >= s->run_deadline) &&
          !atomic_load(&r->stack->interrupt)) {
        atomic_store(&r->stack->interrupt_code, HALI_VM_INTERRUPT_YIELD);
        atomic_store(&r->stack->interrupt, true);
        if (slice_over) s->preemptions++;
      }
    }
    int64_t wake = now + FIBER_SLICE_NS / 2;
    struct timespec ts = {(time_t)(wake / 1000000000),
                          (long)(wake % 1000000000)};
    pthread_cond_timedwait(&s->watchdog_cond, &s->mutex, &ts);
  }
  pthread_mutex_unlock(&s->mutex);
  return NULL;
}

uint64_t hali_vm_scheduler_preemptions(hali_vm_scheduler_t *s) {
  pthread_mutex_lock(&s->mutex);
  uint64_t n = s->preemptions;
  pthread_mutex_unlock(&s->mutex);
  return n;
}

uint64_t hali_vm_scheduler_worker_runs(hali_vm_scheduler_t *s) {
  pthread_mutex_lock(&s->mutex);
  uint64_t n = s->worker_runs;
  pthread_mutex_unlock(&s->mutex);
  return n;
}

uint64_t hali_vm_scheduler_watchdog_wakeups(hali_vm_scheduler_t *s) {
  pthread_mutex_lock(&s->mutex);
  uint64_t n = s->watchdog_wakeups;
  pthread_mutex_unlock(&s->mutex);
  return n;
}

hali_status_t hali_vm_scheduler_create(hali_hal_device_t *device,
                                       const hali_vm_scheduler_options_t *o,
                                       hali_vm_scheduler_t **out) {
  *out = NULL;
  hali_vm_scheduler_t *s = hali_calloc(1, sizeof(*s));
  if (!s) return hali_status_oom();
  hali_status_t ps = hali_hal_fence_pool_create(FENCE_POOL_MAX, &s->fence_pool);
  if (ps) {
    hali_free(s);
    return ps;
  }
  s->run_deadline = INT64_MAX;
  /* The scheduler's lock is held for a few dozen to a few hundred
   * instructions at a time, by every fiber thread for every spawn, end and
   * steal: a waiter spins briefly before it sleeps (glibc's adaptive
   * mutex), else with two busy fiber threads nearly every hand-over of
   * the lock was a futex wake and a futex wait (chain on 2 threads:
   * ~1.6 futex calls per task).  Idle threads sleep on condition
   * variables, never here.  With one fiber thread there is hardly anyone
   * to spin for, and a plain mutex is ~10 instructions cheaper a hold. */
  uint32_t want_threads = o && o->threads ? o->threads
                                          : hali_vm_default_fiber_threads();
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
  if (want_threads > 1)
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
#else
  (void)want_threads;
#endif
  pthread_mutex_init(&s->mutex, &ma);
  pthread_mutexattr_destroy(&ma);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->cond, &ca);
  pthread_cond_init(&s->watchdog_cond, &ca);
  for (uint32_t k = 0; k < HALI_VM_MAX_FIBER_THREADS; ++k)
    pthread_cond_init(&s->th[k].cond, &ca);
  pthread_condattr_destroy(&ca);
  if (o) s->options = *o;
  s->threads =
      s->options.threads ? s->options.threads : hali_vm_default_fiber_threads();
  /* (At most INT64_MAX / 4, a century: ready_at + grace never wraps.) */
  s->steal_grace_ns = !s->options.steal_grace_ns ? HALI_VM_STEAL_GRACE_NS
                      : s->options.steal_grace_ns > INT64_MAX / 4
                          ? INT64_MAX / 4
                          : (int64_t)s->options.steal_grace_ns;
  if (s->threads > HALI_VM_MAX_FIBER_THREADS)
    s->threads = HALI_VM_MAX_FIBER_THREADS;
  s->device = device;
  if (device) hali_hal_device_retain(device);
  *out = s;
  return HALI_OK;
}

void hali_vm_scheduler_allow_external_signals(hali_vm_scheduler_t *s,
                                              bool allow) {
  pthread_mutex_lock(&s->mutex);
  s->allow_external = allow;
  pthread_mutex_unlock(&s->mutex);
}

static void release_args(hali_vm_fiber_t *f) {
  for (uint32_t i = 0; i < f->arg_count; ++i) hali_value_release(&f->args[i]);
  f->arg_count = 0;
}

static void fiber_destroy(hali_vm_fiber_t *f) {
  release_args(f);
  hali_free(f->results);
  if (f->args != f->args_inline) hali_free(f->args);
  hali_vm_stack_free(f->stack);
  hali_free(f);
}

/* Gives a finished fiber's stack back to the pool (mutex held). */
static void stack_put(hali_vm_scheduler_t *s, hali_vm_stack_t *st) {
  if (!st) return;
  hali_vm_stack_reset(st);
  if (s->stack_pool_count >= STACK_POOL_MAX) {
    hali_vm_stack_free(st);
    return;
  }
  s->stack_pool[s->stack_pool_count++] = st;
}

/* Drops a fiber's reference to its invocation record (mutex held). */
static void invocation_unref(hali_vm_scheduler_t *s, invocation_t *inv) {
  if (!inv || --inv->refs) return;
  hali_hal_stop_release(inv->stop);
  inv->stop = NULL;
  hali_vm_module_release(inv->module);
  inv->module = NULL;
  if (s->inv_pool_count >= INVOCATION_POOL_MAX) {
    hali_free(inv);
    return;
  }
  inv->next = s->inv_pool;
  s->inv_pool = inv;
  s->inv_pool_count++;
}

/* Unlinks a finished fiber and drops what this invocation held; keeps the
 * fiber (its stack, its results array) in the pool when there is room.
 * The mutex is held. */
static void fiber_free(hali_vm_fiber_t *f) {
  hali_vm_scheduler_t *s = f->scheduler;
  if (f->prev) f->prev->next = f->next;
  else s->all = f->next;
  if (f->next) f->next->prev = f->prev;
  for (uint32_t i = 0; i < f->result_count; ++i)
    hali_value_release(&f->results[i]);
  release_args(f);
  stack_put(s, f->stack);
  f->stack = NULL;
  hali_hal_fence_release(f->fence);
  f->fence = NULL;
  hali_status_free(f->status);
  f->status = NULL;
  if (f->owns_module) hali_vm_module_release(f->module);
  f->module = NULL;
  invocation_unref(s, f->inv);
  f->inv = NULL;
  if (s->pool_count < FIBER_POOL_MAX) {
    f->next = s->pool;
    s->pool = f;
    s->pool_count++;
  } else {
    fiber_destroy(f);
  }
}

/* A fiber record for a new invocation (without a stack): from the pool,
 * or new. */
/* Whether one more fiber (of |inv|, NULL for a new invocation) would
 * pass a limit (mutex held); the counts for the caller's message. */
static bool fiber_limits_reached(const hali_vm_scheduler_t *s,
                                 const invocation_t *inv, size_t *out_live,
                                 uint32_t *out_inv_live) {
  *out_live = s->live;
  *out_inv_live = inv ? inv->live : 0;
  size_t cap = s->options.max_fibers ? s->options.max_fibers
                                     : HALI_VM_MAX_FIBERS;
  uint32_t inv_cap = s->options.max_invocation_fibers
                         ? s->options.max_invocation_fibers
                         : HALI_VM_MAX_INVOCATION_FIBERS;
  return *out_live >= cap || (inv && *out_inv_live >= inv_cap);
}

/* A pooled record, or NULL (mutex held). */
static hali_vm_fiber_t *fiber_pool_pop(hali_vm_scheduler_t *s) {
  hali_vm_fiber_t *f = s->pool;
  if (f) {
    s->pool = f->next;
    s->pool_count--;
    s->reused++;
  } else {
    s->created++;
  }
  return f;
}

/* Clears |f| (a pooled record; NULL: a new one) for a fiber with room for
 * |results| and |args| values.  NULL when out of memory (|f| is gone). */
static hali_vm_fiber_t *fiber_prepare(hali_vm_fiber_t *f, uint32_t results,
                                      uint32_t args) {
  if (!f) {
    /* malloc, not calloc: glibc's calloc skips the per-thread cache of
     * freed blocks.  The record is cleared below; only what survives the
     * clearing is set here. */
    f = hali_malloc(sizeof(*f));
    if (!f) return NULL;
    f->results = NULL;
    f->result_capacity = 0;
    f->arg_capacity = 0;
    f->arg_count = 0;
    f->stack = NULL;
    f->args = f->args_inline;
  }
  if (results > f->result_capacity) {
    hali_value_t *r = hali_realloc(f->results, results * sizeof(hali_value_t));
    if (!r) {
      fiber_destroy(f);
      return NULL;
    }
    f->results = r;
    f->result_capacity = results;
  }
  size_t inline_args = sizeof(f->args_inline) / sizeof(f->args_inline[0]);
  if (args > inline_args && args > f->arg_capacity) {
    hali_value_t *a = hali_malloc(args * sizeof(hali_value_t));
    if (!a) {
      fiber_destroy(f);
      return NULL;
    }
    if (f->args != f->args_inline) hali_free(f->args);
    f->args = a;
    f->arg_capacity = args;
  }
  hali_value_t *res = f->results, *arg = f->args;
  uint32_t res_cap = f->result_capacity, arg_cap = f->arg_capacity;
  memset(f, 0, sizeof(*f));
  atomic_init(&f->cancel_code, HALI_STATUS_OK);
  f->results = res;
  f->result_capacity = res_cap;
  f->args = arg == NULL ? f->args_inline : arg;
  f->arg_capacity = arg_cap;
  memset(f->results, 0, res_cap * sizeof(hali_value_t));
  return f;
}

/* A fiber record for a new fiber (without a stack): from the pool, or
 * new; NULL at a limit (the counts say which) or out of memory. */
static hali_vm_fiber_t *fiber_acquire(hali_vm_scheduler_t *s,
                                      uint32_t results, uint32_t args,
                                      const invocation_t *inv,
                                      size_t *out_live,
                                      uint32_t *out_inv_live) {
  pthread_mutex_lock(&s->mutex);
  /* The limits are checked in the same hold: the caller fails when
   * either count is at its cap (NULL). */
  if (fiber_limits_reached(s, inv, out_live, out_inv_live)) {
    pthread_mutex_unlock(&s->mutex);
    return NULL;
  }
  hali_vm_fiber_t *f = fiber_pool_pop(s);
  pthread_mutex_unlock(&s->mutex);
  return fiber_prepare(f, results, args);
}

/* A register stack for |f|, from the pool or new, set up for the
 * scheduler (not yet attached).  NULL when out of memory.  With |locked|
 * the caller holds the mutex (and still does on return; it is dropped
 * while a new stack is made), else it does not. */
static hali_vm_stack_t *stack_take_locked(hali_vm_scheduler_t *s,
                                          hali_vm_fiber_t *f, bool locked) {
  if (!locked) pthread_mutex_lock(&s->mutex);
  hali_vm_stack_t *st =
      s->stack_pool_count ? s->stack_pool[--s->stack_pool_count] : NULL;
  if (!st) { /* made without the mutex */
    pthread_mutex_unlock(&s->mutex);
    hali_status_t e = hali_vm_stack_create(s->options.max_depth, &st);
    if (e) {
      hali_status_free(e);
      st = NULL;
    }
    if (locked) pthread_mutex_lock(&s->mutex);
  } else if (!locked) {
    pthread_mutex_unlock(&s->mutex);
  }
  if (!st) return NULL;
  st->fiber = f;
  st->depth_base = f->start_depth_base;
  st->can_suspend = true;
  st->device = s->device;
  st->scheduler = s;
  st->trace = s->options.trace;
  st->fuel_enabled = s->options.fuel_enabled;
  st->fuel = f->start_fuel;
  st->fuel_used = 0; /* pooled stacks carry the last count */
  st->trace_tid = 1000 + f->id;
  atomic_store(&st->interrupt, false);
  atomic_store(&st->interrupt_code, HALI_STATUS_OK);
  return st;
}

static hali_status_t start_fiber(hali_vm_scheduler_t *s,
                                 const hali_vm_link_t *link,
                                 const hali_vm_func_t *fn,
                                 const hali_value_t *args, size_t arg_count,
                                 hali_vm_stack_t *parent,
                                 hali_vm_fiber_t **out,
                                 hali_hal_fence_t **out_fence);

hali_status_t hali_vm_scheduler_start(hali_vm_scheduler_t *s,
                                      hali_vm_module_t *m,
                                      const hali_vm_func_t *fn,
                                      const hali_value_t *args,
                                      size_t arg_count, hali_vm_fiber_t **out) {
  return hali_vm_scheduler_start_link(s, m->unlinked, fn, args, arg_count,
                                      out);
}

hali_status_t hali_vm_scheduler_start_link(hali_vm_scheduler_t *s,
                                           const hali_vm_link_t *link,
                                           const hali_vm_func_t *fn,
                                           const hali_value_t *args,
                                           size_t arg_count,
                                           hali_vm_fiber_t **out) {
  return start_fiber(s, link, fn, args, arg_count, NULL, out, NULL);
}

/* Starts a fiber: for the host (|parent| NULL: a new invocation) or
 * spawned by the fiber running on |parent| (the same invocation: its
 * live-fiber count, its call depth and its stop).  A host-started fiber
 * is set up on its stack at once (its arguments are checked here); a
 * spawned one, whose call the verifier checked, when it first runs. */
static hali_status_t start_fiber(hali_vm_scheduler_t *s,
                                 const hali_vm_link_t *link,
                                 const hali_vm_func_t *fn,
                                 const hali_value_t *args, size_t arg_count,
                                 hali_vm_stack_t *parent,
                                 hali_vm_fiber_t **out,
                                 hali_hal_fence_t **out_fence) {
  *out = NULL;
  if (out_fence) *out_fence = NULL;
  hali_vm_module_t *m = link->module;
  invocation_t *inv = parent ? parent->fiber->inv : NULL;
  size_t cap = s->options.max_fibers ? s->options.max_fibers : HALI_VM_MAX_FIBERS;
  uint32_t inv_cap = s->options.max_invocation_fibers
                         ? s->options.max_invocation_fibers
                         : HALI_VM_MAX_INVOCATION_FIBERS;
  /* A spawn is a call for the depth limit: the new fiber starts as deep
   * as its spawner is. */
  uint32_t base = parent ? parent->depth_base + parent->depth : 0;
  uint32_t max_depth =
      s->options.max_depth ? s->options.max_depth : HALI_VM_DEFAULT_MAX_DEPTH;
  if (base >= max_depth)
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "call depth limit of %u exceeded: cannot spawn "
                            "@%s %u frames deep (counting the fibers that "
                            "spawned this one)",
                            max_depth, fn->ir->name, base);
  if (arg_count > UINT32_MAX)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "cannot start @%s with %zu arguments",
                            fn->ir->name, arg_count);
  size_t live = 0;
  uint32_t inv_live = 0;
  uint32_t want_results = fn->ir->result_count ? fn->ir->result_count : 1;
  uint32_t want_args = parent ? (uint32_t)arg_count : 0;
  /* A spawn on a fiber thread takes the record that thread put aside in
   * its last spawn (no lock: the slot is this thread's); the limits are
   * then checked in the one hold of the mutex that makes the fiber
   * ready.  Otherwise (the first spawn, the host) a record from the pool,
   * in a hold of its own. */
  uint32_t slot = parent ? my_slot(s) : NO_SLOT;
  hali_vm_fiber_t *f = NULL;
  bool spare = slot != NO_SLOT && s->th[slot].spare;
  if (spare) {
    f = s->th[slot].spare;
    s->th[slot].spare = NULL;
    f = fiber_prepare(f, want_results, want_args);
  } else {
    f = fiber_acquire(s, want_results, want_args, inv, &live, &inv_live);
  }
  if (!f && live >= cap)
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "cannot start @%s: %zu fibers are live, the limit "
                            "of one context",
                            fn->ir->name, live);
  if (!f && inv && inv_live >= inv_cap)
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "cannot spawn @%s: the invocation of @%s has %u "
                            "live fibers, the limit of one invocation",
                            fn->ir->name, inv->name, inv_live);
  if (!f)
    return hali_status_annotate(hali_status_oom(),
                                "starting a fiber for @%s",
                                fn->ir->name);
  f->scheduler = s;
  f->fn = fn;
  f->host_owned = true;
  f->result_count = fn->ir->result_count;
  atomic_init(&f->cancel_requested, false);
  f->start_depth_base = base;
  f->start_fuel = s->options.fuel;
  hali_status_t st = HALI_OK;
  if (!parent) {
    /* Fences the host passes in are fences it may signal. */
    for (size_t i = 0; i < arg_count; ++i)
      if (args[i].type == HALI_TYPE_FENCE)
        hali_hal_fence_mark_host_visible((hali_hal_fence_t *)args[i].ref);
    f->stack = stack_take_locked(s, f, false);
    st = f->stack ? hali_vm_begin(f->stack, link, fn, args, arg_count,
                                  f->results, f->result_count)
                  : hali_status_annotate(hali_status_oom(),
                                         "starting a fiber for @%s",
                                         fn->ir->name);
  } else {
    f->start_link = link;
    for (size_t i = 0; i < arg_count; ++i) {
      f->args[i] = args[i];
      if (hali_type_is_ref(args[i].type)) hali_ref_retain(args[i].ref);
    }
    f->arg_count = (uint32_t)arg_count;
  }
  if (!st && !inv) {
    pthread_mutex_lock(&s->mutex);
    inv = s->inv_pool;
    if (inv) {
      s->inv_pool = inv->next;
      s->inv_pool_count--;
    }
    pthread_mutex_unlock(&s->mutex);
    if (!inv) inv = hali_malloc(sizeof(*inv));
    if (!inv)
      st = hali_status_annotate(hali_status_oom(), "starting an invocation "
                                                   "of @%s",
                                fn->ir->name);
    else {
      memset(inv, 0, sizeof(*inv));
      inv->name = fn->ir->name;
      inv->deadline_ns = INT64_MAX;
      if (s->options.max_duration_ns) {
        int64_t now = now_ns();
        inv->deadline_ns =
            s->options.max_duration_ns > (uint64_t)(INT64_MAX - 1 - now)
                ? INT64_MAX - 1
                : now + (int64_t)s->options.max_duration_ns;
      }
      f->root = true;
    }
  }
  if (st) {
    fiber_destroy(f);
    return st;
  }
  f->inv = inv;
  f->module = m;
  if (f->root) {
    inv->module = m;
    hali_vm_module_retain(m);
  } else if (inv->module != m) { /* not expected: a spawn stays in its module */
    f->owns_module = true;
    hali_vm_module_retain(m);
  }
  if (parent) {
    /* Everything the spawner sets up happens before the fiber is ready:
     * with fiber threads another thread may run it (and finish and
     * recycle it) at once.  Its instruction budget is half of what the
     * spawner has left (the spawner keeps the rest): an invocation and
     * everything it spawns never run more than the budget it started
     * with.  Owned by the scheduler (recycled when it finishes); the
     * fence lives on in the spawner's register. */
    f->host_owned = false;
    if (parent->fuel_enabled) {
      f->start_fuel = parent->fuel / 2;
      parent->fuel -= f->start_fuel;
    }
    hali_status_t fs =
        hali_hal_fence_create_pending_pooled(s->fence_pool, &f->fence);
    if (fs) {
      f->fence = NULL;
      if (f->owns_module) hali_vm_module_release(m);
      f->module = NULL;
      if (parent->fuel_enabled) parent->fuel += f->start_fuel;
      fiber_destroy(f);
      return hali_status_annotate(fs, "creating the fence of a spawned "
                                      "fiber");
    }
    hali_hal_fence_retain(f->fence);
    *out_fence = f->fence;
  }
  pthread_mutex_lock(&s->mutex);
  if (spare && fiber_limits_reached(s, inv, &live, &inv_live)) {
    pthread_mutex_unlock(&s->mutex);
    /* Undone; the record stays this thread's spare. */
    release_args(f);
    hali_hal_fence_release(f->fence);
    hali_hal_fence_release(*out_fence);
    *out_fence = NULL;
    f->fence = NULL;
    if (parent->fuel_enabled) parent->fuel += f->start_fuel;
    if (f->owns_module) hali_vm_module_release(m);
    f->module = NULL;
    s->th[slot].spare = f;
    if (live >= cap)
      return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                              "cannot start @%s: %zu fibers are live, the "
                              "limit of one context",
                              fn->ir->name, live);
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "cannot spawn @%s: the invocation of @%s has %u "
                            "live fibers, the limit of one invocation",
                            fn->ir->name, inv->name, inv_live);
  }
  if (spare) s->reused++;
  /* The record for this thread's next spawn, in this hold. */
  if (slot != NO_SLOT && !s->th[slot].spare && s->pool) {
    s->th[slot].spare = s->pool;
    s->pool = s->pool->next;
    s->pool_count--;
  }
  f->id = ++s->next_id;
  uint32_t id = f->id;
  /* Awaits overlap the fiber slices on the scheduler's track: each fiber
   * gets a track of its own for them. */
  if (f->stack) f->stack->trace_tid = 1000 + f->id;
  f->next = s->all;
  if (s->all) s->all->prev = f;
  s->all = f;
  s->live++;
  atomic_fetch_add_explicit(&s->live_hint, 1, memory_order_relaxed);
  inv->refs++;
  inv->live++;
  if (f->root && inv->deadline_ns != INT64_MAX) {
    s->timed++;
    watchdog_poke(s);
  }
  push_ready(s, f, parent ? PUSH_SPAWN : PUSH_WAKE);
  /* Back-pressure: a spawner whose thread's queue holds SPAWN_BACKLOG
   * ready fibers yields at its next call or branch, so the children run
   * (and are recycled) while its loop adds more, instead of piling up. */
  if (parent && s->th[f->home].count >= SPAWN_BACKLOG &&
      !atomic_load(&parent->interrupt)) {
    atomic_store(&parent->interrupt_code, HALI_VM_INTERRUPT_YIELD);
    atomic_store(&parent->interrupt, true);
    s->spawn_yields++;
  }
  if ((s->live >= 2 || s->timed) && !s->watchdog_started &&
      pthread_create(&s->watchdog, NULL, watchdog_main, s) == 0)
    s->watchdog_started = true;
  pthread_mutex_unlock(&s->mutex);
  if (HALI_TRACE_ON(s->options.trace))
    hali_trace_printf(s->options.trace, "[fiber] %u start @%s", id,
                      fn->ir->name);
  *out = parent ? NULL : f; /* a spawned fiber may be gone already */
  return HALI_OK;
}

/* What a spawned fiber that returned hands to fiber.join: its function
 * and a copy of its results (refs retained), attached to its fence. */
typedef struct {
  const hali_ir_func_t *fn;
  uint32_t count;
  hali_value_t values[];
} fiber_results_t;

static void fiber_results_free(void *p) {
  fiber_results_t *r = p;
  if (!r) return;
  for (uint32_t i = 0; i < r->count; ++i) hali_value_release(&r->values[i]);
  hali_free(r);
}

/* Attaches |f|'s results to |fence| for fiber.join (before the signal
 * publishes them).  Out of memory: false (the join will fail). */
static bool attach_results(hali_vm_fiber_t *f, hali_hal_fence_t *fence) {
  if (!f->result_count) return true;
  fiber_results_t *r =
      hali_malloc(sizeof(*r) + f->result_count * sizeof(hali_value_t));
  if (!r) return false;
  r->fn = f->fn->ir;
  r->count = f->result_count;
  for (uint32_t i = 0; i < f->result_count; ++i) {
    r->values[i] = f->results[i];
    if (hali_type_is_ref(r->values[i].type)) hali_ref_retain(r->values[i].ref);
  }
  hali_hal_fence_set_payload(fence, r, fiber_results_free);
  return true;
}

/* |f| finished with |status| (owned): record it, signal or fail its fence
 * (without the mutex: waking others takes it). */
static void finish_trace(hali_vm_scheduler_t *s, hali_vm_fiber_t *f,
                         hali_status_t status) {
  if (status && f->stack) hali_vm_stack_reset(f->stack);
  if (HALI_TRACE_ON(s->options.trace))
    hali_trace_printf(s->options.trace, "[fiber] %u %s%s%s", f->id,
                      status ? "failed: " : "done",
                      status ? hali_status_code_name(hali_status_code(status))
                             : "",
                      "");
}

/* Publishes |f|'s end (mutex held) and returns its fence (retained; may
 * be NULL) for finish_complete.  Until then the record stays: a host
 * releasing the fiber meanwhile leaves the freeing to finish_complete. */
static hali_hal_fence_t *finish_publish(hali_vm_fiber_t *f,
                                        hali_status_t status) {
  f->status = status;
  f->state = FIBER_DONE;
  f->finishing = true;
  hali_hal_fence_retain(f->fence);
  return f->fence;
}

static void finish_complete(hali_vm_scheduler_t *s, hali_vm_fiber_t *f,
                            hali_status_t status, hali_hal_fence_t *fence,
                            bool keep_locked);

static void finish(hali_vm_scheduler_t *s, hali_vm_fiber_t *f,
                   hali_status_t status) {
  finish_trace(s, f, status);
  /* Publish the result, then signal the fence outside the mutex (waking
   * others takes it).  A fence asked for later is made signalled. */
  pthread_mutex_lock(&s->mutex);
  hali_hal_fence_t *fence = finish_publish(f, status);
  pthread_mutex_unlock(&s->mutex);
  finish_complete(s, f, status, fence, false);
}

/* Signals (or fails) |fence| (not NULL) with |f|'s end (no mutex: waking
 * others takes it), its results attached first for fiber.join.  Returns
 * the status the fence got: |status|, or the failure to keep the results
 * (then |status| was OK and it is a new one). */
static hali_status_t finish_signal(hali_vm_fiber_t *f, hali_status_t status,
                                   hali_hal_fence_t *fence) {
  if (!status && !f->host_owned && !attach_results(f, fence))
    status = hali_status_annotate(hali_status_oom(),
                                  "keeping the results of @%s for "
                                  "fiber.join",
                                  f->fn->ir->name);
  if (status) {
    hali_hal_fence_fail(fence, hali_status_clone(status));
  } else {
    hali_status_t sig = hali_hal_fence_signal(fence);
    hali_status_free(sig);
  }
  return status;
}

static void finish_count_locked(hali_vm_scheduler_t *s, hali_vm_fiber_t *f,
                                hali_status_t status);

/* Signals (or fails) the fence of a published end, then counts the end
 * under the mutex, which it keeps on return with |keep_locked|. */
static void finish_complete(hali_vm_scheduler_t *s, hali_vm_fiber_t *f,
                            hali_status_t status, hali_hal_fence_t *fence,
                            bool keep_locked) {
  if (fence) {
    status = finish_signal(f, status, fence);
    hali_hal_fence_release(fence);
  }
  pthread_mutex_lock(&s->mutex);
  finish_count_locked(s, f, status);
  if (!keep_locked) pthread_mutex_unlock(&s->mutex);
}

/* Counts a published end whose fence is signalled (mutex held): frees a
 * spawned fiber, or a host-started one the host released. */
static void finish_count_locked(hali_vm_scheduler_t *s, hali_vm_fiber_t *f,
                                hali_status_t status) {
  s->events++;
  s->live--;
  atomic_fetch_sub_explicit(&s->live_hint, 1, memory_order_release);
  f->inv->live--;
  /* The deadline holds until the invocation's last fiber ends, also for
   * fibers still running after the host-started one returned. */
  if (!f->inv->live && f->inv->deadline_ns != INT64_MAX) s->timed--;
  /* An invocation stopped (cancelled, out of time) stops its device work
   * too: nobody will await it any more. */
  hali_status_code_t code = hali_status_code(status);
  if (f->root && (code == HALI_STATUS_CANCELLED ||
                  code == HALI_STATUS_DEADLINE_EXCEEDED))
    hali_hal_stop_request(f->inv->stop, code);
  f->finishing = false;
  bool free_now = !f->host_owned || f->released;
  if (free_now) fiber_free(f);
  cond_notify(s);
}

/* Runs |f| until it finishes or suspends.  Called with the mutex held
 * (the caller took |f| from a queue in that hold) and returns with it
 * held: it is dropped while the fiber runs and while its end or its
 * wake-ups reach others. */
static void resume(hali_vm_scheduler_t *s, hali_vm_fiber_t *f) {
  hali_vm_stack_t *st = f->stack;
  hali_hal_fence_t *awaited = NULL; /* released without the mutex */
  if (st) {
    st->suspended = false;
    awaited = st->awaiting;
    st->awaiting = NULL;
  }
  if (atomic_load(&f->cancel_requested)) {
    pthread_mutex_unlock(&s->mutex);
    hali_hal_fence_release(awaited);
    hali_status_code_t code = atomic_load(&f->cancel_code);
    finish(s, f,
           code == HALI_STATUS_DEADLINE_EXCEEDED
               ? hali_status_make(code,
                                  "fiber %u (@%s): the invocation of @%s "
                                  "exceeded its deadline",
                                  f->id, f->fn->ir->name, f->inv->name)
               : hali_status_make(HALI_STATUS_CANCELLED,
                                  "fiber %u (@%s) was cancelled", f->id,
                                  f->fn->ir->name));
    pthread_mutex_lock(&s->mutex);
    return;
  }
  bool first_run = !st;
  if (first_run) {
    /* A spawned fiber's first run: its stack (taken in this hold of the
     * mutex when the pool has one), then its call, set up once the mutex
     * is dropped (below). */
    st = stack_take_locked(s, f, true);
    if (!st) {
      pthread_mutex_unlock(&s->mutex);
      release_args(f);
      finish(s, f,
             hali_status_annotate(hali_status_oom(),
                                  "starting a fiber for @%s",
                                  f->fn->ir->name));
      pthread_mutex_lock(&s->mutex);
      return;
    }
    /* Attached under the mutex: a cancel from now on interrupts it (one
     * before found no stack and only set the request). */
    f->stack = st;
    if (atomic_load(&f->cancel_requested)) {
      atomic_store(&st->interrupt_code, atomic_load(&f->cancel_code));
      atomic_store(&st->interrupt, true);
    }
  }
  int64_t t0 =
      HALI_TRACE_ON(s->options.trace) ? hali_trace_now(s->options.trace) : 0;
  /* A host callback of a running fiber may run the scheduler again (it
   * awaits another invocation): the outer fiber is running again after
   * this one, and the watchdog must still see it. */
  uint32_t slot = my_slot(s);
  if (slot == NO_SLOT) slot = 0;
  fiber_thread_t *t = &s->th[slot];
  hali_vm_fiber_t *outer = t->running;
  uint64_t outer_seq = t->run_seq;
  t->running = f;
  t->run_seq = ++s->resume_seq;
  /* A worker that took |f| just before the last run returned: that run
   * found no fiber to ask to yield here yet. */
  if (slot != 0 && !s->runs && !atomic_load(&st->interrupt)) {
    atomic_store(&st->interrupt_code, HALI_VM_INTERRUPT_YIELD);
    atomic_store(&st->interrupt, true);
  }
  watchdog_poke(s);
  pthread_mutex_unlock(&s->mutex);
  hali_hal_fence_release(awaited);
  if (first_run) {
    hali_status_t b = hali_vm_begin(st, f->start_link, f->fn, f->args,
                                    f->arg_count, f->results, f->result_count);
    release_args(f); /* the stack holds its own references */
    if (b) {
      pthread_mutex_lock(&s->mutex);
      t->running = outer;
      t->run_seq = outer_seq;
      f->stack = NULL;
      stack_put(s, st);
      pthread_mutex_unlock(&s->mutex);
      finish(s, f, b);
      pthread_mutex_lock(&s->mutex);
      return;
    }
  }
  hali_status_t status = hali_vm_interpret(st, f->results);
  if (HALI_TRACE_ON(s->options.trace)) {
    char name[96];
    snprintf(name, sizeof(name), "fiber %u @%s", f->id, f->fn->ir->name);
    hali_trace_slice(s->options.trace, name, "fiber", 0, t0,
                     hali_trace_now(s->options.trace) - t0, NULL);
  }
  /* What happens next is decided in the same hold of the mutex that
   * takes the fiber off this thread: it ended (published), its time slice
   * is over (to the back of the queue), or it suspends on st->awaiting. */
  bool done = status || !st->suspended;
  bool yielded = !done && st->yielded;
  if (yielded) {
    st->yielded = false;
    st->suspended = false;
  }
  if (done) finish_trace(s, f, status);
  /* A spawned fiber's fence (only the scheduler holds the fiber, and the
   * record holds its fence) is signalled before the one hold of the mutex
   * that publishes and counts the end.  A host-started fiber is published
   * first: the host reads its state and results. */
  bool early = done && !f->host_owned && f->fence;
  if (early) {
    /* Also outside the mutex: dropping the record's fence reference and
     * the registers' (either may free objects). */
    status = finish_signal(f, status, f->fence);
    hali_hal_fence_release(f->fence);
    f->fence = NULL;
    hali_vm_stack_reset(st);
  }
  hali_hal_fence_t *fence = NULL;
  pthread_mutex_lock(&s->mutex);
  t->running = outer;
  t->run_seq = outer_seq;
  /* A yield request that came too late to be seen is dropped. */
  if (atomic_load(&st->interrupt_code) == HALI_VM_INTERRUPT_YIELD) {
    atomic_store(&st->interrupt_code, HALI_STATUS_OK);
    atomic_store(&st->interrupt, false);
  }
  if (early) {
    f->status = status;
    f->state = FIBER_DONE;
    finish_count_locked(s, f, status);
    return;
  }
  if (done) {
    fence = finish_publish(f, status);
    pthread_mutex_unlock(&s->mutex);
    finish_complete(s, f, status, fence, true);
    return;
  }
  if (yielded) {
    push_ready(s, f, PUSH_YIELD);
    return;
  }
  f->state = FIBER_SUSPENDING;
  f->wait_epoch++;
  f->wait_fired = 0;
  f->wait_registered = 0;
  f->wait_counting = false;
  f->wait_failed = false;
  pthread_mutex_unlock(&s->mutex);
  /* Register the wake-ups, then decide, under the mutex, whether the
   * fiber sleeps (a wake-up or a cancel may have come meanwhile). */
  size_t registered = 0;
  bool ready = register_wait(s, f, st->awaiting, &registered);
  pthread_mutex_lock(&s->mutex);
  f->wait_registered = registered;
  f->wait_counting = true;
  if (f->state == FIBER_SUSPENDING) {
    if (ready || atomic_load(&f->cancel_requested) || f->wait_failed ||
        f->wait_fired >= registered) {
      wake_fiber(s, f);
    } else {
      f->state = FIBER_SUSPENDED;
      s->suspended++;
    }
  }
}

/* The deadlock report: every fiber, what it awaits and where. */
static hali_status_t deadlock(hali_vm_scheduler_t *s) {
  hali_strbuf_t sb = {0};
  hali_strbuf_printf(&sb,
                     "deadlock: all %zu fiber(s) are suspended and neither "
                     "queue work nor a deadline can wake them",
                     s->live);
  for (hali_vm_fiber_t *f = s->all; f; f = f->next) {
    if (f->state != FIBER_SUSPENDED) continue;
    hali_vm_stack_t *st = f->stack;
    const hali_vm_frame_t *fr = &st->frames[st->depth - 1];
    const hali_ir_insn_t *insn = hali_vm_func_insn(fr->fn, fr->pc);
    uint32_t pc = hali_vm_func_pc(fr->fn, fr->pc);
    hali_strbuf_printf(&sb, "\n  fiber %u (@%s) awaits fence #%u at @%s@%u",
                       f->id, f->fn->ir->name,
                       st->awaiting ? ((hali_ref_t *)st->awaiting)->id : 0,
                       fr->fn->ir->name, pc);
    if (insn && insn->line)
      hali_strbuf_printf(&sb, " (%s:%u)",
                         f->module->ir->source ? f->module->ir->source : "?",
                         insn->line);
  }
  char *text = hali_strbuf_take(&sb);
  hali_status_t st = hali_status_make(HALI_STATUS_FAILED_PRECONDITION, "%s",
                                      text ? text : "deadlock");
  hali_free(text);
  return st;
}

/* Whether the host can get the device queue going (mutex held; dropped
 * meanwhile): false when nothing is queued, or when what runs next waits
 * on a fence the host never held (e.g. the submission's own signal
 * fence). */
static bool queue_stuck_for_host(hali_vm_scheduler_t *s) {
  if (!s->device) return true;
  pthread_mutex_unlock(&s->mutex);
  bool pending = false;
  hali_hal_fence_t *blocked = NULL;
  hali_hal_device_queue_state(s->device, &pending, &blocked);
  bool stuck = !pending || (blocked && !hali_hal_fence_host_may_signal(blocked));
  hali_hal_fence_release(blocked);
  pthread_mutex_lock(&s->mutex);
  return stuck;
}

/* Whether some suspended fiber awaits a fence the host may signal (mutex
 * held; dropped while the fences are looked at: their locks come before
 * the scheduler's). */
static bool host_may_wake_suspended(hali_vm_scheduler_t *s) {
  size_t n = 0;
  for (hali_vm_fiber_t *g = s->all; g; g = g->next)
    n += g->state == FIBER_SUSPENDED && g->stack->awaiting;
  if (!n) return false;
  hali_hal_fence_t **fences = hali_malloc(n * sizeof(*fences));
  if (!fences) return true; /* cannot tell: never a false report */
  size_t k = 0;
  for (hali_vm_fiber_t *g = s->all; g && k < n; g = g->next)
    if (g->state == FIBER_SUSPENDED && g->stack->awaiting) {
      fences[k] = g->stack->awaiting;
      hali_hal_fence_retain(fences[k++]);
    }
  pthread_mutex_unlock(&s->mutex);
  bool may = false;
  for (size_t i = 0; i < k; ++i) {
    if (!may) may = hali_hal_fence_host_may_signal(fences[i]);
    hali_hal_fence_release(fences[i]);
  }
  hali_free(fences);
  pthread_mutex_lock(&s->mutex);
  return may;
}

hali_status_t hali_vm_scheduler_run(hali_vm_scheduler_t *s,
                                    hali_vm_fiber_t *until) {
  return hali_vm_scheduler_run_until(s, until, INT64_MAX);
}

static hali_status_t run_deadline_exceeded(hali_vm_scheduler_t *s,
                                           const hali_vm_fiber_t *until) {
  pthread_mutex_unlock(&s->mutex);
  return hali_status_make(HALI_STATUS_DEADLINE_EXCEEDED,
                          "@%s has not finished by the deadline",
                          until->fn->ir->name);
}

static hali_status_t run(hali_vm_scheduler_t *s, hali_vm_fiber_t *until,
                         int64_t run_deadline);

hali_status_t hali_vm_scheduler_run_until(hali_vm_scheduler_t *s,
                                          hali_vm_fiber_t *until,
                                          int64_t run_deadline) {
  if (!until) run_deadline = INT64_MAX;
  if (run_deadline == INT64_MAX) return run(s, until, run_deadline);
  /* The watchdog enforces the deadline on code that never awaits. */
  pthread_mutex_lock(&s->mutex);
  int64_t outer = s->run_deadline;
  if (run_deadline < outer) s->run_deadline = run_deadline;
  watchdog_poke(s);
  if (!s->watchdog_started &&
      pthread_create(&s->watchdog, NULL, watchdog_main, s) == 0)
    s->watchdog_started = true;
  pthread_mutex_unlock(&s->mutex);
  hali_status_t status = run(s, until, run_deadline);
  pthread_mutex_lock(&s->mutex);
  s->run_deadline = outer;
  pthread_mutex_unlock(&s->mutex);
  return status;
}

/* A worker thread: runs ready fibers while some thread is inside run(). */
typedef struct {
  hali_vm_scheduler_t *s;
  uint32_t slot;
} worker_arg_t;

static void *worker_main(void *arg);

/* Starts one more worker, if the scheduler has fewer than it may (the
 * mutex is held); it looks for work as soon as it runs.  Out of memory
 * or threads: it runs with the threads it has (still correct). */
static void start_worker(hali_vm_scheduler_t *s) {
  if (s->workers_started + 1 >= s->threads) return;
  worker_arg_t *a = hali_malloc(sizeof(*a));
  if (!a) return;
  uint32_t slot = s->workers_started + 1;
  a->s = s;
  a->slot = slot;
  /* |a| is the worker's from here; the mutex keeps it from reading th[]
   * before this is done. */
  if (pthread_create(&s->workers[s->workers_started], NULL, worker_main,
                     a) != 0) {
    hali_free(a);
    s->threads = slot; /* fewer threads from now on */
    return;
  }
  s->th[slot].waking = true;
  s->waking++;
  s->workers_started++;
}

static void *worker_main(void *arg) {
  worker_arg_t a = *(worker_arg_t *)arg;
  hali_free(arg);
  hali_vm_scheduler_t *s = a.s;
  tls_worker.s = s;
  tls_worker.slot = a.slot;
  fiber_thread_t *t = &s->th[a.slot];
  pthread_mutex_lock(&s->mutex);
  while (!s->workers_stop) {
    if (t->waking) { /* back: looking for work now */
      t->waking = false;
      s->waking--;
    }
    int64_t retry_at = INT64_MAX;
    hali_vm_fiber_t *f = s->runs ? take_ready(s, a.slot, &retry_at) : NULL;
    if (!f) {
      t->idle = true;
      t->on_main = false;
      s->idle++;
      if (retry_at != INT64_MAX) { /* a fiber to take once its grace ends */
        struct timespec ts = {(time_t)(retry_at / 1000000000),
                              (long)(retry_at % 1000000000)};
        t->eyeing = true;
        while (t->idle && !s->workers_stop &&
               pthread_cond_timedwait(&t->cond, &s->mutex, &ts) == 0) {
        }
        t->eyeing = false;
      } else {
        while (t->idle && !s->workers_stop)
          pthread_cond_wait(&t->cond, &s->mutex);
      }
      if (t->idle) { /* stopping, or a grace ended: look again */
        t->idle = false;
        s->idle--;
      }
      continue;
    }
    f->state = FIBER_RUNNING;
    s->running_count++;
    s->worker_runs++;
    bool outer = t->resuming; /* (a host callback may run fibers inside) */
    t->resuming = true;
    resume(s, f); /* drops the mutex while the fiber runs */
    t->resuming = outer;
    s->running_count--;
    cond_notify(s); /* run() re-decides */
  }
  pthread_mutex_unlock(&s->mutex);
  return NULL;
}

static hali_status_t run_loop(hali_vm_scheduler_t *s, hali_vm_fiber_t *until,
                              int64_t run_deadline);

/* run_loop between the bookkeeping of fiber threads: workers run fibers
 * while |runs| > 0; the last run to return stops the fibers still running
 * on workers at their next call or branch (they stay ready), so that
 * between runs no fiber runs, as with one thread. */
static hali_status_t run(hali_vm_scheduler_t *s, hali_vm_fiber_t *until,
                         int64_t run_deadline) {
  tls_slot_t saved = tls_worker;
  if (tls_worker.s != s) { /* this thread is fiber thread 0 meanwhile */
    tls_worker.s = s;
    tls_worker.slot = 0;
  }
  pthread_mutex_lock(&s->mutex);
  s->runs++;
  /* Workers start when there is work for them (here: more fibers ready
   * than this thread takes; later: a spawn or a wake-up that finds no
   * thread idle), so a run that never spawns starts no thread. */
  for (size_t want = s->ready; want > 1 + s->workers_started &&
                               s->workers_started + 1 < s->threads;) {
    uint32_t before = s->workers_started;
    start_worker(s);
    if (s->workers_started == before) break;
  }
  /* Fibers left on the workers' queues by the last run (or woken since):
   * their threads run them again. */
  for (uint32_t k = 1; s->ready && k < s->threads; ++k)
    if (s->th[k].count) wake_thread(s, k);
  if (s->ready > s->th[0].count) wake_one_idle(s, 0);
  pthread_mutex_unlock(&s->mutex);
  hali_status_t status = run_loop(s, until, run_deadline);
  pthread_mutex_lock(&s->mutex);
  if (--s->runs == 0 && s->workers_started) {
    for (;;) {
      bool any = false;
      for (uint32_t k = 1; k < s->threads; ++k) {
        hali_vm_fiber_t *r = s->th[k].running;
        if (!r) continue;
        any = true;
        if (!atomic_load(&r->stack->interrupt)) {
          atomic_store(&r->stack->interrupt_code, HALI_VM_INTERRUPT_YIELD);
          atomic_store(&r->stack->interrupt, true);
        }
      }
      if (!any && !s->running_count) break;
      cond_wait(s, NULL);
    }
  }
  pthread_mutex_unlock(&s->mutex);
  tls_worker = saved;
  return status;
}

/* The thread inside run() waits (mutex held) until |wake_at|, or until a
 * fiber is queued for it, a fiber finishes or a wake-up fires. */
static void run_sleep(hali_vm_scheduler_t *s, uint32_t me, int64_t wake_at) {
  fiber_thread_t *t = &s->th[me];
  if (!t->idle) {
    t->idle = true;
    t->on_main = true;
    s->idle++;
  }
  struct timespec ts = {(time_t)(wake_at / 1000000000),
                        (long)(wake_at % 1000000000)};
  cond_wait(s, &ts);
  if (t->idle) {
    t->idle = false;
    s->idle--;
  }
  if (t->waking) {
    t->waking = false;
    s->waking--;
  }
}

static hali_status_t run_loop(hali_vm_scheduler_t *s, hali_vm_fiber_t *until,
                              int64_t run_deadline) {
  uint32_t me = my_slot(s);
  pthread_mutex_lock(&s->mutex);
  for (;;) {
    if (until && until->state == FIBER_DONE) break;
    int64_t retry_at = INT64_MAX;
    hali_vm_fiber_t *f = take_ready(s, me, &retry_at);
    if (f) {
      f->state = FIBER_RUNNING;
      s->running_count++;
      bool outer = s->th[me].resuming; /* a run inside a host callback */
      s->th[me].resuming = true;
      resume(s, f); /* drops the mutex while the fiber runs */
      s->th[me].resuming = outer;
      s->running_count--;
      if (run_deadline != INT64_MAX && until->state != FIBER_DONE &&
          now_ns() >= run_deadline)
        return run_deadline_exceeded(s, until);
      continue;
    }
    if (!s->suspended && !s->running_count) {
      if (!until || s->live == 0) break; /* idle */
    }
    /* Nothing ready: what could wake a fiber? */
    int64_t now = now_ns(), deadline = INT64_MAX;
    for (hali_vm_fiber_t *g = s->all; g; g = g->next)
      if (g->state == FIBER_SUSPENDED &&
          g->stack->await_deadline_ns < deadline)
        deadline = g->stack->await_deadline_ns;
    if (deadline <= now) {
      for (hali_vm_fiber_t *g = s->all; g; g = g->next)
        if (g->state == FIBER_SUSPENDED &&
            g->stack->await_deadline_ns <= now) {
          g->stack->await_timed_out = true;
          g->stack->await_deadline_ns = INT64_MAX;
          wake_fiber(s, g);
        }
      continue;
    }
    if (s->running_count) {
      /* Fibers run on workers: they may spawn, signal or finish.  Wait for
       * them (each resume's end broadcasts), an await's deadline or the
       * run's, polling every 10 ms. */
      if (now >= run_deadline) return run_deadline_exceeded(s, until);
      int64_t wake_at = now + 10000000;
      if (deadline < wake_at) wake_at = deadline;
      if (run_deadline < wake_at) wake_at = run_deadline;
      if (retry_at < wake_at) wake_at = retry_at; /* a steal's grace */
      run_sleep(s, me, wake_at);
      continue;
    }
    uint64_t events = s->events;
    pthread_mutex_unlock(&s->mutex);
    bool queue = s->device && hali_hal_device_queue_can_progress(s->device);
    pthread_mutex_lock(&s->mutex);
    if (s->events != events || s->ready || s->running_count) continue;
    /* With external signals allowed, the host may still wake a fiber
     * when it holds a fence that one awaits or that queue work waits on;
     * waiting for anything else (the program's own fences, queue work
     * that waits on its own signal fence) is the deadlock reported. */
    bool host = s->allow_external &&
                (!until || !queue_stuck_for_host(s) ||
                 host_may_wake_suspended(s));
    /* (Anything that happened meanwhile: decide again.) */
    if (s->events != events || s->ready || s->running_count) continue;
    if (!queue && deadline == INT64_MAX && !host) {
      if (!until && !s->suspended) break;
      hali_status_t d = deadlock(s);
      pthread_mutex_unlock(&s->mutex);
      return d;
    }
    if (!until && !queue && deadline == INT64_MAX) break; /* external */
    if (now >= run_deadline) return run_deadline_exceeded(s, until);
    /* Sleep until woken, the deadline, or a short poll of the queue (its
     * progress does not always wake us: it may signal other fences). */
    int64_t wake_at = deadline;
    if (queue || s->allow_external)
      wake_at = now + 10000000 < wake_at ? now + 10000000 : wake_at;
    if (run_deadline < wake_at) wake_at = run_deadline;
    run_sleep(s, me, wake_at);
  }
  pthread_mutex_unlock(&s->mutex);
  return HALI_OK;
}

size_t hali_vm_scheduler_live(hali_vm_scheduler_t *s) {
  pthread_mutex_lock(&s->mutex);
  size_t n = s->live;
  pthread_mutex_unlock(&s->mutex);
  return n;
}
size_t hali_vm_scheduler_live_hint(const hali_vm_scheduler_t *s) {
  return atomic_load_explicit(&s->live_hint, memory_order_acquire);
}
size_t hali_vm_scheduler_suspended(hali_vm_scheduler_t *s) {
  pthread_mutex_lock(&s->mutex);
  size_t n = s->suspended;
  pthread_mutex_unlock(&s->mutex);
  return n;
}

uint64_t hali_vm_scheduler_spawn_yields(hali_vm_scheduler_t *s) {
  pthread_mutex_lock(&s->mutex);
  uint64_t n = s->spawn_yields;
  pthread_mutex_unlock(&s->mutex);
  return n;
}

uint64_t hali_vm_scheduler_steals(hali_vm_scheduler_t *s) {
  pthread_mutex_lock(&s->mutex);
  uint64_t n = s->steals;
  pthread_mutex_unlock(&s->mutex);
  return n;
}

uint32_t hali_vm_scheduler_threads(hali_vm_scheduler_t *s) {
  pthread_mutex_lock(&s->mutex);
  uint32_t n = s->threads;
  pthread_mutex_unlock(&s->mutex);
  return n;
}

uint32_t hali_vm_default_fiber_threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) return 1;
  return n > (long)HALI_VM_MAX_FIBER_THREADS ? HALI_VM_MAX_FIBER_THREADS
                                             : (uint32_t)n;
}

bool hali_vm_fiber_done(const hali_vm_fiber_t *f) {
  return f->state == FIBER_DONE;
}
hali_hal_fence_t *hali_vm_fiber_fence(hali_vm_fiber_t *f) {
  hali_vm_scheduler_t *s = f->scheduler;
  pthread_mutex_lock(&s->mutex);
  if (!f->fence) {
    hali_status_t st = hali_hal_fence_create_pending(&f->fence);
    if (st) {
      hali_status_free(st);
      f->fence = NULL;
    } else if (f->state == FIBER_DONE) {
      /* Nobody can be waiting on a fence made just now: no wake-ups run
       * under the mutex. */
      if (f->status) {
        hali_hal_fence_fail(f->fence, hali_status_clone(f->status));
      } else {
        hali_status_free(hali_hal_fence_signal(f->fence));
      }
    }
  }
  hali_hal_fence_t *fence = f->fence;
  pthread_mutex_unlock(&s->mutex);
  return fence;
}

void hali_vm_scheduler_stats(hali_vm_scheduler_t *s,
                             uint64_t *out_created, uint64_t *out_reused) {
  pthread_mutex_lock(&s->mutex);
  *out_created = s->created;
  *out_reused = s->reused;
  pthread_mutex_unlock(&s->mutex);
}
hali_status_t hali_vm_fiber_status(const hali_vm_fiber_t *f) {
  return f->status;
}
const hali_value_t *hali_vm_fiber_results(const hali_vm_fiber_t *f,
                                          size_t *out_count) {
  *out_count = f->result_count;
  return f->results;
}

/* Stops |f| with |code| (the mutex is held): a running fiber at its next
 * call or branch, a suspended or ready one when it resumes. */
static void stop_fiber(hali_vm_scheduler_t *s, hali_vm_fiber_t *f,
                       hali_status_code_t code) {
  if (f->state == FIBER_DONE) return;
  atomic_store(&f->cancel_code, code);
  atomic_store(&f->cancel_requested, true);
  if (f->stack) { /* else it has not run yet: it stops when it would */
    atomic_store(&f->stack->interrupt_code, code);
    atomic_store(&f->stack->interrupt, true);
  }
  /* A suspending fiber is woken by resume() once it sees the flag. */
  if (f->state == FIBER_SUSPENDED) wake_fiber(s, f);
  cond_notify(s);
}

void hali_vm_fiber_cancel(hali_vm_fiber_t *f) {
  hali_vm_scheduler_t *s = f->scheduler;
  pthread_mutex_lock(&s->mutex);
  if (f->state != FIBER_DONE) {
    stop_fiber(s, f, HALI_STATUS_CANCELLED);
    /* Cancelling an invocation cancels its kernels at once. */
    if (f->root) hali_hal_stop_request(f->inv->stop, HALI_STATUS_CANCELLED);
  }
  cond_notify(s);
  pthread_mutex_unlock(&s->mutex);
}

hali_hal_fence_pool_t *hali_vm_fiber_fence_pool(const hali_vm_stack_t *st) {
  return st->scheduler && st->fiber ? st->fiber->scheduler->fence_pool : NULL;
}

hali_status_t hali_vm_fiber_stop_for(hali_vm_stack_t *st,
                                     hali_hal_stop_t **out_stop) {
  *out_stop = NULL;
  hali_vm_fiber_t *f = st->fiber;
  if (!st->scheduler || !f) return HALI_OK;
  hali_vm_scheduler_t *s = f->scheduler;
  pthread_mutex_lock(&s->mutex);
  invocation_t *inv = f->inv;
  hali_status_t status = HALI_OK;
  if (!inv->stop) {
    status = hali_hal_stop_create(inv->deadline_ns, &inv->stop);
    if (!status && inv->stopped)
      hali_hal_stop_request(inv->stop, HALI_STATUS_DEADLINE_EXCEEDED);
  }
  *out_stop = inv->stop;
  pthread_mutex_unlock(&s->mutex);
  return status;
}

void hali_vm_fiber_release(hali_vm_fiber_t *f) {
  if (!f) return;
  hali_vm_scheduler_t *s = f->scheduler;
  pthread_mutex_lock(&s->mutex);
  f->released = true;
  /* Still finishing on another thread: finish_complete frees it. */
  if (f->state == FIBER_DONE && !f->finishing) fiber_free(f);
  pthread_mutex_unlock(&s->mutex);
}

size_t hali_vm_fiber_overhead_bytes(const hali_vm_fiber_t *f) {
  return sizeof(*f) +
         (f->stack ? sizeof(*f->stack) +
                         f->stack->frame_capacity * sizeof(hali_vm_frame_t)
                   : 0) +
         f->result_count * sizeof(hali_value_t) +
         (f->waiters ? sizeof(waiter_t) : 0);
}

void hali_vm_scheduler_free(hali_vm_scheduler_t *s) {
  if (!s) return;
  if (s->workers_started) {
    pthread_mutex_lock(&s->mutex);
    s->workers_stop = true;
    for (uint32_t k = 1; k < s->threads; ++k)
      pthread_cond_signal(&s->th[k].cond);
    pthread_mutex_unlock(&s->mutex);
    for (uint32_t k = 0; k < s->workers_started; ++k)
      pthread_join(s->workers[k], NULL);
  }
  if (s->watchdog_started) {
    pthread_mutex_lock(&s->mutex);
    s->watchdog_stop = true;
    pthread_cond_broadcast(&s->watchdog_cond);
    pthread_mutex_unlock(&s->mutex);
    pthread_join(s->watchdog, NULL);
  }
  pthread_mutex_lock(&s->mutex);
  /* Invocations still running are cancelled: their device work too, so
   * that a device (or a context's private one) released next does not
   * wait for kernels nobody awaits. */
  for (hali_vm_fiber_t *f = s->all; f; f = f->next)
    if (f->state != FIBER_DONE && f->inv)
      hali_hal_stop_request(f->inv->stop, HALI_STATUS_CANCELLED);
  for (hali_vm_fiber_t *f = s->all; f; f = f->next)
    if (f->state == FIBER_SUSPENDED) {
      detach_waiters(s, f);
      s->suspended--;
    }
  /* Wake-ups already firing hold references: wait for them. */
  while (s->waiters_live) cond_wait(s, NULL);
  pthread_mutex_unlock(&s->mutex);
  /* Whoever awaits an unfinished fiber learns that it never will.  No
   * wake-up of this scheduler is registered any more and its watchdog is
   * gone, so nothing else touches the list now; failing a fence runs
   * others' callbacks, which must not find our mutex held. */
  for (hali_vm_fiber_t *f = s->all; f; f = f->next)
    if (f->state != FIBER_DONE && f->fence)
      hali_hal_fence_fail(
          f->fence,
          hali_status_make(HALI_STATUS_CANCELLED,
                           "fiber %u (@%s) was cancelled: its scheduler (the "
                           "context) was released before it finished",
                           f->id, f->fn->ir->name));
  pthread_mutex_lock(&s->mutex);
  while (s->all) fiber_free(s->all);
  while (s->pool) {
    hali_vm_fiber_t *f = s->pool;
    s->pool = f->next;
    fiber_destroy(f);
  }
  for (uint32_t k = 0; k < HALI_VM_MAX_FIBER_THREADS; ++k)
    if (s->th[k].spare) {
      fiber_destroy(s->th[k].spare);
      s->th[k].spare = NULL;
    }
  while (s->inv_pool) {
    invocation_t *inv = s->inv_pool;
    s->inv_pool = inv->next;
    hali_free(inv);
  }
  while (s->stack_pool_count)
    hali_vm_stack_free(s->stack_pool[--s->stack_pool_count]);
  while (s->waiter_pool) {
    waiter_t *w = s->waiter_pool;
    s->waiter_pool = w->next;
    hali_free(w);
  }
  pthread_mutex_unlock(&s->mutex);
  if (s->device) hali_hal_device_release(s->device);
  hali_hal_fence_pool_close(s->fence_pool);
  pthread_cond_destroy(&s->cond);
  pthread_cond_destroy(&s->watchdog_cond);
  for (uint32_t k = 0; k < HALI_VM_MAX_FIBER_THREADS; ++k)
    pthread_cond_destroy(&s->th[k].cond);
  pthread_mutex_destroy(&s->mutex);
  hali_free(s);
}

hali_status_t hali_vm_fiber_spawn_op(hali_vm_stack_t *st,
                                     const hali_cell_t *pc,
                                     const hali_slot_t *regs,
                                     hali_ref_t **refs) {
  const hali_vm_func_t *callee = pc[1].ptr;
  if (!st->scheduler)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "fiber.spawn @%s needs a scheduler (this "
                            "invocation runs without one)",
                            callee->ir->name);
  const uint16_t *list = hali_cell_slots(&pc[2]);
  uint32_t nargs = pc->i.b;
  hali_value_t args[256];
  if (nargs > 256)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "fiber.spawn passes %u arguments; at most 256",
                            nargs);
  for (uint32_t i = 0; i < nargs; ++i) {
    hali_type_t t = callee->ir->reg_types[i];
    args[i].type = t;
    switch (t) {
    case HALI_TYPE_I32: args[i].i32 = regs[list[i]].i32; break;
    case HALI_TYPE_I64: args[i].i64 = regs[list[i]].i64; break;
    case HALI_TYPE_F32: args[i].f32 = regs[list[i]].f32; break;
    case HALI_TYPE_F64: args[i].f64 = regs[list[i]].f64; break;
    default: args[i].ref = refs[list[i]]; break;
    }
  }
  hali_vm_fiber_t *f;
  hali_hal_fence_t *fence = NULL;
  HALI_RETURN_IF_ERROR_PLAIN(start_fiber(st->scheduler,
                                         st->frames[st->depth - 1].link,
                                         callee, args, nargs, st, &f, &fence));
  uint16_t out = list[nargs];
  hali_ref_t *old = refs[out];
  refs[out] = (hali_ref_t *)fence;
  hali_ref_release(old);
  return HALI_OK;
}

/* ---- Blocking awaits that nothing can end.
 *
 * An await that blocks the thread (in a function marked ["blocking"]) holds
 * the scheduler too: no other fiber runs until it returns.  So while it
 * waits, only these can signal (or fail) the fence:
 *   - queue work on the device, if the queue can progress: it is running
 *     or its next submission's wait fence is reached, or that wait fence
 *     is one the host may signal;
 *   - the host, on another thread, but only when the run allows it
 *     (hali_vm_scheduler_allow_external_signals: the C API's async awaits
 *     and hali_context_run, not hali_context_invoke) and only for fences
 *     it holds: a point on a host-visible semaphore (hal/semaphore.h:
 *     fences the host created, passed in as arguments, or received from
 *     the program).
 * A fence the program made, never gave the host, and that no progressing
 * queue work will signal, can never be signalled: the await ends with the
 * deadlock report instead of blocking forever.  It is decided before the
 * wait and again every 10 ms (queue work may run dry meanwhile), and the
 * slices also let a cancellation or the invocation's deadline stop the
 * wait.  Without a scheduler (plain hali_vm_invoke) the caller is the host
 * itself, and nothing is concluded: the wait only honours interrupts. */
static bool nobody_can_signal(hali_vm_stack_t *st, hali_hal_fence_t *fence,
                              bool *out_host_allowed) {
  hali_vm_scheduler_t *s = st->scheduler;
  pthread_mutex_lock(&s->mutex);
  bool host = s->allow_external;
  /* With fiber threads, another fiber ready or running elsewhere may
   * still signal the fence. */
  bool others = s->threads > 1 && (s->ready || s->running_count > 1);
  pthread_mutex_unlock(&s->mutex);
  *out_host_allowed = host;
  if (others) return false;
  if (host && hali_hal_fence_host_may_signal(fence)) return false;
  if (!st->device) return true;
  bool pending = false;
  hali_hal_fence_t *blocked = NULL;
  hali_hal_device_queue_state(st->device, &pending, &blocked);
  bool stuck = !pending ||
               (blocked && !(host && hali_hal_fence_host_may_signal(blocked)));
  hali_hal_fence_release(blocked);
  if (!stuck) return false;
  /* The queue may have run dry by signalling this very fence (it signals
   * before it counts the submission done): look again. */
  bool ready = false;
  hali_status_t failed = hali_hal_fence_query_untraced(fence, &ready);
  hali_status_free(failed);
  return !failed && !ready;
}

/* Waits until |fence| is ready (OK) or failed (its status); or stops with
 * |*out_stopped| set (the deadlock report, or the interrupt's status). */
static hali_status_t block_until_ready(hali_vm_stack_t *st,
                                       hali_hal_fence_t *fence,
                                       hali_status_t *out_stopped) {
  for (;;) {
    bool host = false;
    if (st->scheduler && nobody_can_signal(st, fence, &host)) {
      const hali_vm_frame_t *fr = &st->frames[st->depth - 1];
      *out_stopped = hali_status_make(
          HALI_STATUS_FAILED_PRECONDITION,
          "deadlock: @%s (attributes [\"blocking\"]) awaits fence #%u, "
          "which nothing can signal: this thread holds every fiber, no "
          "queue work can progress, and %s",
          fr->fn->ir->name, ((hali_ref_t *)fence)->id,
          host ? "the host never held the fence"
               : "the host may not signal fences during this run (a "
                 "synchronous invoke: use an asynchronous one for fences "
                 "the host signals)");
      return HALI_OK;
    }
    hali_status_t w = hali_hal_fence_await_untraced(fence, 10000000);
    if (!w || hali_status_code(w) != HALI_STATUS_DEADLINE_EXCEEDED) return w;
    bool ready = false;
    hali_status_t q = hali_hal_fence_query_untraced(fence, &ready);
    if (q || ready) {
      hali_status_free(w);
      return q;
    }
    hali_status_free(w);
    hali_status_code_t code =
        atomic_load_explicit(&st->interrupt_code, memory_order_acquire);
    if (atomic_load(&st->interrupt) && code != HALI_STATUS_OK &&
        code != HALI_VM_INTERRUPT_YIELD) {
      *out_stopped = hali_status_make(
          code, "invocation %s while blocked",
          code == HALI_STATUS_DEADLINE_EXCEEDED ? "exceeded its deadline"
                                                : "cancelled");
      return HALI_OK;
    }
  }
}

/* ---- The await state machine (hal.fence.await, hal.fence.await_status).
 *
 * An await runs as one instruction that may execute several times:
 *   1. first run: the fence is queried; ready (or failed) -> done.
 *   2. not ready, on a fiber that may suspend (st->can_suspend, the
 *      function is not marked may_block) and a timeout other than 0: the
 *      fence is kept in st->awaiting with its deadline and the await
 *      returns DEFERRED; the interpreter suspends, resume() above registers
 *      the wake-ups, and the scheduler's run loop (its deadline scan) sets
 *      st->await_timed_out when the deadline passes first.
 *   3. resumed (a point reached or failed, or the deadline): the
 *      instruction runs again from 1; a resumption by the deadline with the
 *      fence still not ready gives DEADLINE_EXCEEDED.
 *   Without a scheduler (or for a poll) it blocks the thread in the HAL.
 * st->await_started_ns spans the runs, for the trace's wait time. */
hali_status_t hali_vm_fiber_await(hali_vm_stack_t *st,
                                  hali_hal_fence_t *fence, int64_t timeout_ms,
                                  bool failure_is_result, int32_t *out_code) {
  const uint32_t fence_id = ((hali_ref_t *)fence)->id;
  hali_timeout_ns_t ns = timeout_ms < 0 ? HALI_INFINITE
                         : timeout_ms > INT64_MAX / 1000000
                             ? INT64_MAX
                             : timeout_ms * 1000000;
  /* The clock is read only for what needs it: a trace's wait time, a
   * finite timeout's deadline. */
  int64_t now = 0;
  if (HALI_TRACE_ON(st->trace)) {
    now = hali_clock_now_ns();
    if (!st->await_started_ns) st->await_started_ns = now;
  }
  int32_t code = 0;
  bool ready = false;
  hali_status_t w = hali_hal_fence_query_untraced(fence, &ready);
  if (!w && !ready) {
    if (st->await_oom) { /* the scheduler could not register the wait */
      st->await_oom = false;
      w = hali_status_annotate(hali_status_oom(), "waiting on fence #%u",
                               fence_id);
    } else if (st->await_timed_out) { /* resumed by the scheduler's deadline */
      st->await_timed_out = false;
      code = HALI_STATUS_DEADLINE_EXCEEDED;
    } else if (st->can_suspend && ns != 0 &&
               !st->frames[st->depth - 1].fn->may_block) {
      hali_hal_fence_retain(fence);
      st->awaiting = fence;
      if (ns >= 0 && !now) now = hali_clock_now_ns();
      st->await_deadline_ns =
          ns < 0 || ns > INT64_MAX - now ? INT64_MAX : now + ns;
      /* Not an error: pc stays, and resuming re-runs the await. */
      return hali_status_deferred();
    } else {
      if (ns < 0) {
        /* A deadlock or an interrupt ends the wait: not the fence's
         * outcome, so never a result of await_status either. */
        hali_status_t stopped = NULL;
        w = block_until_ready(st, fence, &stopped);
        if (stopped) {
          st->await_started_ns = 0;
          return hali_status_annotate(stopped, "awaited fence #%u",
                                      fence_id);
        }
      } else {
        w = hali_hal_fence_await_untraced(fence, ns);
      }
      if (w) {
        /* Report the fence's own failure, as a ready fence would (the
         * wait's annotations depend on timing). */
        bool now_ready = false;
        hali_status_t q = hali_hal_fence_query_untraced(fence, &now_ready);
        if (q) {
          hali_status_free(w);
          w = q;
        }
      }
      if (w && hali_status_code(w) == HALI_STATUS_DEADLINE_EXCEEDED) {
        /* Expired rather than failed?  The fence's own state tells. */
        bool now_ready = false;
        hali_status_t q = hali_hal_fence_query_untraced(fence, &now_ready);
        if (!q) {
          hali_status_free(w);
          w = HALI_OK;
          code = now_ready ? 0 : HALI_STATUS_DEADLINE_EXCEEDED;
        }
        hali_status_free(q);
      }
    }
  }
  if (HALI_TRACE_ON(st->trace)) {
    int64_t end = hali_clock_now_ns();
    int64_t waited = end - st->await_started_ns;
    /* The line is the HAL's (the fence's tracer): only the wait's end,
     * here, knows how long it took. */
    hali_hal_fence_trace_await(
        fence, w ? (int32_t)hali_status_code(w) : code, waited);
    char name[48];
    snprintf(name, sizeof(name), "await fence#%u", fence_id);
    int64_t t1 = hali_trace_now(st->trace);
    hali_trace_slice(st->trace, name, "fence", st->trace_tid, t1 - waited,
                     waited, NULL);
  }
  st->await_started_ns = 0;
  /* A timeout that raced the signal must not leak into the next await. */
  st->await_timed_out = false;
  st->await_oom = false;
  if (w && failure_is_result) {
    code = (int32_t)hali_status_code(w); /* handled by the program */
    hali_status_free(w);
    w = HALI_OK;
  }
  if (w) return hali_status_annotate(w, "awaited fence #%u", fence_id);
  *out_code = code;
  return HALI_OK;
}

hali_status_t hali_vm_fiber_join_op(hali_vm_stack_t *st,
                                    const hali_cell_t *pc, hali_slot_t *regs,
                                    hali_ref_t **refs) {
  const hali_vm_func_t *callee = pc[1].ptr;
  const uint16_t *list = hali_cell_slots(&pc[2]);
  const uint32_t nres = pc->i.c;
  hali_hal_fence_t *fence = (hali_hal_fence_t *)refs[list[0]];
  int32_t code = 0;
  /* Suspends (DEFERRED) until the fiber ends; its failure is ours. */
  HALI_RETURN_IF_ERROR_PLAIN(hali_vm_fiber_await(st, fence, -1, false, &code));
  if (nres == 0) return HALI_OK; /* nothing to hand over: an await */
  fiber_results_t *r = hali_hal_fence_payload(fence, fiber_results_free);
  uint32_t id = ((hali_ref_t *)fence)->id;
  if (!r)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "fiber.join @%s: fence #%u carries no results: it "
                            "is not the fence of a fiber.spawn of @%s (a "
                            "created or joined fence, or a group)",
                            callee->ir->name, id, callee->ir->name);
  if (r->fn != callee->ir || r->count != nres)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "fiber.join @%s: fence #%u is the fence of a "
                            "spawned @%s, not of @%s",
                            callee->ir->name, id, r->fn->name,
                            callee->ir->name);
  for (uint32_t i = 0; i < nres; ++i) {
    const hali_value_t *v = &r->values[i];
    uint16_t slot = list[1 + i];
    switch (v->type) {
    case HALI_TYPE_I32: regs[slot].i32 = v->i32; break;
    case HALI_TYPE_I64: regs[slot].i64 = v->i64; break;
    case HALI_TYPE_F32: regs[slot].f32 = v->f32; break;
    case HALI_TYPE_F64: regs[slot].f64 = v->f64; break;
    default: {
      hali_ref_t *old = refs[slot];
      hali_ref_retain(v->ref);
      refs[slot] = v->ref;
      hali_ref_release(old);
      break;
    }
    }
  }
  return HALI_OK;
}
