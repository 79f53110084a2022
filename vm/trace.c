/* hali — tracing (see vm/trace.h). */
#include "vm/trace.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "hal/stop.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hal/buffer_view.h"

struct hali_trace_s {
  hali_trace_options_t o;
  char *filter;
  pthread_mutex_t mutex;
  int64_t t0;
  bool any_event; /* chrome: an event was written (comma before the next) */
  /* chrome: threads (tids) already named by a thread_name event, a bit
   * per tid, under |mutex|. */
  uint8_t *named;
  size_t named_bytes;
};

static int64_t mono_ns(void) { return hali_clock_now_ns(); }

hali_status_t hali_trace_create(const hali_trace_options_t *o,
                                hali_trace_t **out) {
  *out = NULL;
#if !HALI_TRACING
  (void)o;
  return hali_status_make(HALI_STATUS_UNIMPLEMENTED,
                          "tracing was compiled out of this build "
                          "(configured with --disable-tracing)");
#endif
  hali_trace_t *t = hali_calloc(1, sizeof(*t));
  if (!t) return hali_status_oom();
  t->o = *o;
  if (!t->o.out) t->o.out = stderr;
  if (!t->o.max_values) t->o.max_values = 8;
  if (o->filter) {
    t->filter = hali_strdup(o->filter);
    if (!t->filter) {
      hali_free(t);
      return hali_status_oom();
    }
  }
  t->o.filter = t->filter;
  /* Chrome traces carry no instruction events: without the VM bit the
   * interpreter keeps its plain loop (vm/interp.c). */
  if (t->o.format == HALI_TRACE_CHROME) t->o.flags &= ~(unsigned)HALI_TRACE_VM;
  pthread_mutex_init(&t->mutex, NULL);
  t->t0 = mono_ns();
  if (t->o.format == HALI_TRACE_CHROME && !t->o.callback)
    fputs("{\"traceEvents\":[\n", t->o.out);
  *out = t;
  return HALI_OK;
}

void hali_trace_free(hali_trace_t *t) {
  if (!t) return;
  if (t->o.format == HALI_TRACE_CHROME && !t->o.callback) {
    fputs("\n],\"displayTimeUnit\":\"ns\"}\n", t->o.out);
    fflush(t->o.out);
  }
  pthread_mutex_destroy(&t->mutex);
  hali_free(t->named);
  hali_free(t->filter);
  hali_free(t);
}

#if HALI_TRACING
unsigned hali_trace_flags(const hali_trace_t *t) { return t ? t->o.flags : 0; }
#endif

int64_t hali_trace_now(const hali_trace_t *t) { return mono_ns() - t->t0; }

static void emit(hali_trace_t *t, const char *text) {
  pthread_mutex_lock(&t->mutex);
  if (t->o.callback) {
    t->o.callback(t->o.user, text);
  } else if (t->o.format == HALI_TRACE_CHROME) {
    fprintf(t->o.out, "%s%s", t->any_event ? ",\n" : "", text);
  } else {
    fprintf(t->o.out, "%s\n", text);
  }
  t->any_event = true;
  pthread_mutex_unlock(&t->mutex);
}

void hali_trace_printf(hali_trace_t *t, const char *fmt, ...) {
  if (t->o.format != HALI_TRACE_TEXT) return;
  hali_strbuf_t sb = {0};
  va_list ap;
  va_start(ap, fmt);
  hali_strbuf_vprintf(&sb, fmt, ap);
  va_end(ap);
  char *line = hali_strbuf_take(&sb);
  if (line) emit(t, line);
  hali_free(line);
}

/* Writes |s| as the body of a JSON string. */
static void json_escape(hali_strbuf_t *sb, const char *s) {
  for (; *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') hali_strbuf_printf(sb, "\\%c", c);
    else if (c < 0x20) hali_strbuf_printf(sb, "\\u%04x", c);
    else hali_strbuf_append(sb, (const char *)&c, 1);
  }
}

/* The name Perfetto shows for thread |tid| (the tids of doc/tracing.md's
 * table): "vm", "queue", "worker N", "queue R", "fiber N awaits". */
static void thread_name(uint32_t tid, char *buf, size_t n) {
  if (tid == 0) snprintf(buf, n, "vm");
  else if (tid == 1) snprintf(buf, n, "queue");
  else if (tid > 500 && tid < 1000) snprintf(buf, n, "queue %u", tid - 500);
  else if (tid < 1000) snprintf(buf, n, "worker %u", tid - 2);
  else snprintf(buf, n, "fiber %u awaits", tid - 1000);
}

/* Limit on the tids named (a bit each): beyond it slices still appear,
 * on unnamed threads. */
#define NAMED_TIDS_MAX (1u << 24)

/* Whether |tid| is named yet; marks it named.  False when it is (or
 * cannot be: out of memory, a huge tid). */
static bool first_use(hali_trace_t *t, uint32_t tid) {
  if (tid >= NAMED_TIDS_MAX) return false;
  pthread_mutex_lock(&t->mutex);
  bool first = false;
  size_t byte = tid / 8;
  if (byte >= t->named_bytes) {
    size_t n = t->named_bytes ? t->named_bytes : 16;
    while (n <= byte) n *= 2;
    uint8_t *grown = hali_realloc(t->named, n);
    if (!grown) goto out;
    memset(grown + t->named_bytes, 0, n - t->named_bytes);
    t->named = grown;
    t->named_bytes = n;
  }
  first = !(t->named[byte] & (1u << (tid % 8)));
  t->named[byte] |= (uint8_t)(1u << (tid % 8));
out:
  pthread_mutex_unlock(&t->mutex);
  return first;
}

void hali_trace_slice(hali_trace_t *t, const char *name, const char *cat,
                      uint32_t tid, int64_t start_ns, int64_t dur_ns,
                      const char *args_json) {
  if (t->o.format != HALI_TRACE_CHROME) return;
  if (first_use(t, tid)) {
    /* A metadata event names the thread before its first slice. */
    char tn[48], meta[160];
    thread_name(tid, tn, sizeof(tn));
    snprintf(meta, sizeof(meta),
             "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%u,"
             "\"args\":{\"name\":\"%s\"}}",
             tid, tn);
    emit(t, meta);
  }
  hali_strbuf_t sb = {0};
  hali_strbuf_append(&sb, "{\"name\":\"", 9);
  json_escape(&sb, name);
  hali_strbuf_append(&sb, "\",\"cat\":\"", 9);
  json_escape(&sb, cat);
  /* Microseconds with ns precision, as the format expects. */
  hali_strbuf_printf(&sb,
                     "\",\"ph\":\"X\",\"pid\":1,\"tid\":%u,\"ts\":%" PRId64
                     ".%03" PRId64 ",\"dur\":%" PRId64 ".%03" PRId64,
                     tid, start_ns / 1000, start_ns % 1000, dur_ns / 1000,
                     dur_ns % 1000);
  if (args_json) hali_strbuf_printf(&sb, ",\"args\":%s", args_json);
  hali_strbuf_append(&sb, "}", 1);
  char *text = hali_strbuf_take(&sb);
  if (text) emit(t, text);
  hali_free(text);
}

static int64_t tracer_now(void *user) { return hali_trace_now(user); }
static void tracer_span(void *user, const char *cat, const char *name,
                        uint32_t tid, int64_t start, int64_t end,
                        const char *args) {
  hali_trace_t *t = user;
  if (t->o.format == HALI_TRACE_CHROME)
    hali_trace_slice(t, name, cat, tid, start, end - start, args);
  else if (t->o.flags & HALI_TRACE_HAL)
    hali_trace_printf(t, "[hal] %s %s on thread %u took %" PRId64 " us%s%s",
                      cat, name, tid, (end - start) / 1000, args ? " " : "",
                      args ? args : "");
}
static void tracer_line(void *user, const char *text) {
  hali_trace_t *t = user;
  if (t->o.flags & HALI_TRACE_HAL) hali_trace_printf(t, "%s", text);
}

hali_hal_tracer_t hali_trace_hal_tracer(hali_trace_t *t) {
  hali_hal_tracer_t r = {t, tracer_now, tracer_span, tracer_line};
  return r;
}

static void format_float(hali_strbuf_t *sb, double v, bool single) {
  char buf[64];
  hali_format_float(buf, sizeof(buf), v, single ? HALI_FLOAT_F32 : HALI_FLOAT_F64,
                    false);
  hali_strbuf_printf(sb, "%s", buf);
}

void hali_trace_format_ref(const hali_trace_t *t, const hali_ref_t *ref,
                           hali_strbuf_t *sb) {
  if (!ref) {
    hali_strbuf_append(sb, "null", 4);
    return;
  }
  hali_strbuf_printf(sb, "%s#%u", hali_type_name(ref->type), ref->id);
  if (ref->type != HALI_TYPE_BUFFER_VIEW) return;
  hali_hal_buffer_view_t *v = (hali_hal_buffer_view_t *)(uintptr_t)ref;
  char type[HALI_HAL_MAX_RANK * 21 + 16];
  hali_strbuf_printf(sb, "<%s>",
                     hali_hal_buffer_view_format_type(v, type, sizeof(type)));
  /* A few leading elements (only when the storage is readable now). */
  hali_hal_element_type_t et = hali_hal_buffer_view_element_type(v);
  uint32_t es = hali_hal_element_type_byte_size(et);
  uint64_t count = hali_hal_buffer_view_element_count(v);
  size_t shown = count < t->o.max_values ? (size_t)count : t->o.max_values;
  if (!shown || !es || es > 8) return;
  uint8_t *bytes;
  hali_status_t s = hali_hal_buffer_scalar_ptr(
      hali_hal_buffer_view_buffer(v), 0, (uint32_t)(shown * es), false, &bytes);
  if (s) { /* not mappable or not committed yet: no values */
    hali_status_free(s);
    return;
  }
  hali_strbuf_append(sb, "=[", 2);
  for (size_t i = 0; i < shown; ++i) {
    if (i) hali_strbuf_append(sb, " ", 1);
    uint64_t bits = 0;
    memcpy(&bits, bytes + i * es, es);
    if (et == HALI_HAL_ELEMENT_TYPE_FLOAT_32) {
      float f;
      uint32_t u = (uint32_t)bits;
      memcpy(&f, &u, 4);
      format_float(sb, f, true);
    } else if (et == HALI_HAL_ELEMENT_TYPE_FLOAT_64) {
      double d;
      memcpy(&d, &bits, 8);
      format_float(sb, d, false);
    } else if (hali_hal_element_type_numerical_type(et) ==
               HALI_HAL_NUMERICAL_TYPE_INTEGER_UNSIGNED) {
      hali_strbuf_printf(sb, "%" PRIu64, bits);
    } else {
      uint32_t shift = 64 - 8 * es;
      hali_strbuf_printf(sb, "%" PRId64, (int64_t)(bits << shift) >> shift);
    }
  }
  if (shown < count) hali_strbuf_append(sb, " ...", 4);
  hali_strbuf_append(sb, "]", 1);
}

#if HALI_TRACING
/* "%name=value" for IR register |r| of the top frame. */
static void format_reg(const hali_trace_t *t, const hali_vm_stack_t *st,
                       const hali_vm_frame_t *fr, uint32_t r,
                       hali_strbuf_t *sb) {
  const hali_ir_func_t *f = fr->fn->ir;
  hali_ir_print_reg(sb, f, r);
  hali_strbuf_append(sb, "=", 1);
  uint16_t slot = fr->fn->slot[r];
  const hali_slot_t *v = &st->scalars[fr->scalar_base + slot];
  switch (f->reg_types[r]) {
  case HALI_TYPE_I32: hali_strbuf_printf(sb, "%d", v->i32); break;
  case HALI_TYPE_I64: hali_strbuf_printf(sb, "%" PRId64, v->i64); break;
  case HALI_TYPE_F32: format_float(sb, v->f32, true); break;
  case HALI_TYPE_F64: format_float(sb, v->f64, false); break;
  default:
    hali_trace_format_ref(t, st->refs[fr->ref_base + slot], sb);
  }
}

/* Appends the registers |insn| reads (or writes) as "%a=1 %b=2". */
static void format_operands(const hali_trace_t *t, const hali_vm_stack_t *st,
                            const hali_vm_frame_t *fr,
                            const hali_ir_insn_t *insn, bool writes,
                            hali_strbuf_t *sb) {
  const hali_op_info_t *info = hali_op_info(insn->op);
  bool any = false;
  for (uint32_t k = 0; k < insn->operand_count; ++k) {
    if (insn->operands[k].kind != HALI_IR_REG) continue;
    bool w = hali_op_is_call(insn->op)
                 ? k > insn->aux
                 : k < info->operand_count &&
                       info->operands[k].role == HALI_ROLE_WRITE;
    if (w != writes) continue;
    hali_strbuf_append(sb, any ? " " : "", any ? 1 : 0);
    format_reg(t, st, fr, insn->operands[k].v, sb);
    any = true;
  }
}

/* Two spaces per call depth, up to INDENT_MAX; deeper frames add their
 * depth instead ("[depth 40] "), so a runaway recursion does not write
 * lines of kilobytes. */
#define INDENT_MAX 64
static void indent(uint32_t depth, char *buf, size_t n) {
  if (2 * (size_t)depth <= INDENT_MAX) {
    memset(buf, ' ', 2 * (size_t)depth);
    buf[2 * (size_t)depth] = 0;
  } else {
    memset(buf, ' ', INDENT_MAX);
    snprintf(buf + INDENT_MAX, n - INDENT_MAX, "[depth %u] ", depth);
  }
}

static bool traced(const hali_trace_t *t, const hali_vm_func_t *fn) {
  return (t->o.flags & HALI_TRACE_VM) && t->o.format == HALI_TRACE_TEXT &&
         (!t->filter || fnmatch(t->filter, fn->ir->name, 0) == 0);
}

#endif /* HALI_TRACING */

hali_status_t hali_vm_instrument(hali_vm_stack_t *st, const hali_cell_t *pc) {
  if (st->fuel_enabled) {
    /* An add fused with a compare-and-branch costs what the add and the
     * fused compare-and-branch cost apart (2), and a mul fused with its
     * add what the two cost apart (2), so that budgets do not depend on
     * what the encoder fused: one unit here, one below (with a single
     * unit left it runs on that one). */
    if ((hali_code_is_add_br(pc->i.op) || hali_code_is_mul_add(pc->i.op)) &&
        st->fuel > 1) {
      st->fuel--;
      st->fuel_used++;
    }
    /* A kernel draws its fuel from its invocation's pool a chunk at a
     * time (several workgroups draw at once). */
    if (st->fuel == 0 && st->fuel_pool)
      st->fuel = hali_hal_stop_take_fuel(st->fuel_pool, 4096);
    if (st->fuel == 0)
      return st->fuel_pool
                 ? hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                                    "instruction budget (fuel) of the "
                                    "invocation exhausted in a kernel "
                                    "(this workgroup ran %" PRIu64 ")",
                                    st->fuel_used)
                 : hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                                    "instruction budget (fuel) of %" PRIu64
                                    " exhausted",
                                    st->fuel_used);
    st->fuel--;
    st->fuel_used++;
  }
#if !HALI_TRACING
  /* Compiled out: the instrumented loop runs only for fuel. */
  return HALI_OK;
#else
  hali_trace_t *t = st->trace;
  if (!t) return HALI_OK;
  hali_vm_frame_t *fr = &st->frames[st->depth - 1];
  if (!traced(t, fr->fn)) return HALI_OK;
  const hali_vm_module_t *m = fr->link->module;
  hali_strbuf_t sb = {0};
  char ind[INDENT_MAX + 32];
  indent(st->depth - 1, ind, sizeof(ind));
  if (!fr->trace_pending) {
    /* The frame's first instruction: name the function and its file once
     * (the lines below give line numbers only). */
    const hali_ir_insn_t *first = hali_vm_func_insn(fr->fn, pc);
    if (first && first->line)
      hali_trace_printf(t, "[vm] %senter @%s (%s)", ind, fr->fn->ir->name,
                        m->ir->source ? m->ir->source : "?");
    else
      hali_trace_printf(t, "[vm] %senter @%s", ind, fr->fn->ir->name);
  } else {
    /* The results of the previous instruction of this frame. */
    const hali_ir_insn_t *prev = hali_vm_func_insn(fr->fn, fr->trace_pending);
    hali_strbuf_t out = {0};
    if (prev) format_operands(t, st, fr, prev, true, &out);
    /* An add fused with a compare-and-branch: the compare's result too;
     * a mul fused with its add: the add's. */
    if (prev && (hali_code_is_add_br(fr->trace_pending->i.op) ||
                 hali_code_is_mul_add(fr->trace_pending->i.op))) {
      if (out.len) hali_strbuf_append(&out, " ", 1);
      format_operands(t, st, fr, &prev[1], true, &out);
    }
    char *o = hali_strbuf_take(&out);
    if (o && o[0]) hali_trace_printf(t, "[vm] %s  -> %s", ind, o);
    hali_free(o);
    fr->trace_pending = NULL;
  }
  const hali_ir_insn_t *insn = hali_vm_func_insn(fr->fn, pc);
  if (!insn) return HALI_OK;
  uint32_t ipc = hali_vm_func_pc(fr->fn, pc);
  hali_strbuf_printf(&sb, "[vm] %s@%s@%u", ind, fr->fn->ir->name, ipc);
  if (insn->line) hali_strbuf_printf(&sb, " (line %u)", insn->line);
  hali_strbuf_append(&sb, " ", 1);
  hali_ir_print_insn(&sb, m->ir, fr->fn->ir, insn);
  hali_strbuf_t in = {0};
  format_operands(t, st, fr, insn, false, &in);
  char *i = hali_strbuf_take(&in);
  if (i && i[0]) hali_strbuf_printf(&sb, "  ; %s", i);
  hali_free(i);
  char *line = hali_strbuf_take(&sb);
  if (line) hali_trace_printf(t, "%s", line);
  hali_free(line);
  /* A compare fused with its cond_br: the branch is the next IR
   * instruction of the block; an add fused with both: the next two (a DIVK
   * op stands for one instruction). */
  const uint32_t more =
      hali_code_is_add_br(pc->i.op) ? 2
      : pc->i.op >= HALI_OP_COUNT &&
              hali_code_same_layout_op(pc->i.op) == pc->i.op
          ? 1
          : 0;
  for (uint32_t k = 1; k <= more; ++k) {
    hali_strbuf_t br = {0};
    hali_strbuf_printf(&br, "[vm] %s@%s@%u", ind, fr->fn->ir->name, ipc + k);
    if (insn[k].line) hali_strbuf_printf(&br, " (line %u)", insn[k].line);
    hali_strbuf_append(&br, " ", 1);
    hali_ir_print_insn(&br, m->ir, fr->fn->ir, &insn[k]);
    char *b = hali_strbuf_take(&br);
    if (b) hali_trace_printf(t, "%s", b);
    hali_free(b);
  }
  fr->trace_pending = pc;
  return HALI_OK;
#endif /* HALI_TRACING */
}
