/* hali — tracing: every instruction, every HAL operation, a timeline.
 *
 * A trace is switched on at run time (never by recompiling): a stack with
 * st->trace (or fuel) set runs the interpreter's instrumented dispatch
 * table, which calls hali_vm_instrument before each instruction; with
 * both off the plain table runs and tracing costs nothing.  Output goes to
 * a FILE or a callback, as text lines or Chrome trace-event JSON
 * (viewable in Perfetto).  A trace may be shared by threads (workers, the
 * queue thread): writes are serialized.
 *
 * Compiled out: `configure --disable-tracing` sets HALI_TRACING to 0.
 * hali_trace_create then fails (UNIMPLEMENTED), hali_trace_flags is the
 * constant 0 and HALI_TRACE_ON() is false, so every hook that tests them
 * (the interpreter's choice of the instrumented loop, HAL_TRACE lines, await
 * timing, fiber slices) folds away at compile time.  The instrumented copy
 * of the loop stays, for fuel only: fuel is a limit, not tracing.
 */
#ifndef HALI_VM_TRACE_H
#define HALI_VM_TRACE_H

#include <stdio.h>

#include "config.h" /* HALI_TRACING */
#include "hal/common.h"
#include "vm/vm.h"

enum {
  HALI_TRACE_VM = 1u << 0,  /* each executed instruction */
  HALI_TRACE_HAL = 1u << 1, /* each HAL operation */
  HALI_TRACE_ALL = HALI_TRACE_VM | HALI_TRACE_HAL,
};

typedef enum hali_trace_format_e {
  HALI_TRACE_TEXT = 0,
  HALI_TRACE_CHROME = 1,
} hali_trace_format_t;

/* Receives each text line (without newline) or JSON event. */
typedef void (*hali_trace_callback_t)(void *user, const char *text);

typedef struct hali_trace_options_s {
  unsigned flags;               /* HALI_TRACE_* */
  hali_trace_format_t format;
  FILE *out;                    /* borrowed; default stderr */
  hali_trace_callback_t callback; /* instead of |out| when set */
  void *user;
  const char *filter;           /* glob on function names (VM lines); NULL = all */
  size_t max_values;            /* buffer view elements printed (default 8) */
} hali_trace_options_t;

typedef struct hali_trace_s hali_trace_t;

/* Creates a trace writing to |o|'s FILE or callback.  Fails with
 * UNIMPLEMENTED when tracing was compiled out (HALI_TRACING 0).  A Chrome
 * trace has no per-instruction events: HALI_TRACE_VM is dropped from its
 * flags, so it never selects the instrumented interpreter loop. */
HALI_MUST_USE hali_status_t hali_trace_create(const hali_trace_options_t *o,
                                              hali_trace_t **out);
/* Finishes the output (closes the JSON array) and frees |t| (may be NULL). */
void hali_trace_free(hali_trace_t *t);

#if HALI_TRACING
/* HALI_TRACE_* bits of |t| (0 for NULL). */
unsigned hali_trace_flags(const hali_trace_t *t);
/* Whether |t| is a live trace: the test every hook makes first. */
#define HALI_TRACE_ON(t) ((t) != NULL)
#else
/* Compiled out: no trace can exist, and these constants let the compiler
 * drop every hook guarded by them. */
static inline unsigned hali_trace_flags(const hali_trace_t *t) {
  (void)t;
  return 0;
}
#define HALI_TRACE_ON(t) ((void)(t), 0)
#endif

/* A text line (text format) — HAL and scheduler events use it. */
void hali_trace_printf(hali_trace_t *t, const char *fmt, ...) HALI_PRINTF(2, 3);
/* A Chrome complete event ("ph":"X") on thread |tid|: name, category,
 * start and duration in ns since the trace began, optional args JSON
 * object text (may be NULL). */
void hali_trace_slice(hali_trace_t *t, const char *name, const char *cat,
                      uint32_t tid, int64_t start_ns, int64_t dur_ns,
                      const char *args_json);
/* Nanoseconds since the trace began (CLOCK_MONOTONIC). */
int64_t hali_trace_now(const hali_trace_t *t);
/* Formats a value for a trace: "42", "1.5", "!hal.buffer#3",
 * "!hal.buffer_view#4<4xf32>=[1 2 3 4]" (at most max_values elements). */
void hali_trace_format_ref(const hali_trace_t *t, const hali_ref_t *ref,
                           hali_strbuf_t *sb);

/* A HAL tracer (hal/common.h) that writes into |t|: spans as Chrome
 * events, lines as text.  |t| must outlive the device's use of it. */
hali_hal_tracer_t hali_trace_hal_tracer(hali_trace_t *t);

/* Called before each instruction when the stack is instrumented (fuel or
 * tracing on): charges fuel, prints the previous instruction's results
 * and this instruction with its inputs.  Fails when fuel runs out. */
hali_status_t hali_vm_instrument(hali_vm_stack_t *st, const hali_cell_t *pc);

#endif /* HALI_VM_TRACE_H */
