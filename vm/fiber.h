/* hali — fibers and the scheduler (DESIGN §6).
 *
 * Every invocation run through a scheduler is a fiber: its own register
 * stack (a hali_vm_stack_t, reused for its whole life).  hal.fence.await on
 * a fence that is not ready suspends the fiber instead of blocking; the
 * thread runs other ready fibers and resumes the waiter when the fence is
 * signalled, fails, or its timeout expires.  fiber.spawn starts a function
 * on a new fiber and returns a fence signalled when it returns (failed
 * with its status if it fails).
 *
 * Threads: a scheduler is run by one thread at a time; with
 * options.threads > 1 (the default: one per core) its workers run ready
 * fibers too while that thread is inside a run.  Each fiber thread has its
 * own ready queue; one that runs dry steals from the others, so a fiber
 * resumes on any thread (doc/fibers.md, "Threading model").  Fences may be
 * signalled from any thread (queue threads, workers, the host) and wake
 * fibers safely.  Cancellation may come from any thread.
 *
 * Blocking: plain hali_vm_invoke (no scheduler) blocks the thread in
 * awaits; so does the scheduler itself when every fiber is suspended and
 * work it can wait for is in flight.  When nothing can make progress (every
 * fiber suspended, the device queue empty or waiting too, no deadline
 * pending) the run fails with DEADLOCK-style FAILED_PRECONDITION naming
 * each fiber and what it awaits — unless the host said it may signal
 * fences itself (hali_vm_scheduler_allow_external_signals).
 */
#ifndef HALI_VM_FIBER_H
#define HALI_VM_FIBER_H

#include "hal/device.h"
#include "vm/vm.h"

typedef struct hali_vm_scheduler_s hali_vm_scheduler_t;
typedef struct hali_vm_fiber_s hali_vm_fiber_t;

/* The default for max_fibers: at most this many fibers are live in one
 * scheduler (one context); a fiber.spawn beyond it fails with
 * RESOURCE_EXHAUSTED, so a program that spawns without end is stopped
 * before it exhausts memory. */
#define HALI_VM_MAX_FIBERS 65536u
/* The default for max_invocation_fibers: at most this many fibers of one
 * invocation (the host-started fiber and all it spawns) are live at once,
 * so one runaway invocation cannot take a context's whole quota. */
#define HALI_VM_MAX_INVOCATION_FIBERS 16384u

typedef struct hali_vm_scheduler_options_s {
  uint32_t max_depth;          /* per invocation: a spawned fiber starts as
                                * deep as its spawner; 0 = default */
  bool fuel_enabled;           /* instruction budget of each started fiber;
                                * a spawned fiber takes half of what its
                                * spawner has left, so a fiber and all it
                                * spawns share one budget */
  uint64_t fuel;
  struct hali_trace_s *trace;  /* borrowed; may be NULL */
  uint32_t max_fibers;         /* live at once; 0 = HALI_VM_MAX_FIBERS */
  uint32_t max_invocation_fibers; /* live at once in one invocation;
                                   * 0 = HALI_VM_MAX_INVOCATION_FIBERS */
  /* Wall-clock limit of each host-started fiber (an invocation) and all
   * it spawns, from its start; 0 = none.  Past it, each of its fibers
   * fails with DEADLINE_EXCEEDED (a running one at its next call or
   * branch, a suspended one at once) and its device work is abandoned
   * (hal/stop.h).  Enforced by the watchdog thread, within ~5 ms. */
  uint64_t max_duration_ns;
  /* Threads that run fibers while a thread is inside
   * hali_vm_scheduler_run*: that thread plus |threads| - 1 workers of the
   * scheduler, started when work finds no thread idle and kept until it
   * is freed, each
   * with its own ready queue (idle ones steal).  0 = one per core
   * (hali_vm_default_fiber_threads); 1 = the running thread alone (every
   * fiber on it, one at a time). */
  uint32_t threads;
  /* How long a fiber waits on the queue of a thread that is running
   * another before an idle thread may take it (the steal grace,
   * doc/fibers.md "Run queues"); 0 = HALI_VM_STEAL_GRACE_NS, and at
   * most INT64_MAX / 4. */
  uint64_t steal_grace_ns;
} hali_vm_scheduler_options_t;

/* The default steal grace: 50 us. */
#define HALI_VM_STEAL_GRACE_NS 50000u

/* At most this many fiber threads per scheduler. */
#define HALI_VM_MAX_FIBER_THREADS 64u

/* |device| (retained) is what hal.device.get returns; may be NULL. */
HALI_MUST_USE hali_status_t hali_vm_scheduler_create(
    hali_hal_device_t *device, const hali_vm_scheduler_options_t *options,
    hali_vm_scheduler_t **out);
/* Cancels what is left, waits for in-flight wake-ups, frees every fiber. */
void hali_vm_scheduler_free(hali_vm_scheduler_t *s);
/* The host may signal fences the fibers await: never report a deadlock,
 * wait instead. */
void hali_vm_scheduler_allow_external_signals(hali_vm_scheduler_t *s,
                                              bool allow);

/* Starts |fn| of |link|'s module with |args| on a new fiber (ready, not
 * yet run).  The fiber retains the module and borrows |link|, which must
 * outlive it (free the scheduler first).  The fiber belongs to the
 * scheduler; |*out| stays valid until hali_vm_fiber_release or the
 * scheduler is freed. */
HALI_MUST_USE hali_status_t hali_vm_scheduler_start_link(
    hali_vm_scheduler_t *s, const hali_vm_link_t *link,
    const hali_vm_func_t *fn, const hali_value_t *args, size_t arg_count,
    hali_vm_fiber_t **out);
/* hali_vm_scheduler_start_link on |m| unlinked (no executables, no
 * imports). */
HALI_MUST_USE hali_status_t hali_vm_scheduler_start(
    hali_vm_scheduler_t *s, hali_vm_module_t *m, const hali_vm_func_t *fn,
    const hali_value_t *args, size_t arg_count, hali_vm_fiber_t **out);

/* Runs ready fibers until |until| has finished (or, with NULL, until no
 * fiber is ready and nothing is in flight).  Returns OK, or the deadlock
 * report; fiber failures are the fibers' own (hali_vm_fiber_status). */
HALI_MUST_USE hali_status_t hali_vm_scheduler_run(hali_vm_scheduler_t *s,
                                                  hali_vm_fiber_t *until);
/* hali_vm_scheduler_run(s, until) that gives up once CLOCK_MONOTONIC
 * passes |deadline_ns| (INT64_MAX: never) with |until| unfinished, and
 * returns DEADLINE_EXCEEDED; |until| stays live and may be run again.  The
 * watchdog interrupts the running fiber past the deadline (it stops at its
 * next call or branch); a fiber blocked in the host is not interrupted. */
HALI_MUST_USE hali_status_t hali_vm_scheduler_run_until(
    hali_vm_scheduler_t *s, hali_vm_fiber_t *until, int64_t deadline_ns);

/* How often a fiber was preempted (ran past its 10 ms slice while others
 * were ready): fibers that never await still take turns. */
uint64_t hali_vm_scheduler_preemptions(hali_vm_scheduler_t *s);
/* How often the watchdog thread woke up: scheduler events (spawns,
 * wake-ups, finishes) do not wake it; it ticks every 5 ms while a fiber
 * runs or a deadline is pending, and sleeps otherwise. */
uint64_t hali_vm_scheduler_watchdog_wakeups(hali_vm_scheduler_t *s);
/* How many times a worker thread (options.threads > 1) resumed a fiber. */
uint64_t hali_vm_scheduler_worker_runs(hali_vm_scheduler_t *s);
/* How many fibers a fiber thread took from another thread's queue. */
uint64_t hali_vm_scheduler_steals(hali_vm_scheduler_t *s);
/* Back-pressure on spawning: a fiber whose spawn leaves
 * HALI_VM_SPAWN_BACKLOG fibers ready on its thread's queue yields at its
 * next call or branch (to the back of the queue), so the fibers it
 * spawned run, and are recycled, while its loop adds more; this counts
 * those yields. */
#define HALI_VM_SPAWN_BACKLOG 64
uint64_t hali_vm_scheduler_spawn_yields(hali_vm_scheduler_t *s);
/* The fiber threads of |s| (options.threads, or the default). */
uint32_t hali_vm_scheduler_threads(hali_vm_scheduler_t *s);
/* The default number of fiber threads: one per online core (at most
 * HALI_VM_MAX_FIBER_THREADS). */
uint32_t hali_vm_default_fiber_threads(void);

/* Fibers alive (not finished), and of those suspended. */
size_t hali_vm_scheduler_live(hali_vm_scheduler_t *s);
size_t hali_vm_scheduler_suspended(hali_vm_scheduler_t *s);
/* hali_vm_scheduler_live without the mutex: a relaxed snapshot, exact
 * when no other thread starts or finishes a fiber meanwhile.  0 tells the
 * C API's synchronous invoke that it has no other fiber to run and may
 * run its function directly on the caller's thread (api/context.c). */
size_t hali_vm_scheduler_live_hint(const hali_vm_scheduler_t *s);

bool hali_vm_fiber_done(const hali_vm_fiber_t *f);
/* The fence signalled when the fiber returns (failed if it fails);
 * borrowed.  Made when first asked for (already signalled or failed if the
 * fiber is done); NULL only when out of memory. */
struct hali_hal_fence_t *hali_vm_fiber_fence(hali_vm_fiber_t *f);
/* How many fiber records were allocated and how many came from the pool
 * of finished ones (a warm invocation allocates nothing). */
void hali_vm_scheduler_stats(hali_vm_scheduler_t *s,
                             uint64_t *out_created, uint64_t *out_reused);
/* Its final status (borrowed; NULL = OK) once done. */
hali_status_t hali_vm_fiber_status(const hali_vm_fiber_t *f);
/* Its results once done (ref results stay owned by the fiber). */
const hali_value_t *hali_vm_fiber_results(const hali_vm_fiber_t *f,
                                          size_t *out_count);
/* Requests cancellation: a running fiber stops at its next call or
 * branch, a suspended or ready one at once; either fails its fence with
 * CANCELLED.  Safe from any thread. */
void hali_vm_fiber_cancel(hali_vm_fiber_t *f);
/* Internal: the fence pool of the scheduler running |st| (borrowed; NULL
 * without a scheduler): hal.fence.offset takes its fences from it. */
hali_hal_fence_pool_t *hali_vm_fiber_fence_pool(const hali_vm_stack_t *st);

/* Internal: the stop request of the invocation running on |st| (made
 * when first asked for; borrowed, lives while the invocation does), for
 * the device work it submits; NULL when |st| runs without a scheduler.
 * RESOURCE_EXHAUSTED when it cannot be made. */
HALI_MUST_USE hali_status_t hali_vm_fiber_stop_for(
    hali_vm_stack_t *st, struct hali_hal_stop_t **out_stop);

/* The host is done with |f| (it is freed once finished). */
void hali_vm_fiber_release(hali_vm_fiber_t *f);

/* Bytes the scheduler holds for |f| while it is suspended (fiber record,
 * stack bookkeeping and frames), excluding its register banks. */
size_t hali_vm_fiber_overhead_bytes(const hali_vm_fiber_t *f);

/* Internal: fiber.join from the interpreter (pc at the instruction):
 * awaits the fence (suspending: HALI_STATUS_DEFERRED, re-run on resume),
 * fails with the fiber's status, else writes the results the spawned
 * fiber attached to its fence. */
hali_status_t hali_vm_fiber_join_op(hali_vm_stack_t *st,
                                    const hali_cell_t *pc, hali_slot_t *regs,
                                    hali_ref_t **refs);

/* Internal: fiber.spawn from the interpreter (pc at the instruction). */
hali_status_t hali_vm_fiber_spawn_op(hali_vm_stack_t *st,
                                     const hali_cell_t *pc,
                                     const hali_slot_t *regs,
                                     hali_ref_t **refs);

/* Internal: the await of hal.fence.await (|failure_is_result| false) and
 * hal.fence.await_status (true) on |fence| (borrowed) with a timeout of
 * |timeout_ms| (-1 forever, 0 poll), for the instruction running on |st|.
 * Returns:
 *   - HALI_OK with |*out_code| 0 (signalled), 4 (DEADLINE_EXCEEDED: the
 *     timeout expired) or, with |failure_is_result|, the fence's failure
 *     code;
 *   - the fence's failure status, annotated "awaited fence #N" (without
 *     |failure_is_result|);
 *   - HALI_STATUS_DEFERRED (base/status.h) when the fiber suspends instead
 *     of blocking (st->can_suspend): st->awaiting holds the fence
 *     (retained) and st->await_deadline_ns its deadline; the scheduler
 *     resumes the fiber and the instruction runs this again.
 * Writes the [hal] fence.await trace line and the await slice when it
 * completes.  The state machine is described in vm/fiber.c. */
HALI_MUST_USE hali_status_t hali_vm_fiber_await(hali_vm_stack_t *st,
                                                struct hali_hal_fence_t *fence,
                                                int64_t timeout_ms,
                                                bool failure_is_result,
                                                int32_t *out_code);

#endif /* HALI_VM_FIBER_H */
