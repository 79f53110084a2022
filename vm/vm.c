/* hali — invocation stacks, invoke, and failure reports. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/vm.h"
#include "base/alloc.h"


void hali_value_release(hali_value_t *v) {
  if (v && hali_type_is_ref(v->type)) {
    hali_ref_release(v->ref);
    v->ref = NULL;
  }
}

hali_status_t hali_vm_stack_create(uint32_t max_depth, hali_vm_stack_t **out) {
  *out = NULL;
  hali_vm_stack_t *st = hali_calloc(1, sizeof(*st));
  if (!st) return hali_status_oom();
  st->max_depth = max_depth ? max_depth : HALI_VM_DEFAULT_MAX_DEPTH;
  atomic_init(&st->interrupt, false);
  st->await_deadline_ns = INT64_MAX;
  /* Both banks exist from the start: frames address them as base +
   * offset even when a function has no registers of a bank. */
  hali_status_t s = hali_vm_stack_reserve(st, 1, 1);
  if (s) {
    hali_vm_stack_free(st); /* the scalar bank may exist already */
    return s;
  }
  *out = st;
  return HALI_OK;
}

void hali_vm_stack_free(hali_vm_stack_t *st) {
  if (!st) return;
  hali_vm_stack_reset(st);
  hali_free(st->scalars);
  hali_free(st->refs);
  hali_free(st->frames);
  hali_free(st);
}

hali_status_t hali_vm_stack_reserve(hali_vm_stack_t *st, uint32_t scalar_top,
                                    uint32_t ref_top) {
  if (scalar_top > st->scalar_capacity) {
    uint32_t cap = st->scalar_capacity ? st->scalar_capacity : 16;
    while (cap < scalar_top) cap *= 2;
    hali_slot_t *s = hali_realloc(st->scalars, cap * sizeof(hali_slot_t));
    if (!s)
      return hali_status_annotate(
          hali_status_oom(), "growing the register stack to %u slots",
                              cap);
    st->scalars = s;
    st->scalar_capacity = cap;
  }
  if (ref_top > st->ref_capacity) {
    uint32_t cap = st->ref_capacity ? st->ref_capacity : 8;
    while (cap < ref_top) cap *= 2;
    hali_ref_t **r = hali_realloc(st->refs, cap * sizeof(hali_ref_t *));
    if (!r)
      return hali_status_annotate(hali_status_oom(), "growing the ref stack");
    /* Ref slots above the live frames are kept NULL so that a new frame
     * starts with empty refs without clearing them on every call. */
    memset(r + st->ref_capacity, 0,
           (cap - st->ref_capacity) * sizeof(hali_ref_t *));
    st->refs = r;
    st->ref_capacity = cap;
  }
  return HALI_OK;
}

hali_status_t hali_vm_stack_push_frame(hali_vm_stack_t *st) {
  /* A spawned fiber starts |depth_base| frames deep (fiber.c keeps it below
   * max_depth), so a chain of spawns shares one limit. */
  uint32_t max_depth = st->max_depth - st->depth_base;
  if (st->depth >= max_depth) {
    if (st->depth_base)
      return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                              "call depth limit of %u exceeded (%u frames "
                              "here, %u in the fibers that spawned this one)",
                              st->max_depth, st->depth, st->depth_base);
    return hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                            "call depth limit of %u exceeded", st->max_depth);
  }
  if (st->depth == st->frame_capacity) {
    uint32_t cap = st->frame_capacity ? st->frame_capacity * 2 : 4;
    if (cap > max_depth) cap = max_depth;
    hali_vm_frame_t *f = hali_realloc(st->frames, cap * sizeof(*f));
    if (!f)
      return hali_status_annotate(hali_status_oom(), "growing the call stack");
    st->frames = f;
    st->frame_capacity = cap;
  }
  /* The first frame at this depth since the link changed: it inherits its
   * caller's link table (hali_vm_begin sets frame 0's). */
  if (st->depth >= st->link_depth) {
    if (st->depth) st->frames[st->depth].link = st->frames[st->depth - 1].link;
    st->link_depth = st->depth + 1;
  }
  uint32_t limit = st->frame_capacity < max_depth ? st->frame_capacity
                                                  : max_depth;
  st->frame_limit = limit < st->link_depth ? limit : st->link_depth;
  st->depth++;
  return HALI_OK;
}

const hali_ir_insn_t *hali_vm_func_insn(const hali_vm_func_t *fn,
                                        const hali_cell_t *pc) {
  uint32_t off = (uint32_t)(pc - fn->code);
  uint32_t lo = 0, hi = fn->insn_count;
  if (!hi) return NULL;
  while (hi - lo > 1) {
    uint32_t mid = (lo + hi) / 2;
    if (fn->insn_offset[mid] <= off) lo = mid;
    else hi = mid;
  }
  return fn->insn_ir[lo];
}

/* The IR-level pc of the instruction at |pc|: its index counting every
 * instruction of the function in order (as `hali dis` lists them). */
uint32_t hali_vm_func_pc(const hali_vm_func_t *fn, const hali_cell_t *pc) {
  uint32_t off = (uint32_t)(pc - fn->code);
  uint32_t lo = 0, hi = fn->insn_count;
  while (hi - lo > 1) {
    uint32_t mid = (lo + hi) / 2;
    if (fn->insn_offset[mid] <= off) lo = mid;
    else hi = mid;
  }
  const hali_ir_insn_t *target = fn->insn_count ? fn->insn_ir[lo] : NULL;
  uint32_t index = 0;
  for (uint32_t b = 0; b < fn->ir->block_count; ++b) {
    const hali_ir_block_t *blk = &fn->ir->blocks[b];
    if (target >= blk->insns && target < blk->insns + blk->insn_count)
      return index + (uint32_t)(target - blk->insns);
    index += blk->insn_count;
  }
  return 0;
}

static const hali_ir_insn_t *insn_at(const hali_vm_func_t *fn, uint32_t pc) {
  for (uint32_t b = 0; b < fn->ir->block_count; ++b) {
    const hali_ir_block_t *blk = &fn->ir->blocks[b];
    if (pc < blk->insn_count) return &blk->insns[pc];
    pc -= blk->insn_count;
  }
  return NULL;
}

/* "@fib@12 (fib.hasm:7)" */
static void describe(const hali_vm_module_t *m, const hali_vm_func_t *fn,
                     const hali_cell_t *pc, char *buf, size_t n) {
  uint32_t p = hali_vm_func_pc(fn, pc);
  const hali_ir_insn_t *insn = insn_at(fn, p);
  if (insn && insn->line)
    snprintf(buf, n, "@%s@%u (%s:%u)", fn->ir->name, p,
             m->ir->source ? m->ir->source : "?", insn->line);
  else
    snprintf(buf, n, "@%s@%u", fn->ir->name, p);
}

static void unwind(hali_vm_stack_t *st) {
  for (uint32_t d = st->depth; d-- > 0;) {
    hali_vm_frame_t *fr = &st->frames[d];
    hali_ref_t **refs = st->refs + fr->ref_base;
    for (uint32_t i = 0; i < fr->fn->ref_count; ++i) {
      hali_ref_release(refs[i]);
      refs[i] = NULL;
    }
  }
  st->depth = 0;
}

/* Backtraces (doc/tracing.md, "Backtraces").  A backtrace is built while
 * walking the frames, one line per *run*: a frame repeated, or a cycle of up
 * to BT_MAX_PERIOD frames repeated (mutual recursion), is one line with a
 * count.  At most BT_HEAD + BT_TAIL lines are kept, the innermost and the
 * outermost, with one line counting the frames between: a failure at a
 * depth of a million makes a status of a few kilobytes, never a line per
 * frame. */
enum { BT_MAX_PERIOD = 4, BT_HEAD = 16, BT_TAIL = 16 };

/* Frame |i| of the backtrace, counting from the innermost (0). */
typedef struct {
  const hali_vm_module_t *module;
  const hali_vm_func_t *fn;
  const hali_cell_t *pc;
  const hali_ir_insn_t *insn; /* NULL in a function without code */
} bt_frame_t;

static bt_frame_t bt_frame(const hali_vm_stack_t *st, const hali_cell_t *pc,
                           uint32_t i) {
  const hali_vm_frame_t *fr = &st->frames[st->depth - 1 - i];
  const hali_cell_t *at = i == 0 ? pc : fr->pc;
  return (bt_frame_t){fr->link->module, fr->fn, at,
                      hali_vm_func_insn(fr->fn, at)};
}

/* Same function and same instruction, hence the same line of text. */
static bool bt_same(bt_frame_t a, bt_frame_t b) {
  return a.fn == b.fn && (a.insn ? a.insn == b.insn : a.pc == b.pc);
}

/* |count| repetitions of the |period| frames starting at frame |top|. */
typedef struct {
  uint32_t top, period, count;
} bt_run_t;

static uint32_t bt_run_frames(bt_run_t r) { return r.period * r.count; }

/* The run that starts at frame |i| (< depth): of the periods that repeat
 * at least twice there, the one covering most frames (the shortest on a
 * tie), so "a a b a a b a a b" is "[a, a, b] × 3", not "a × 2" first. */
static bt_run_t bt_run_at(const hali_vm_stack_t *st, const hali_cell_t *pc,
                          uint32_t i) {
  const uint32_t n = st->depth;
  bt_run_t best = {i, 1, 1};
  for (uint32_t p = 1; p <= BT_MAX_PERIOD && i + 2 * p <= n; ++p) {
    /* Frames from i + p on that equal the frame |p| above them. */
    uint32_t j = i + p;
    while (j < n && bt_same(bt_frame(st, pc, j), bt_frame(st, pc, j - p))) ++j;
    uint32_t k = (j - i) / p;
    if (k > 1 && p * k > bt_run_frames(best)) best = (bt_run_t){i, p, k};
  }
  return best;
}

/* Appends the line for run |r| to |status|: "at F", "at F × N" or
 * "at [F1, F2] × N". */
static hali_status_t bt_annotate(hali_status_t status,
                                 const hali_vm_stack_t *st,
                                 const hali_cell_t *pc, bt_run_t r) {
  char line[BT_MAX_PERIOD * 520], *p = line;
  const char *end = line + sizeof(line);
  for (uint32_t f = 0; f < r.period; ++f) {
    bt_frame_t fr = bt_frame(st, pc, r.top + f);
    if (f) p += snprintf(p, (size_t)(end - p), ", ");
    describe(fr.module, fr.fn, fr.pc, p, (size_t)(end - p));
    p += strlen(p);
  }
  if (r.period > 1)
    return hali_status_annotate(status, "at [%s] × %u", line, r.count);
  if (r.count > 1)
    return hali_status_annotate(status, "at %s × %u", line, r.count);
  return hali_status_annotate(status, "at %s", line);
}

hali_status_t hali_vm_fail_at(hali_vm_stack_t *st, const hali_cell_t *pc,
                              hali_status_t status) {
  /* Two walks over the frames: count the runs, then write the kept ones. */
  uint32_t runs = 0;
  for (uint32_t i = 0; i < st->depth; i += bt_run_frames(bt_run_at(st, pc, i)))
    ++runs;
  uint32_t index = 0, hidden = 0;
  for (uint32_t i = 0; i < st->depth; ++index) {
    bt_run_t r = bt_run_at(st, pc, i);
    i += bt_run_frames(r);
    if (runs <= BT_HEAD + BT_TAIL || index < BT_HEAD ||
        index >= runs - BT_TAIL) {
      status = bt_annotate(status, st, pc, r);
      continue;
    }
    hidden += bt_run_frames(r);
    if (index + 1 == runs - BT_TAIL)
      status = hali_status_annotate(status, "... %u frames not shown", hidden);
  }
  unwind(st);
  return status;
}

hali_status_t hali_vm_begin(hali_vm_stack_t *st, const hali_vm_link_t *link,
                            const hali_vm_func_t *fn, const hali_value_t *args,
                            size_t arg_count, hali_value_t *results,
                            size_t result_count) {
  const hali_ir_func_t *f = fn->ir;
  if (arg_count != f->param_count)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "@%s takes %u argument(s), %zu given", f->name,
                            f->param_count, arg_count);
  if (result_count != f->result_count)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "@%s returns %u result(s), room for %zu given",
                            f->name, f->result_count, result_count);
  for (size_t i = 0; i < arg_count; ++i) {
    if (args[i].type != f->reg_types[i])
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "@%s argument %zu: expected %s, got %s",
                              f->name, i, hali_type_name(f->reg_types[i]),
                              hali_type_name(args[i].type));
    if (hali_type_is_ref(args[i].type) && !args[i].ref)
      return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "@%s argument %zu: null %s", f->name, i,
                              hali_type_name(args[i].type));
  }
  if (st->depth != 0)
    return hali_status_make(HALI_STATUS_FAILED_PRECONDITION,
                            "the stack is already running an invocation");
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_vm_stack_reserve(st, fn->scalar_count, fn->ref_count));
  /* Frames above the first keep the link of the last invocation: reuse
   * them only for the same link. */
  if (st->link_depth && st->frames[0].link != link) st->link_depth = 0;
  HALI_RETURN_IF_ERROR_PLAIN(hali_vm_stack_push_frame(st));
  hali_vm_frame_t *fr = &st->frames[0];
  fr->fn = fn;
  fr->link = link;
  fr->pc = fn->code;
  fr->scalar_base = 0;
  fr->ref_base = 0;
  fr->scalar_top = fn->scalar_count;
  fr->ref_top = fn->ref_count;
  fr->trace_pending = NULL;
  st->suspended = false;
  st->await_timed_out = false;
  st->await_oom = false;
  for (size_t i = 0; i < arg_count; ++i) {
    uint16_t s = fn->slot[i];
    switch (args[i].type) {
    case HALI_TYPE_I32: st->scalars[s].i32 = args[i].i32; break;
    case HALI_TYPE_I64: st->scalars[s].i64 = args[i].i64; break;
    case HALI_TYPE_F32: st->scalars[s].f32 = args[i].f32; break;
    case HALI_TYPE_F64: st->scalars[s].f64 = args[i].f64; break;
    default:
      hali_ref_retain(args[i].ref);
      st->refs[s] = args[i].ref;
    }
  }
  for (size_t i = 0; i < result_count; ++i) results[i].type = f->results[i];
  return HALI_OK;
}

hali_status_t hali_vm_link_invoke(hali_vm_stack_t *st,
                                  const hali_vm_link_t *link,
                                  const hali_vm_func_t *fn,
                                  const hali_value_t *args, size_t arg_count,
                                  hali_value_t *results, size_t result_count) {
  HALI_RETURN_IF_ERROR_PLAIN(
      hali_vm_begin(st, link, fn, args, arg_count, results, result_count));
  /* Without a scheduler nothing suspends: awaits block the thread. */
  st->can_suspend = false;
  return hali_vm_interpret(st, results);
}

hali_status_t hali_vm_invoke(hali_vm_stack_t *st, hali_vm_module_t *m,
                             const hali_vm_func_t *fn,
                             const hali_value_t *args, size_t arg_count,
                             hali_value_t *results, size_t result_count) {
  return hali_vm_link_invoke(st, m->unlinked, fn, args, arg_count, results,
                             result_count);
}

hali_status_t hali_vm_call_import(const hali_vm_link_t *link,
                                  const hali_cell_t *pc, hali_slot_t *regs,
                                  hali_ref_t **refs) {
  const hali_vm_func_t *callee = pc[1].ptr;
  const hali_ir_func_t *f = callee->ir;
  const hali_vm_import_t *imp =
      link->imports ? &link->imports[callee->index] : NULL;
  if (!imp || !imp->fn)
    return hali_status_make(HALI_STATUS_NOT_FOUND,
                            "import @%s is not provided by the host (it is "
                            "optional, so the module linked without it)",
                            f->name);
  const uint16_t *list = hali_cell_slots(&pc[2]);
  uint32_t nargs = pc->i.b, nres = pc->i.c;
  hali_value_t args[64], results[64];
  if (nargs > 64 || nres > 64)
    return hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                            "import @%s: at most 64 arguments and results",
                            f->name);
  for (uint32_t i = 0; i < nargs; ++i) {
    hali_type_t t = f->reg_types[i];
    args[i].type = t;
    if (hali_type_is_ref(t)) args[i].ref = refs[list[i]];
    else args[i].i64 = regs[list[i]].i64; /* the whole slot */
  }
  for (uint32_t i = 0; i < nres; ++i) {
    memset(&results[i], 0, sizeof(results[i]));
    results[i].type = f->results[i];
  }
  hali_status_t s = imp->fn(imp->user, args, nargs, results, nres);
  if (s) return hali_status_annotate(s, "in host import @%s", f->name);
  for (uint32_t i = 0; i < nres; ++i) {
    uint16_t out = list[nargs + i];
    if (hali_type_is_ref(results[i].type)) {
      if (results[i].ref && results[i].ref->type != f->results[i]) {
        hali_ref_release(results[i].ref);
        return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                                "host import @%s returned a %s for result %u, "
                                "declared %s",
                                f->name, hali_type_name(results[i].ref->type),
                                i, hali_type_name(f->results[i]));
      }
      hali_ref_t *old = refs[out];
      refs[out] = results[i].ref;
      hali_ref_release(old);
    } else {
      switch (f->results[i]) {
      case HALI_TYPE_I32: regs[out].i32 = results[i].i32; break;
      case HALI_TYPE_I64: regs[out].i64 = results[i].i64; break;
      case HALI_TYPE_F32: regs[out].f32 = results[i].f32; break;
      default: regs[out].f64 = results[i].f64; break;
      }
    }
  }
  return HALI_OK;
}

void hali_vm_stack_reset(hali_vm_stack_t *st) {
  unwind(st);
  st->suspended = false;
  if (st->awaiting) {
    hali_ref_release((hali_ref_t *)st->awaiting);
    st->awaiting = NULL;
  }
}

void hali_vm_describe_pc(const hali_vm_stack_t *st, const hali_cell_t *pc,
                         char *buf, size_t n) {
  if (!st->depth) {
    snprintf(buf, n, "?");
    return;
  }
  bt_frame_t fr = bt_frame(st, pc, 0);
  describe(fr.module, fr.fn, fr.pc, buf, n);
}
