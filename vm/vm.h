/* hali — runnable modules, invocation stacks and the interpreter.
 *
 * A hali_vm_module_t is immutable once created (shareable across threads).
 * A hali_vm_stack_t holds the registers and frames of invocations; it is
 * reused between invocations so that a warm call allocates nothing, and is
 * used by one thread at a time.
 */
#ifndef HALI_VM_VM_H
#define HALI_VM_VM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hali/base.h"
#include "vm/code.h"
#include "vm/ir.h"
#include "base/ref.h"

typedef struct hali_vm_func_s {
  const hali_ir_func_t *ir;
  uint32_t index;
  hali_cell_t *code;
  uint32_t code_size;       /* cells */
  uint16_t scalar_count;    /* slots in the scalar bank */
  uint16_t ref_count;       /* slots in the ref bank */
  /* The same two counts laid out as a frame's bases and tops
   * (hali_vm_frame_t), so that a call adds them to its caller's tops in
   * one 64-bit add (vm/interp_loop.h). */
  union {
    struct {
      uint32_t bank_scalars, bank_refs;
    };
    uint64_t bank_sizes;
  };
  bool scalar_params_only;  /* every parameter is a scalar */
  bool scalar_results_only; /* every result is a scalar */
  /* scalar_results_only and no ref slots: a return copies scalars and
   * releases nothing (one test in the interpreter's return). */
  bool plain_return;
  /* attributes ["blocking"]: awaits in this function block the thread
   * even on a fiber (for code that must not be interleaved). */
  bool may_block;
  uint16_t *slot;           /* IR register -> slot in its bank */
  /* Instruction map for errors and tracing: the cell offset where each
   * instruction starts, in code order, and the IR instruction it came from. */
  uint32_t insn_count;
  uint32_t *insn_offset;
  const hali_ir_insn_t **insn_ir;
} hali_vm_func_t;

struct hali_value_s;
typedef struct hali_vm_stack_s hali_vm_stack_t;

/* A host function bound to an import: |results| arrive typed; ref results
 * are returned retained (the VM takes them over). */
typedef hali_status_t (*hali_vm_import_fn_t)(void *user,
                                             const struct hali_value_s *args,
                                             size_t arg_count,
                                             struct hali_value_s *results,
                                             size_t result_count);
typedef struct hali_vm_import_s {
  hali_vm_import_fn_t fn; /* NULL: unbound */
  void *user;
} hali_vm_import_t;

/* A runnable module: the encoded code of one verified IR module.  Immutable
 * once hali_vm_module_create returns, so one module serves any number of
 * contexts and threads at once; it points at nothing that a context loads
 * or binds (those live in a hali_vm_link_t), so nothing it refers to ever
 * refers back to it. */
typedef struct hali_vm_module_s {
  /* Shared: links, bytecode executables and buffers over rodata keep it
   * alive. */
  atomic_uint_fast32_t count;
  hali_ir_module_t *ir; /* owned */
  uint32_t func_count;
  hali_vm_func_t *funcs;
  hali_vm_string_t *strings;
  /* The link of a module run on its own (hali_vm_invoke): no executables
   * loaded, no imports bound.  Points back at this module without a
   * reference (it lives inside it). */
  struct hali_vm_link_s *unlinked;
  /* The largest scalar_count and ref_count of the module's functions
   * (vm/encode.c): the interpreter reserves room for calls in frames of
   * this size and tests one bound per call. */
  uint16_t max_scalar_count, max_ref_count;
} hali_vm_module_t;

/* Encodes a verified module for the interpreter; takes ownership of |ir|
 * (freed on failure too).  The caller holds the one reference. */
HALI_MUST_USE hali_status_t hali_vm_module_create(hali_ir_module_t *ir,
                                                  hali_vm_module_t **out);
/* Any thread. */
void hali_vm_module_retain(hali_vm_module_t *m);
/* Drops a reference; the last one frees the module.  Any thread. */
void hali_vm_module_release(hali_vm_module_t *m);

/* A module's globals in one context (doc/asm.md, "Globals"): one value
 * per module global, set to its initial value when the link is created.
 * Scalar loads and stores are atomic (relaxed); ref globals are read and
 * replaced under |lock|, so that a load's retain never races a store's
 * release.  Nothing else orders accesses from concurrent invocations. */
typedef struct hali_vm_globals_s {
  pthread_mutex_t lock;
  uint32_t count;
  _Atomic uint64_t *bits; /* per global: scalar bits (unused for refs) */
  hali_ref_t **refs;      /* per global: retained ref or NULL */
} hali_vm_globals_t;

/* Storage for the globals of |ir| at their initial values; NULL on OOM. */
hali_vm_globals_t *hali_vm_globals_create(const hali_ir_module_t *ir);
/* Releases every ref held and frees |g|. */
void hali_vm_globals_free(hali_vm_globals_t *g);

/* A module's link table in one context: what the context loaded and bound
 * for it.  Owned by whoever links (the C API's context); the interpreter
 * reaches it through the running frame (hali_vm_frame_t.link), never through
 * the module.  Filled before anything runs, read-only afterwards, so calls
 * on several threads may share it.  Executables it loaded are retained by
 * whatever records them (command buffers), and they keep the module alive on
 * their own, so work may outlive the link. */
typedef struct hali_vm_link_s {
  hali_vm_module_t *module; /* retained (except in a module's |unlinked|) */
  /* One per module executable, NULL until loaded
   * (hali_executable_registry_load_link); owned. */
  struct hali_hal_executable_t **executables;
  /* One per function (used only for imports); NULL in |unlinked|. */
  hali_vm_import_t *imports;
  /* The module's globals in this context (owned; never NULL).  A module
   * run unlinked (hali_vm_invoke) keeps one set in its |unlinked| link,
   * shared by every such call; there global.store.ref fails (a stored ref
   * may hold the module: buffers over its rodata do). */
  hali_vm_globals_t *globals;
} hali_vm_link_t;

/* A link table for |m| (retained) with nothing loaded or bound. */
HALI_MUST_USE hali_status_t hali_vm_link_create(hali_vm_module_t *m,
                                                hali_vm_link_t **out);
/* Releases the loaded executables and the module reference, frees |l|. */
void hali_vm_link_free(hali_vm_link_t *l);
/* Binds import @|name| of |l|'s module to |fn|(|user|, ...).  NOT_FOUND
 * when the module has no such import.  Bind before running; not
 * thread-safe with calls through |l|. */
HALI_MUST_USE hali_status_t hali_vm_link_bind_import(hali_vm_link_t *l,
                                                     const char *name,
                                                     hali_vm_import_fn_t fn,
                                                     void *user);
/* NOT_FOUND naming every required import still unbound. */
HALI_MUST_USE hali_status_t hali_vm_link_check_imports(const hali_vm_link_t *l);
/* Internal: the interpreter's call into a host import (|link| is the
 * calling frame's). */
hali_status_t hali_vm_call_import(const hali_vm_link_t *link,
                                  const hali_cell_t *pc, hali_slot_t *regs,
                                  hali_ref_t **refs);

/* Runs each function of |link|'s module marked ["initializer"], in module
 * order, on |st| (what hali_context_create does through its scheduler,
 * for programs that drive the VM directly).  The first failure is
 * returned, annotated with the initializer's name. */
HALI_MUST_USE hali_status_t hali_vm_link_run_initializers(
    hali_vm_stack_t *st, const hali_vm_link_t *link);

/* The function named |name|, or NULL. */
const hali_vm_func_t *hali_vm_module_lookup(const hali_vm_module_t *m,
                                            const char *name);

/* A value crossing the host boundary. */
typedef struct hali_value_s {
  hali_type_t type;
  union {
    int32_t i32;
    int64_t i64;
    float f32;
    double f64;
    hali_ref_t *ref; /* retained by whoever holds the value */
  };
} hali_value_t;

static inline hali_value_t hali_value_i32(int32_t v) {
  hali_value_t x = {.type = HALI_TYPE_I32};
  x.i32 = v;
  return x;
}
static inline hali_value_t hali_value_i64(int64_t v) {
  hali_value_t x = {.type = HALI_TYPE_I64};
  x.i64 = v;
  return x;
}
static inline hali_value_t hali_value_f32(float v) {
  hali_value_t x = {.type = HALI_TYPE_F32};
  x.f32 = v;
  return x;
}
static inline hali_value_t hali_value_f64(double v) {
  hali_value_t x = {.type = HALI_TYPE_F64};
  x.f64 = v;
  return x;
}
/* Releases a ref value (no-op for scalars). */
void hali_value_release(hali_value_t *v);

typedef struct hali_vm_frame_s {
  const hali_vm_func_t *fn;
  const hali_cell_t *pc;   /* for callers: the call instruction */
  union { /* offsets of the frame's banks in the stack */
    struct {
      uint32_t scalar_base, ref_base;
    };
    uint64_t bases; /* both, as one word (a call copies them at once) */
  };
  /* scalar_base + fn->scalar_count, ref_base + fn->ref_count: where a
   * callee's banks start (the interpreter's call reads them, not |fn|);
   * |tops| is bases + fn->bank_sizes. */
  union {
    struct {
      uint32_t scalar_top, ref_top;
    };
    uint64_t tops;
  };
  /* Tracing: the instruction whose results are still to be printed. */
  const hali_cell_t *trace_pending;
  /* The link table of |fn|'s module in the running context: set by
   * hali_vm_begin, inherited by calls (a call stays inside its module;
   * see hali_vm_stack_t.link_depth). */
  const hali_vm_link_t *link;
} hali_vm_frame_t;

/* An interrupt code that is not a failure: the scheduler asks the running
 * fiber to yield (time slice over, others are ready). */
#define HALI_VM_INTERRUPT_YIELD ((hali_status_code_t)1000)

struct hali_trace_s;
struct hali_hal_fence_t;
struct hali_hal_stop_t;

#define HALI_VM_DEFAULT_MAX_DEPTH 4096

typedef struct hali_vm_stack_s {
  hali_slot_t *scalars;
  uint32_t scalar_capacity;
  hali_ref_t **refs;
  uint32_t ref_capacity;
  hali_vm_frame_t *frames;
  uint32_t frame_capacity;
  uint32_t depth;
  uint32_t max_depth;
  /* frames[0, link_depth) carry frames[0].link: a new frame inherits its
   * caller's link table, and the interpreter's calls skip the store below
   * this depth (reset by hali_vm_begin when the link changes). */
  uint32_t link_depth;
  /* min(frame_capacity, max_depth, link_depth): calls test it, and past
   * it call hali_vm_stack_push_frame. */
  uint32_t frame_limit;
  /* The device HAL instructions use (hal.device.get); borrowed, may be
   * NULL for programs without HAL work. */
  struct hali_hal_device_t *device;

  /* Asynchrony (vm/fiber.c).  With |can_suspend|, an await on a fence that
   * is not ready returns HALI_STATUS_DEFERRED (base/status.h) instead of
   * blocking; the interpreter then saves pc in the top frame, sets
   * |suspended| and returns OK, and resuming re-executes the await. */
  bool can_suspend;
  bool suspended;
  bool yielded; /* suspended by a time-slice interrupt, not an await */
  struct hali_hal_fence_t *awaiting; /* retained while suspended */
  int64_t await_deadline_ns;         /* CLOCK_MONOTONIC; INT64_MAX = none */
  bool await_timed_out;              /* set by the scheduler on expiry */
  bool await_oom; /* set by the scheduler: it could not register the wait */
  int64_t await_started_ns;          /* when the pending await began */
  struct hali_vm_scheduler_s *scheduler; /* for fiber.spawn; may be NULL */

  /* Limits.  |interrupt| is polled at calls and backward branches (another
   * thread may set it: cancellation); |fuel| counts instructions down when
   * |fuel_enabled| (the instrumented dispatch, zero cost otherwise). */
  atomic_bool interrupt;
  _Atomic(hali_status_code_t) interrupt_code; /* set before |interrupt| */
  bool fuel_enabled;
  uint64_t fuel;
  uint64_t fuel_used;
  /* A bytecode kernel's stack: when |fuel| runs out, take more from this
   * pool (the submitting invocation's, hal/stop.h) before failing; NULL:
   * |fuel| is all there is. */
  struct hali_hal_stop_t *fuel_pool;
  /* The fiber running on this stack (vm/fiber.c; NULL without a
   * scheduler): device work it submits carries its invocation's stop
   * request (hali_vm_fiber_stop_for). */
  struct hali_vm_fiber_s *fiber;
  /* Frames the fibers that spawned this one had when they spawned it:
   * max_depth bounds depth_base + depth, so a spawn chain shares one call
   * depth limit with its invocation. */
  uint32_t depth_base;
  /* Tracing (vm/trace.c); NULL = off, at no cost. */
  struct hali_trace_s *trace;
  uint32_t trace_tid; /* track for this stack's await slices */
} hali_vm_stack_t;

HALI_MUST_USE hali_status_t hali_vm_stack_create(uint32_t max_depth,
                                                 hali_vm_stack_t **out);
void hali_vm_stack_free(hali_vm_stack_t *st);

/* Runs |fn| of |link|'s module with |args| (checked against the signature)
 * and stores its results (the caller owns ref results).  |link| must
 * outlive the call.  On failure the status names the function, pc and
 * source line of each frame, innermost first, repeated frames collapsed
 * (see hali_vm_fail_at). */
HALI_MUST_USE hali_status_t hali_vm_link_invoke(hali_vm_stack_t *st,
                                                const hali_vm_link_t *link,
                                                const hali_vm_func_t *fn,
                                                const hali_value_t *args,
                                                size_t arg_count,
                                                hali_value_t *results,
                                                size_t result_count);
/* hali_vm_link_invoke on |m| unlinked (m->unlinked): hal.executable.get
 * and imports fail as "not loaded" / "not provided". */
HALI_MUST_USE hali_status_t hali_vm_invoke(hali_vm_stack_t *st,
                                           hali_vm_module_t *m,
                                           const hali_vm_func_t *fn,
                                           const hali_value_t *args,
                                           size_t arg_count,
                                           hali_value_t *results,
                                           size_t result_count);

/* Internal: the interpreter loop (vm/interp.c).  Runs from the top frame's
 * pc until the bottom frame returns, storing its results in |results|, or
 * until it suspends (st->suspended; call again to resume). */
hali_status_t hali_vm_interpret(hali_vm_stack_t *st, hali_value_t *results);

/* Prepares |st| to run |fn| of |link|'s module with |args| (checked
 * against the signature) without running it; hali_vm_interpret then runs
 * it.  hali_vm_link_invoke is begin + interpret. */
HALI_MUST_USE hali_status_t hali_vm_begin(hali_vm_stack_t *st,
                                          const hali_vm_link_t *link,
                                          const hali_vm_func_t *fn,
                                          const hali_value_t *args,
                                          size_t arg_count,
                                          hali_value_t *results,
                                          size_t result_count);
/* Abandons a suspended or failed invocation: releases its refs. */
void hali_vm_stack_reset(hali_vm_stack_t *st);

/* Internal: grows the stack so that |scalars| and |refs| more slots fit
 * above the given bases; may move the banks. */
HALI_MUST_USE hali_status_t hali_vm_stack_reserve(hali_vm_stack_t *st,
                                                  uint32_t scalar_top,
                                                  uint32_t ref_top);
HALI_MUST_USE hali_status_t hali_vm_stack_push_frame(hali_vm_stack_t *st);

/* Internal: the status for a failure at |pc| in the innermost frame, with
 * a backtrace of all active frames, one annotation per line: repeated frames
 * and repeated cycles of up to four frames are one line with a count, and at
 * most 32 lines are kept (doc/tracing.md, "Backtraces"); unwinds the stack
 * (releasing refs). */
hali_status_t hali_vm_fail_at(hali_vm_stack_t *st, const hali_cell_t *pc,
                              hali_status_t status);

/* "@f@12 (f.hasm:9)": where |pc| of the innermost frame of |st| is, for
 * messages that name an instruction without failing it (validation). */
void hali_vm_describe_pc(const hali_vm_stack_t *st, const hali_cell_t *pc,
                         char *buf, size_t n);

/* The instruction index (pc) and IR instruction at cell |pc| of |fn|. */
uint32_t hali_vm_func_pc(const hali_vm_func_t *fn, const hali_cell_t *pc);
/* The IR instruction whose code starts at or before |pc| (NULL if none). */
const hali_ir_insn_t *hali_vm_func_insn(const hali_vm_func_t *fn,
                                        const hali_cell_t *pc);

#endif /* HALI_VM_VM_H */
