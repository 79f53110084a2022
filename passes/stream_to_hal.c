/* hali — stream-to-hal: the tensor level becomes HAL ops (doc/passes.md).
 *
 * Within a function, consecutive tensor ops (or an explicit `execute {}`)
 * form an execution region, recorded into one one-shot command buffer
 * whose categories follow its contents; serial regions get an execution
 * barrier between ops, `concurrent {}` groups none inside.  Regions are
 * submitted with queue.execute, each waiting on the previous one's fence
 * (the first on the tensor.wait fence) — chained, never awaited on the
 * host; tensor.barrier makes the last region signal the given fence.
 * Every tensor gets storage by lifetime: imported (the caller's buffer,
 * asserted), constant, returned (exported), aliased (a tied dispatch
 * result or a value overwritten into a mutable argument) or transient;
 * the static-size transients local to a region share one slab, packed by
 * liveness interval (schedule-execution, see pack()).
 * A tensor register becomes the !hal.buffer register holding its storage.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hal_bits.h"
#include "passes/pass_util.h"
#include "passes/pipeline.h"

#define PASS "stream-to-hal"


typedef enum {
  LT_NONE = 0,
  LT_TRANSIENT,
  LT_IMPORTED,
  LT_CONSTANT,
  LT_RETURNED,
  LT_ALIAS, /* storage of |alias| */
} lifetime_t;

typedef struct {
  uint8_t lifetime;
  uint32_t alias;
  uint32_t writes;
  uint32_t size;                   /* i64 register, bytes */
  uint32_t dims[HALI_HAL_MAX_RANK]; /* i64 registers */
  int64_t static_bytes;            /* -1: dynamic size */
  uint32_t def, last;              /* liveness interval (positions) */
  bool defined;
  bool const_returned; /* a constant's storage is returned to the caller */
} tinfo_t;

/* Transients are packed into one slab per region by liveness (see pack). */
/* The HAL's most workgroups per dimension (HALI_HAL_MAX_WORKGROUP_COUNT). */
#define MAX_WORKGROUP_COUNT INT32_MAX
enum { SLAB_ALIGN = 64 };

typedef struct {
  hali_ir_module_t *m;
  hali_ir_func_t *f;
  uint32_t nregs; /* registers before lowering (tinfo size) */
  tinfo_t *t;
  uint32_t device, allocator, *exes;
  uint32_t cur; /* fence the next submission waits on; UINT32_MAX = none */
  hali_insn_list_t pre, cmds, out;
  bool open, concurrent, pending_barrier, any_cmd;
  uint32_t cmd, cats, line;
  uint32_t index;       /* instruction being lowered (block position) */
  hali_status_t err;    /* sticky: the first error found while emitting */
  uint32_t *pending;    /* static-size transients awaiting the region's slab */
  uint32_t npending;
  /* Constants already materialized (registers are never rewritten). */
  uint32_t nconst;
  struct {
    hali_type_t type;
    int64_t v;
    uint32_t reg;
  } consts[256];
} lw_t;

static uint32_t cached(lw_t *w, hali_type_t t, int64_t v) {
  for (uint32_t i = 0; i < w->nconst; ++i)
    if (w->consts[i].type == t && w->consts[i].v == v) return w->consts[i].reg;
  return UINT32_MAX;
}
static void remember(lw_t *w, hali_type_t t, int64_t v, uint32_t r) {
  if (w->nconst == 256) return;
  w->consts[w->nconst].type = t;
  w->consts[w->nconst].v = v;
  w->consts[w->nconst++].reg = r;
}

static uint32_t root(const lw_t *w, uint32_t r) {
  for (int guard = 0; w->t[r].lifetime == LT_ALIAS && guard < 64; ++guard)
    r = w->t[r].alias;
  return r;
}

static uint32_t c32(lw_t *w, int64_t v) {
  uint32_t r = cached(w, HALI_TYPE_I32, v);
  if (r != UINT32_MAX) return r;
  r = hali_pass_reg(w->f, HALI_TYPE_I32, "c%lld", (long long)v);
  hali_pass_emit(&w->pre, w->line, HALI_OP_CONST_I32, 2, hali_pr(r), hali_pk(v));
  remember(w, HALI_TYPE_I32, v, r);
  return r;
}
static uint32_t c64(lw_t *w, int64_t v) {
  uint32_t r = cached(w, HALI_TYPE_I64, v);
  if (r != UINT32_MAX) return r;
  r = hali_pass_reg(w->f, HALI_TYPE_I64, "c%lld_i64", (long long)v);
  hali_pass_emit(&w->pre, w->line, HALI_OP_CONST_I64, 2, hali_pr(r), hali_pk(v));
  remember(w, HALI_TYPE_I64, v, r);
  return r;
}

static const char *rname(const lw_t *w, uint32_t r) {
  return w->f->reg_names && w->f->reg_names[r] ? w->f->reg_names[r] : "t";
}

/* Emits `cond_fail %cond, OUT_OF_RANGE, "@f: message"`. */
static void fail_if(lw_t *w, uint32_t cond, const char *fmt, ...) HALI_PRINTF(3, 4);
static void fail_if(lw_t *w, uint32_t cond, const char *fmt, ...) {
  char msg[400];
  int n = snprintf(msg, sizeof(msg), "@%s: ", w->f->name);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && (size_t)n < sizeof(msg)) vsnprintf(msg + n, sizeof(msg) - n, fmt, ap);
  va_end(ap);
  uint32_t code = c32(w, HALI_STATUS_OUT_OF_RANGE);
  hali_pass_emit(&w->pre, w->line, HALI_OP_COND_FAIL, 3, hali_pr(cond), hali_pr(code),
                 hali_pref(HALI_IR_STRING, hali_ir_module_intern(w->m, msg, strlen(msg))));
}

/* Records tensor |r|'s dims (|dyn| the dynamic ones in order) and size.
 * The size is checked: static parts at load (an error in w->err), dynamic
 * dims at run time when |check_dims| (negative, or a byte size past
 * 2^63-1, fail with OUT_OF_RANGE naming the tensor and the dimension; an
 * import's dims need none: the buffer view's creation checked them). */
static void set_shape(lw_t *w, uint32_t r, const hali_ir_operand_t *dyn,
                      bool check_dims) {
  /* A copy: adding registers below may move reg_xtypes. */
  hali_ir_xtype_t xs = w->f->reg_xtypes[r];
  int64_t dims[HALI_HAL_MAX_RANK];
  if (xs.rank > HALI_HAL_MAX_RANK) xs.rank = HALI_HAL_MAX_RANK;
  if (xs.rank) memcpy(dims, xs.dims, xs.rank * sizeof(int64_t));
  xs.dims = dims;
  const hali_ir_xtype_t *x = &xs;
  tinfo_t *t = &w->t[r];
  uint32_t k = 0;
  bool all_static = true;
  char *ts = NULL;
  for (uint32_t d = 0; d < x->rank; ++d) {
    if (x->dims[d] >= 0) {
      t->dims[d] = c64(w, x->dims[d]);
    } else {
      t->dims[d] = dyn[k++].v;
      all_static = false;
    }
  }
  /* The structural check rejects types past 2^64 bytes; sizes are i64. */
  uint64_t sb64 = 0;
  uint32_t at = 0;
  if (!hali_ir_xtype_static_bytes(x, &sb64, &at) || sb64 > INT64_MAX) {
    hali_strbuf_t sb = {0};
    hali_ir_xtype_print(&sb, x);
    ts = hali_strbuf_take(&sb);
    w->err = hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                              PASS ": @%s: %%%s (%s) is larger than 2^63-1 bytes",
                              w->f->name, rname(w, r), ts ? ts : "?");
    free(ts);
    return;
  }
  int64_t static_bytes = (int64_t)sb64;
  t->static_bytes = all_static ? static_bytes : -1;
  t->size = hali_pass_reg(w->f, HALI_TYPE_I64, "%s.size", rname(w, r));
  if (all_static) {
    hali_pass_emit(&w->pre, w->line, HALI_OP_CONST_I64, 2, hali_pr(t->size),
                   hali_pk(static_bytes));
    return;
  }
  hali_strbuf_t sb = {0};
  hali_ir_xtype_print(&sb, x);
  ts = hali_strbuf_take(&sb);
  /* static_bytes is the element size times the static dims; each dynamic
   * dim D must be >= 0 and keep acc * D <= INT64_MAX, i.e. acc <=
   * INT64_MAX / max(D, 1). */
  uint32_t acc = c64(w, static_bytes);
  uint32_t zero = c64(w, 0), one = c64(w, 1), max = c64(w, INT64_MAX);
  const char *n = rname(w, r);
  for (uint32_t d = 0; d < x->rank; ++d) {
    if (x->dims[d] >= 0) continue;
    uint32_t dim = t->dims[d];
    if (!check_dims) {
      hali_pass_emit(&w->pre, w->line, HALI_OP_MUL_I64, 3, hali_pr(t->size),
                     hali_pr(acc), hali_pr(dim));
      acc = t->size;
      continue;
    }
    uint32_t neg = hali_pass_reg(w->f, HALI_TYPE_I32, "%s.dim%u_negative", n, d);
    hali_pass_emit(&w->pre, w->line, HALI_OP_LT_S_I64, 3, hali_pr(neg), hali_pr(dim),
                   hali_pr(zero));
    fail_if(w, neg, "%%%s (%s): dimension %u is negative", n, ts ? ts : "?", d);
    uint32_t div = hali_pass_reg(w->f, HALI_TYPE_I64, "%s.dim%u_limit", n, d);
    uint32_t big = hali_pass_reg(w->f, HALI_TYPE_I32, "%s.dim%u_overflows", n, d);
    hali_pass_emit(&w->pre, w->line, HALI_OP_MAX_U_I64, 3, hali_pr(div), hali_pr(dim),
                   hali_pr(one));
    hali_pass_emit(&w->pre, w->line, HALI_OP_DIV_U_I64, 3, hali_pr(div), hali_pr(max),
                   hali_pr(div));
    hali_pass_emit(&w->pre, w->line, HALI_OP_GT_U_I64, 3, hali_pr(big), hali_pr(acc),
                   hali_pr(div));
    fail_if(w, big, "%%%s (%s) is larger than 2^63-1 bytes (at dimension %u)", n,
            ts ? ts : "?", d);
    hali_pass_emit(&w->pre, w->line, HALI_OP_MUL_I64, 3, hali_pr(t->size),
                   hali_pr(acc), hali_pr(dim));
    acc = t->size;
  }
  free(ts);
}

/* set_shape, then return its error, if any, from the calling lowering. */
#define SET_SHAPE(w, r, dyn, check)                                            \
  do {                                                                         \
    set_shape(w, r, dyn, check);                                               \
    if ((w)->err) {                                                            \
      hali_status_t e_ = (w)->err;                                             \
      (w)->err = HALI_OK;                                                      \
      return e_;                                                               \
    }                                                                          \
  } while (0)

static void own_buffer(lw_t *w, uint32_t r, uint32_t mem, uint32_t use);

/* Gives tensor |r| storage according to its lifetime. */
static void allocate(lw_t *w, uint32_t r) {
  tinfo_t *t = &w->t[r];
  t->defined = true;
  uint32_t mem, use;
  switch (t->lifetime) {
  case LT_ALIAS:
    return;
  case LT_CONSTANT:
    /* A constant's storage is a fresh buffer per invocation, filled by
     * command_buffer.update from rodata.  No kernel writes it (a tie to a
     * constant writes a copy: copy_on_write.c), so it is DEVICE_LOCAL with
     * CONSTANT usage, unless it is returned to the caller, who maps it:
     * then it gets the returned bits. */
    if (t->const_returned) {
      mem = HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE | HALI_HAL_MEMORY_TYPE_HOST_VISIBLE;
      use = HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_DISPATCH | HALI_HAL_BUFFER_USAGE_MAPPING;
    } else {
      mem = HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL;
      use = HALI_HAL_BUFFER_USAGE_CONSTANT | HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_DISPATCH;
    }
    break;
  case LT_RETURNED:
    mem = HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE | HALI_HAL_MEMORY_TYPE_HOST_VISIBLE;
    use = HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_DISPATCH | HALI_HAL_BUFFER_USAGE_MAPPING;
    break;
  default:
    /* Static-size transients wait for the region's slab (pack). */
    if (t->static_bytes >= 0) {
      w->pending[w->npending++] = r;
      return;
    }
    mem = HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL | HALI_HAL_MEMORY_TYPE_TRANSIENT;
    use = HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_DISPATCH;
    break;
  }
  own_buffer(w, r, mem, use);
}

static void own_buffer(lw_t *w, uint32_t r, uint32_t mem, uint32_t use) {
  tinfo_t *t = &w->t[r];
  uint32_t cm = c32(w, mem), cu = c32(w, use);
  hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_ALLOCATOR_ALLOCATE, 5, hali_pr(r),
                 hali_pr(w->allocator), hali_pr(cm), hali_pr(cu),
                 hali_pr(t->size));
}

static uint32_t fence_now(lw_t *w) {
  if (w->cur == UINT32_MAX) {
    w->cur = hali_pass_reg(w->f, HALI_TYPE_FENCE, "ready");
    hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_FENCE_NULL, 1, hali_pr(w->cur));
  }
  return w->cur;
}

/* Before recording a command of category |cat|. */
static void begin_cmd(lw_t *w, uint32_t cat) {
  if (!w->open) {
    w->open = true;
    w->cats = 0;
    w->any_cmd = false;
    w->pending_barrier = false;
    w->cmd = hali_pass_reg(w->f, HALI_TYPE_COMMAND_BUFFER, "cmd");
  }
  if (w->pending_barrier)
    hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_EXECUTION_BARRIER,
                   1, hali_pr(w->cmd));
  w->pending_barrier = false;
  w->cats |= cat;
}
static void end_cmd(lw_t *w) {
  w->any_cmd = true;
  if (!w->concurrent) w->pending_barrier = true;
}

static bool intervals_overlap(const tinfo_t *a, const tinfo_t *b) {
  return a->def <= b->last && b->def <= a->last;
}

/* Storage for the transients of the region being closed at w->index.
 * Those whose last use is inside the region (before w->index) share one
 * slab: each gets the lowest 64-aligned offset whose bytes no value with
 * an overlapping liveness interval uses (largest first, then in order of
 * definition), and becomes a subspan of the slab.  A transient still read
 * after the region gets its own buffer. */
static void pack(lw_t *w) {
  uint32_t n = 0;
  for (uint32_t k = 0; k < w->npending; ++k) {
    uint32_t r = w->pending[k];
    if (w->t[r].last < w->index)
      w->pending[n++] = r;
    else
      own_buffer(w, r, HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL | HALI_HAL_MEMORY_TYPE_TRANSIENT,
                 HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_DISPATCH);
  }
  w->npending = 0;
  if (!n) return;
  /* Placement order: size descending, then definition (stable). */
  uint32_t *order = w->pending + n; /* room: pending holds nregs + 1 twice */
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t j = k;
    while (j > 0) {
      const tinfo_t *a = &w->t[order[j - 1]], *b = &w->t[w->pending[k]];
      if (a->static_bytes > b->static_bytes ||
          (a->static_bytes == b->static_bytes && a->def <= b->def))
        break;
      order[j] = order[j - 1];
      --j;
    }
    order[j] = w->pending[k];
  }
  int64_t *off = malloc(n * sizeof(int64_t));
  if (!off) {
    w->pre.oom = true;
    return;
  }
  int64_t total = 0;
  for (uint32_t k = 0; k < n; ++k) {
    const tinfo_t *t = &w->t[order[k]];
    int64_t o = 0;
    for (bool moved = true; moved;) {
      moved = false;
      for (uint32_t j = 0; j < k; ++j) {
        const tinfo_t *u = &w->t[order[j]];
        if (!intervals_overlap(t, u)) continue;
        /* Sizes are < 2^48 (the structural check), offsets are checked
         * below, so these sums do not wrap. */
        if (o < off[j] + u->static_bytes && off[j] < o + t->static_bytes) {
          o = (off[j] + u->static_bytes + SLAB_ALIGN - 1) / SLAB_ALIGN * SLAB_ALIGN;
          moved = true;
        }
      }
    }
    off[k] = o;
    int64_t end;
    if (__builtin_add_overflow(o, t->static_bytes, &end) || end > INT64_MAX / 2) {
      if (!w->err)
        w->err = hali_status_make(HALI_STATUS_OUT_OF_RANGE,
                                  PASS ": @%s: the transients of one region need "
                                  "more than 2^62 bytes",
                                  w->f->name);
      free(off);
      return;
    }
    if (end > total) total = end;
  }
  uint32_t slab = hali_pass_reg(w->f, HALI_TYPE_BUFFER, "slab");
  uint32_t cm = c32(w, HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL | HALI_HAL_MEMORY_TYPE_TRANSIENT);
  uint32_t cu = c32(w, HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_DISPATCH);
  uint32_t size = c64(w, total);
  hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_ALLOCATOR_ALLOCATE, 5,
                 hali_pr(slab), hali_pr(w->allocator), hali_pr(cm), hali_pr(cu),
                 hali_pr(size));
  /* Subspans in order of definition (pending order). */
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t r = w->pending[k], j = 0;
    while (order[j] != r) ++j;
    uint32_t o = c64(w, off[j]);
    hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_BUFFER_SUBSPAN, 4, hali_pr(r),
                   hali_pr(slab), hali_pr(o), hali_pr(w->t[r].size));
  }
  free(off);
}

/* Emits the pending setup, then the region (if any) signalling |signal|
 * (UINT32_MAX: a fresh fence). */
static void close_region(lw_t *w, uint32_t signal) {
  pack(w);
  if (w->open || signal != UINT32_MAX) fence_now(w);
  hali_pass_splice(&w->out, &w->pre);
  if (!w->open) {
    if (signal != UINT32_MAX) {
      /* Nothing recorded: a submission without command buffers orders the
       * signal after everything before it. */
      hali_pass_emit(&w->out, w->line, HALI_OP_HAL_DEVICE_QUEUE_EXECUTE, 3,
                     hali_pr(w->device), hali_pr(w->cur), hali_pr(signal));
      w->cur = signal;
    }
    return;
  }
  uint32_t mode = c32(w, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT), cats = c32(w, w->cats);
  hali_pass_splice(&w->out, &w->pre);
  hali_pass_emit(&w->out, w->line, HALI_OP_HAL_COMMAND_BUFFER_CREATE, 4,
                 hali_pr(w->cmd), hali_pr(w->device), hali_pr(mode),
                 hali_pr(cats));
  hali_pass_splice(&w->out, &w->cmds);
  hali_pass_emit(&w->out, w->line, HALI_OP_HAL_COMMAND_BUFFER_FINALIZE, 1,
                 hali_pr(w->cmd));
  if (signal == UINT32_MAX) {
    signal = hali_pass_reg(w->f, HALI_TYPE_FENCE, "timepoint");
    hali_pass_emit(&w->out, w->line, HALI_OP_HAL_FENCE_CREATE, 2,
                   hali_pr(signal), hali_pr(w->device));
  }
  hali_pass_emit(&w->out, w->line, HALI_OP_HAL_DEVICE_QUEUE_EXECUTE, 4,
                 hali_pr(w->device), hali_pr(w->cur), hali_pr(signal),
                 hali_pr(w->cmd));
  w->cur = signal;
  w->open = false;
}

static void bind(lw_t *w, uint32_t slot, uint32_t r, uint32_t zero) {
  uint32_t s = c32(w, slot);
  hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_PUSH_DESCRIPTOR_SET,
                 5, hali_pr(w->cmd), hali_pr(s), hali_pr(root(w, r)),
                 hali_pr(zero), hali_pr(w->t[r].size));
}

static hali_status_t lower_dispatch(lw_t *w, const hali_ir_insn_t *insn) {
  const hali_ir_operand_t *o = insn->operands;
  const hali_ir_executable_t *e = &w->m->executables[o[HALI_TD_EXE].v];
  uint32_t xi = (uint32_t)o[HALI_TD_EXPORT].imm;
  const hali_ir_export_t *x = &e->exports[xi];
  uint32_t nw = (uint32_t)o[HALI_TD_NWORKLOAD].imm;
  uint32_t na = (uint32_t)o[HALI_TD_NOPERANDS].imm;
  uint32_t nr = (uint32_t)o[HALI_TD_NRESULTS].imm;
  uint32_t w0 = HALI_TD_HEADER, a0 = w0 + nw, r0 = a0 + na, d0 = r0 + 2 * nr;
  uint32_t d = d0;
  for (uint32_t k = 0; k < nr; ++k) {
    uint32_t r = o[r0 + k].v;
    SET_SHAPE(w, r, &o[d], true);
    d += hali_ir_xtype_dynamic_dims(&w->f->reg_xtypes[r]);
    allocate(w, r);
  }
  begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_DISPATCH);
  /* Push constants: scalar operands in order, 64-bit ones as two words. */
  uint32_t words[64], nwords = 0;
  for (uint32_t k = 0; k < na && nwords + 2 <= 64; ++k) {
    uint32_t r = o[a0 + k].v;
    hali_type_t t = w->f->reg_types[r];
    if (t == HALI_TYPE_I32) {
      words[nwords++] = r;
    } else if (t == HALI_TYPE_INDEX) {
      /* One 32-bit word (materialize-interfaces made the export's slot i32). */
      uint32_t lo = hali_pass_reg(w->f, HALI_TYPE_I32, "%s.i32", rname(w, r));
      hali_pass_emit(&w->pre, w->line, HALI_OP_TRUNC_I64_I32, 2, hali_pr(lo),
                     hali_pr(r));
      words[nwords++] = lo;
    } else if (t == HALI_TYPE_F32) {
      uint32_t b = hali_pass_reg(w->f, HALI_TYPE_I32, "%s.bits", rname(w, r));
      hali_pass_emit(&w->pre, w->line, HALI_OP_BITCAST_F32_I32, 2, hali_pr(b),
                     hali_pr(r));
      words[nwords++] = b;
    } else if (t == HALI_TYPE_I64 || t == HALI_TYPE_F64) {
      uint32_t v = r;
      if (t == HALI_TYPE_F64) {
        v = hali_pass_reg(w->f, HALI_TYPE_I64, "%s.bits", rname(w, r));
        hali_pass_emit(&w->pre, w->line, HALI_OP_BITCAST_F64_I64, 2, hali_pr(v),
                       hali_pr(r));
      }
      uint32_t lo = hali_pass_reg(w->f, HALI_TYPE_I32, "%s.lo", rname(w, r));
      uint32_t hi = hali_pass_reg(w->f, HALI_TYPE_I32, "%s.hi", rname(w, r));
      uint32_t sh = hali_pass_reg(w->f, HALI_TYPE_I64, "%s.high", rname(w, r));
      uint32_t k32 = c64(w, 32);
      hali_pass_emit(&w->pre, w->line, HALI_OP_TRUNC_I64_I32, 2, hali_pr(lo), hali_pr(v));
      hali_pass_emit(&w->pre, w->line, HALI_OP_SHR_U_I64, 3, hali_pr(sh), hali_pr(v),
                     hali_pr(k32));
      hali_pass_emit(&w->pre, w->line, HALI_OP_TRUNC_I64_I32, 2, hali_pr(hi), hali_pr(sh));
      words[nwords++] = lo;
      words[nwords++] = hi;
    }
  }
  if (nwords) {
    uint32_t first = c32(w, 0);
    hali_ir_insn_t *pc = hali_pass_emit_open(
        &w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_PUSH_CONSTANTS, 2 + nwords, 2,
        hali_pr(w->cmd), hali_pr(first));
    for (uint32_t k = 0; k < nwords; ++k)
      hali_pass_set_operand(&w->cmds, pc, 2 + k, hali_pr(words[k]));
  }
  /* Bindings: tensor operands, then results. */
  uint32_t zero = c64(w, 0), slot = 0;
  for (uint32_t k = 0; k < na; ++k)
    if (w->f->reg_types[o[a0 + k].v] == HALI_TYPE_TENSOR)
      bind(w, slot++, o[a0 + k].v, zero);
  for (uint32_t k = 0; k < nr; ++k) bind(w, slot++, o[r0 + k].v, zero);
  /* Workgroup count: ceil(workload / workgroup size) per dimension,
   * missing dimensions 1.  A count is an i32 register, and the HAL takes at
   * most 2^31-1 per dimension (HALI_HAL_MAX_WORKGROUP_COUNT, doc/hal.md): a
   * workload that is negative or needs more is an error (at load when
   * static, OUT_OF_RANGE at run time when dynamic), never a truncation.
   * The product x*y*z is the HAL's to check. */
  uint32_t count[3];
  for (uint32_t k = 0; k < 3; ++k) {
    uint32_t ws = x->workgroup_size[k] ? x->workgroup_size[k] : 1;
    if (k >= nw) {
      count[k] = c32(w, 1);
    } else if (o[w0 + k].kind == HALI_IR_IMM) {
      int64_t v = o[w0 + k].imm;
      uint64_t g = v < 0 ? 0 : ((uint64_t)v + ws - 1) / ws;
      if (v < 0 || g > MAX_WORKGROUP_COUNT)
        return hali_status_make(
            HALI_STATUS_OUT_OF_RANGE,
            PASS ": @%s, dispatch of @%s::@%s: workload %lld in dimension %u "
            "%s",
            w->f->name, e->name, x->name, (long long)v, k,
            v < 0 ? "is negative"
                  : "needs more than 2^31-1 workgroups (the HAL's limit per "
                    "dimension)");
      count[k] = c32(w, (int64_t)g);
    } else {
      uint32_t wl = o[w0 + k].v;
      uint32_t add = c64(w, ws - 1), div = c64(w, ws);
      uint32_t limit = c64(w, MAX_WORKGROUP_COUNT);
      uint32_t neg = hali_pass_reg(w->f, HALI_TYPE_I32, "workload%u_negative", k);
      hali_pass_emit(&w->pre, w->line, HALI_OP_LT_S_I64, 3, hali_pr(neg),
                     hali_pr(wl), hali_pr(zero));
      fail_if(w, neg, "dispatch of @%s::@%s: workload in dimension %u is negative",
              e->name, x->name, k);
      /* workload <= 2^63-1 and ws - 1 < 2^32: the unsigned sum fits. */
      uint32_t g64 = hali_pass_reg(w->f, HALI_TYPE_I64, "workgroups%u.i64", k);
      hali_pass_emit(&w->pre, w->line, HALI_OP_ADD_I64, 3, hali_pr(g64),
                     hali_pr(wl), hali_pr(add));
      hali_pass_emit(&w->pre, w->line, HALI_OP_DIV_U_I64, 3, hali_pr(g64),
                     hali_pr(g64), hali_pr(div));
      uint32_t big = hali_pass_reg(w->f, HALI_TYPE_I32, "workgroups%u_overflow", k);
      hali_pass_emit(&w->pre, w->line, HALI_OP_GT_U_I64, 3, hali_pr(big),
                     hali_pr(g64), hali_pr(limit));
      fail_if(w, big,
              "dispatch of @%s::@%s: the workload in dimension %u needs more "
              "than 2^31-1 workgroups (the HAL's limit per dimension)",
              e->name, x->name, k);
      count[k] = hali_pass_reg(w->f, HALI_TYPE_I32, "workgroups%u", k);
      hali_pass_emit(&w->pre, w->line, HALI_OP_TRUNC_I64_I32, 2, hali_pr(count[k]),
                     hali_pr(g64));
    }
  }
  uint32_t ord = c32(w, xi);
  hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_DISPATCH, 6,
                 hali_pr(w->cmd), hali_pr(w->exes[o[HALI_TD_EXE].v]), hali_pr(ord),
                 hali_pr(count[0]), hali_pr(count[1]), hali_pr(count[2]));
  end_cmd(w);
  return HALI_OK;
}

/* The tensors |insn| reads (the lowering uses their storage, size and
 * dims registers, which exist once the tensor is written). */
static hali_status_t check_reads(lw_t *w, const hali_ir_insn_t *insn,
                                 uint32_t index) {
  const hali_ir_operand_t *o = insn->operands;
  uint32_t first = 0, end = 0;
  switch (insn->op) {
  case HALI_OP_TENSOR_DISPATCH:
    first = HALI_TD_HEADER + (uint32_t)o[HALI_TD_NWORKLOAD].imm;
    end = first + (uint32_t)o[HALI_TD_NOPERANDS].imm;
    break;
  case HALI_OP_TENSOR_CLONE:
  case HALI_OP_TENSOR_EXPORT: first = 1; end = 2; break;
  case HALI_OP_TENSOR_OVERWRITE: first = 0; end = 2; break;
  default: break;
  }
  for (uint32_t k = first; k < end; ++k) {
    uint32_t r = o[k].v;
    if (w->f->reg_types[r] == HALI_TYPE_TENSOR && !w->t[r].defined)
      return hali_pass_error(PASS, w->m, w->f, insn, index,
                             "tensor %%%s is read before it is written",
                             rname(w, r));
  }
  return HALI_OK;
}

static hali_status_t lower_insn(lw_t *w, const hali_ir_insn_t *insn,
                                uint32_t index) {
  const hali_ir_operand_t *o = insn->operands;
  hali_ir_func_t *f = w->f;
  w->line = insn->line;
  HALI_RETURN_IF_ERROR_PLAIN(check_reads(w, insn, index));
  switch (insn->op) {
  case HALI_OP_TENSOR_WAIT:
    close_region(w, UINT32_MAX);
    w->cur = o[0].v;
    return HALI_OK;
  case HALI_OP_TENSOR_BARRIER:
    close_region(w, o[0].v);
    return HALI_OK;
  case HALI_OP_TENSOR_EXECUTE:
    close_region(w, UINT32_MAX);
    return HALI_OK;
  case HALI_OP_TENSOR_CONCURRENT:
    if (w->concurrent)
      return hali_pass_error(PASS, w->m, f, insn, index,
                             "concurrent groups do not nest");
    w->concurrent = true;
    return HALI_OK;
  case HALI_OP_TENSOR_END:
    if (w->concurrent) {
      w->concurrent = false;
      w->pending_barrier = w->open && w->any_cmd;
    } else {
      close_region(w, UINT32_MAX);
    }
    return HALI_OK;
  case HALI_OP_TENSOR_IMPORT: {
    uint32_t r = o[0].v;
    SET_SHAPE(w, r, &o[2], false);
    w->t[r].defined = true;
    hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_BUFFER_VIEW_BUFFER, 2,
                   hali_pr(r), hali_pr(o[1].v));
    char msg[300];
    snprintf(msg, sizeof(msg), "@%s: the storage of %%%s", f->name, rname(w, r));
    uint32_t cm = c32(w, HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE), cu = c32(w, HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_DISPATCH);
    hali_pass_emit(&w->pre, w->line, HALI_OP_HAL_BUFFER_ASSERT, 5, hali_pr(r),
                   hali_pr(w->t[r].size), hali_pr(cm), hali_pr(cu),
                   hali_pref(HALI_IR_STRING,
                             hali_ir_module_intern(w->m, msg, strlen(msg))));
    return HALI_OK;
  }
  case HALI_OP_TENSOR_EXPORT: {
    uint32_t r = o[1].v;
    uint32_t rank = f->reg_xtypes[r].rank;
    uint32_t et = c32(w, (int32_t)f->reg_xtypes[r].element_type), enc = c32(w, 1);
    hali_ir_insn_t *vc = hali_pass_emit_open(&w->pre, w->line,
                                             HALI_OP_HAL_BUFFER_VIEW_CREATE, 4 + rank,
                                             4, hali_pr(o[0].v), hali_pr(root(w, r)),
                                             hali_pr(et), hali_pr(enc));
    for (uint32_t d = 0; d < rank; ++d)
      hali_pass_set_operand(&w->pre, vc, 4 + d, hali_pr(w->t[r].dims[d]));
    return HALI_OK;
  }
  case HALI_OP_TENSOR_CONSTANT: {
    uint32_t r = o[0].v;
    const hali_ir_rodata_t *rd = &w->m->rodata[o[1].v];
    SET_SHAPE(w, r, NULL, true);
    const hali_ir_xtype_t *x = &f->reg_xtypes[r];
    uint64_t bytes = hali_pass_element_size(x->element_type);
    for (uint32_t d = 0; d < x->rank; ++d) bytes *= (uint64_t)x->dims[d];
    if (rd->size != bytes)
      return hali_pass_error(PASS, w->m, f, insn, index,
                             "rodata @%s has %llu bytes but the tensor needs %llu",
                             rd->name, (unsigned long long)rd->size,
                             (unsigned long long)bytes);
    allocate(w, r);
    uint32_t zero = c64(w, 0);
    begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_TRANSFER);
    hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_UPDATE, 6,
                   hali_pr(w->cmd), hali_pref(HALI_IR_RODATA, o[1].v),
                   hali_pr(zero), hali_pr(root(w, r)), hali_pr(zero),
                   hali_pr(w->t[r].size));
    end_cmd(w);
    return HALI_OK;
  }
  case HALI_OP_TENSOR_SPLAT: {
    uint32_t r = o[0].v, v = o[1].v;
    uint32_t es = hali_pass_element_size(f->reg_xtypes[r].element_type);
    hali_type_t vt = f->reg_types[v];
    if (!((vt == HALI_TYPE_F32 && es == 4) ||
          (vt == HALI_TYPE_I32 && (es == 1 || es == 2 || es == 4))))
    {
      hali_strbuf_t sb = {0};
      hali_ir_xtype_print(&sb, &f->reg_xtypes[r]);
      char *ts = hali_strbuf_take(&sb);
      hali_status_t e = hali_pass_error(
          PASS, w->m, f, insn, index,
          "a splat of %s into %s is not supported: fills take a pattern of 1, "
          "2 or 4 bytes, so %u-byte elements take %s",
          hali_type_name(vt), ts ? ts : "?", es,
          es == 4   ? "an i32 or f32 value"
          : es <= 2 ? "an i32 value (its low bytes are the pattern)"
                    : "no scalar (8-byte patterns are not supported: write a kernel "
                      "or use a constant)");
      free(ts);
      return e;
    }
    SET_SHAPE(w, r, &o[2], true);
    allocate(w, r);
    uint32_t pat = v;
    if (vt == HALI_TYPE_F32) {
      pat = hali_pass_reg(f, HALI_TYPE_I32, "%s.pattern", rname(w, r));
      hali_pass_emit(&w->pre, w->line, HALI_OP_BITCAST_F32_I32, 2, hali_pr(pat),
                     hali_pr(v));
    }
    uint32_t zero = c64(w, 0), plen = c32(w, es);
    begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_TRANSFER);
    hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_FILL, 6,
                   hali_pr(w->cmd), hali_pr(root(w, r)), hali_pr(zero),
                   hali_pr(w->t[r].size), hali_pr(pat), hali_pr(plen));
    end_cmd(w);
    return HALI_OK;
  }
  case HALI_OP_TENSOR_CLONE: {
    uint32_t r = o[0].v, s = o[1].v;
    const hali_ir_xtype_t *x = &f->reg_xtypes[r];
    hali_ir_operand_t dyn[HALI_HAL_MAX_RANK];
    uint32_t k = 0;
    for (uint32_t d = 0; d < x->rank; ++d)
      if (x->dims[d] < 0) dyn[k++] = hali_pr(w->t[s].dims[d]);
    SET_SHAPE(w, r, dyn, true);
    allocate(w, r);
    uint32_t zero = c64(w, 0);
    begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_TRANSFER);
    hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_COPY, 6,
                   hali_pr(w->cmd), hali_pr(root(w, s)), hali_pr(zero),
                   hali_pr(root(w, r)), hali_pr(zero), hali_pr(w->t[r].size));
    end_cmd(w);
    return HALI_OK;
  }
  case HALI_OP_TENSOR_OVERWRITE: {
    uint32_t v = o[0].v, a = o[1].v;
    if (root(w, v) == root(w, a)) return HALI_OK; /* written in place */
    uint32_t zero = c64(w, 0);
    begin_cmd(w, HALI_HAL_COMMAND_CATEGORY_TRANSFER);
    hali_pass_emit(&w->cmds, w->line, HALI_OP_HAL_COMMAND_BUFFER_COPY, 6,
                   hali_pr(w->cmd), hali_pr(root(w, v)), hali_pr(zero),
                   hali_pr(root(w, a)), hali_pr(zero), hali_pr(w->t[v].size));
    end_cmd(w);
    return HALI_OK;
  }
  case HALI_OP_TENSOR_DISPATCH:
    if (o[HALI_TD_BINDINGS].imm < 0)
      return hali_pass_error(PASS, w->m, f, insn, index,
                             "dispatch site without an interface: run "
                             "materialize-interfaces first");
    return lower_dispatch(w, insn);
  default:
    return hali_pass_error(PASS, w->m, f, insn, index, "unexpected op");
  }
}

/* Is tensor |a| read by a tensor op at or after the one that writes |v|
 * (other than the overwrite of |v| into |a|)?  Then |v| cannot be produced
 * in |a|'s storage: the reader (or the producer itself, e.g. a matmul
 * reading |a|) would see it half-written. */
static bool read_after_def(const hali_ir_func_t *f, uint32_t v, uint32_t a) {
  bool after = false;
  for (uint32_t b = 0; b < f->block_count; ++b)
    for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i) {
      const hali_ir_insn_t *insn = &f->blocks[b].insns[i];
      if (!(hali_op_info(insn->op)->flags & HALI_OPF_TENSOR)) continue;
      for (uint32_t k = 0; k < insn->operand_count && !after; ++k)
        after = insn->operands[k].kind == HALI_IR_REG &&
                insn->operands[k].v == v && hali_ir_operand_is_write(insn, k);
      if (!after || (insn->op == HALI_OP_TENSOR_OVERWRITE &&
                     insn->operands[0].v == v))
        continue;
      for (uint32_t k = 0; k < insn->operand_count; ++k)
        if (insn->operands[k].kind == HALI_IR_REG &&
            insn->operands[k].v == a && !hali_ir_operand_is_write(insn, k))
          return true;
    }
  return false;
}

/* Lifetimes, single assignment, one block. */
static hali_status_t analyse(lw_t *w) {
  hali_ir_func_t *f = w->f;
  int32_t tensor_block = -1;
  for (uint32_t b = 0; b < f->block_count; ++b)
    for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i) {
      const hali_ir_insn_t *insn = &f->blocks[b].insns[i];
      const hali_op_info_t *info = hali_op_info(insn->op);
      if (!(info->flags & HALI_OPF_TENSOR)) {
        for (uint32_t k = 0; k < insn->operand_count; ++k)
          if (insn->operands[k].kind == HALI_IR_REG &&
              f->reg_types[insn->operands[k].v] == HALI_TYPE_TENSOR)
            return hali_pass_error(PASS, w->m, f, insn, i,
                                   "%s cannot take a tensor (only tensor ops "
                                   "and the return of a tensor-level function)",
                                   info->name);
        continue;
      }
      if (tensor_block >= 0 && (uint32_t)tensor_block != b)
        return hali_pass_error(PASS, w->m, f, insn, i,
                               "tensor ops in more than one block: the "
                               "lowering chains fences within one block");
      tensor_block = (int32_t)b;
      const hali_ir_operand_t *o = insn->operands;
      for (uint32_t k = 0; k < insn->operand_count; ++k) {
        if (!hali_ir_operand_is_write(insn, k)) continue;
        uint32_t r = o[k].v;
        if (f->reg_types[r] != HALI_TYPE_TENSOR) continue;
        if (++w->t[r].writes > 1)
          return hali_pass_error(PASS, w->m, f, insn, i,
                                 "tensor register %%%s is written twice: "
                                 "tensor values are single-assignment",
                                 rname(w, r));
        w->t[r].lifetime = LT_TRANSIENT;
      }
      switch (insn->op) {
      case HALI_OP_TENSOR_IMPORT: w->t[o[0].v].lifetime = LT_IMPORTED; break;
      case HALI_OP_TENSOR_CONSTANT: w->t[o[0].v].lifetime = LT_CONSTANT; break;
      case HALI_OP_TENSOR_DISPATCH: {
        uint32_t na = (uint32_t)o[HALI_TD_NOPERANDS].imm;
        uint32_t nr = (uint32_t)o[HALI_TD_NRESULTS].imm;
        uint32_t a0 = HALI_TD_HEADER + (uint32_t)o[HALI_TD_NWORKLOAD].imm;
        for (uint32_t k = 0; k < nr; ++k) {
          int64_t tie = o[a0 + na + nr + k].imm;
          if (tie >= 0) {
            w->t[o[a0 + na + k].v].lifetime = LT_ALIAS;
            w->t[o[a0 + na + k].v].alias = o[a0 + tie].v;
          }
        }
        break;
      }
      default: break;
      }
    }
  /* Escapes: exported values are returned to the caller; a value
   * overwritten into a mutable argument is produced in its storage. */
  for (uint32_t b = 0; b < f->block_count; ++b)
    for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i) {
      const hali_ir_insn_t *insn = &f->blocks[b].insns[i];
      const hali_ir_operand_t *o = insn->operands;
      if (insn->op == HALI_OP_TENSOR_EXPORT) {
        uint32_t r = root(w, o[1].v);
        if (w->t[r].lifetime == LT_TRANSIENT) w->t[r].lifetime = LT_RETURNED;
        if (w->t[r].lifetime == LT_CONSTANT) w->t[r].const_returned = true;
      } else if (insn->op == HALI_OP_TENSOR_OVERWRITE) {
        uint32_t v = o[0].v;
        if (w->t[v].lifetime == LT_TRANSIENT && v != o[1].v &&
            !read_after_def(f, v, o[1].v)) {
          w->t[v].lifetime = LT_ALIAS;
          w->t[v].alias = o[1].v;
        }
      }
    }
  return HALI_OK;
}

/* Liveness intervals of storage roots, in positions of the tensor block:
 * an op is at its index, except that the ops of a `concurrent {}` group
 * run together, so they define at the group's start and use until its
 * end.  A root's interval runs from its definition to the last op that
 * reads or writes it or any alias of it. */
static void liveness(lw_t *w) {
  hali_ir_func_t *f = w->f;
  for (uint32_t b = 0; b < f->block_count; ++b) {
    const hali_ir_block_t *blk = &f->blocks[b];
    bool conc = false;
    uint32_t start = 0;
    for (uint32_t i = 0; i < blk->insn_count; ++i) {
      const hali_ir_insn_t *insn = &blk->insns[i];
      if (!(hali_op_info(insn->op)->flags & HALI_OPF_TENSOR)) continue;
      if (insn->op == HALI_OP_TENSOR_CONCURRENT) {
        conc = true;
        start = i;
        continue;
      }
      uint32_t dpos = i, upos = i;
      if (insn->op == HALI_OP_TENSOR_END) {
        conc = false;
        continue;
      }
      if (conc) {
        dpos = start;
        for (uint32_t j = i + 1; j < blk->insn_count; ++j)
          if (blk->insns[j].op == HALI_OP_TENSOR_END) {
            upos = j;
            break;
          }
      }
      for (uint32_t k = 0; k < insn->operand_count; ++k) {
        const hali_ir_operand_t *o = &insn->operands[k];
        if (o->kind != HALI_IR_REG || o->v >= w->nregs ||
            f->reg_types[o->v] != HALI_TYPE_TENSOR)
          continue;
        uint32_t r = root(w, o->v);
        if (hali_ir_operand_is_write(insn, k) && r == o->v) w->t[r].def = dpos;
        if (upos > w->t[r].last) w->t[r].last = upos;
      }
    }
  }
}

static hali_status_t lower_func(hali_ir_module_t *m, uint32_t fi) {
  hali_ir_func_t *f = &m->funcs[fi];
  for (uint32_t p = 0; p < f->param_count; ++p)
    if (f->reg_types[p] == HALI_TYPE_TENSOR)
      return hali_pass_error(PASS, m, f, NULL, 0,
                             "parameter %u is a tensor: run func-conversion "
                             "first",
                             p);
  HALI_RETURN_IF_ERROR_PLAIN(hali_pass_copy_on_write(m, f));
  lw_t *wp = calloc(1, sizeof(lw_t));
  if (!wp) return hali_status_oom();
#define w (*wp)
  w.m = m;
  w.f = f;
  w.nregs = f->reg_count;
  w.cur = UINT32_MAX;
  w.t = calloc(f->reg_count + 1, sizeof(tinfo_t));
  w.exes = malloc((m->executable_count + 1) * sizeof(uint32_t));
  w.pending = malloc(2 * (f->reg_count + 1) * sizeof(uint32_t));
  if (!w.t || !w.exes || !w.pending) {
    free(w.t);
    free(w.exes);
    free(w.pending);
    free(wp);
    return hali_status_oom();
  }
  hali_status_t s = analyse(&w);
  if (!s) liveness(&w);
  /* Prologue: the device, its allocator and the executables used. */
  w.line = f->line;
  if (!s) {
    w.device = hali_pass_reg(f, HALI_TYPE_DEVICE, "device");
    w.allocator = hali_pass_reg(f, HALI_TYPE_ALLOCATOR, "allocator");
    hali_pass_emit(&w.pre, w.line, HALI_OP_HAL_DEVICE_GET, 1, hali_pr(w.device));
    hali_pass_emit(&w.pre, w.line, HALI_OP_HAL_DEVICE_ALLOCATOR, 2,
                   hali_pr(w.allocator), hali_pr(w.device));
    for (uint32_t e = 0; e < m->executable_count; ++e) {
      w.exes[e] = UINT32_MAX;
      for (uint32_t b = 0; b < f->block_count && w.exes[e] == UINT32_MAX; ++b)
        for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i)
          if (f->blocks[b].insns[i].op == HALI_OP_TENSOR_DISPATCH &&
              f->blocks[b].insns[i].operands[HALI_TD_EXE].v == e) {
            w.exes[e] = hali_pass_reg(f, HALI_TYPE_EXECUTABLE, "%s",
                                      m->executables[e].name);
            hali_pass_emit(&w.pre, w.line, HALI_OP_HAL_EXECUTABLE_GET, 2,
                           hali_pr(w.exes[e]),
                           hali_pref(HALI_IR_EXECUTABLE, e));
            break;
          }
    }
  }
  for (uint32_t b = 0; b < f->block_count && !s; ++b) {
    hali_ir_block_t *blk = &f->blocks[b];
    for (uint32_t i = 0; i < blk->insn_count && !s; ++i) {
      const hali_ir_insn_t *insn = &blk->insns[i];
      w.index = i;
      if (hali_op_info(insn->op)->flags & HALI_OPF_TENSOR) {
        s = lower_insn(&w, insn, i);
        if (!s && w.err) {
          s = w.err;
          w.err = HALI_OK;
        }
        continue;
      }
      /* Host code that cannot suspend or leave the block joins the setup
       * of the open region instead of ending it (it does not depend on
       * the region's results: tensors are not visible to it). */
      uint32_t fl = hali_op_info(insn->op)->flags;
      if (w.open && !(fl & (HALI_OPF_TERM | HALI_OPF_SUSPEND)) &&
          insn->op != HALI_OP_CALL) {
        hali_pass_copy_insn(&w.pre, insn, NULL);
        continue;
      }
      close_region(&w, UINT32_MAX);
      hali_pass_copy_insn(&w.out, insn, NULL);
      if (w.err) {
        s = w.err;
        w.err = HALI_OK;
      }
    }
    if (!s) {
      /* Swap the rebuilt block in. */
      for (uint32_t i = 0; i < blk->insn_count; ++i) free(blk->insns[i].operands);
      free(blk->insns);
      blk->insns = w.out.b.insns;
      blk->insn_count = w.out.b.insn_count;
      blk->insn_capacity = w.out.b.insn_capacity;
      memset(&w.out.b, 0, sizeof(w.out.b));
    }
  }
  bool oom = w.out.oom || w.pre.oom || w.cmds.oom;
  hali_pass_list_free(&w.out);
  hali_pass_list_free(&w.pre);
  hali_pass_list_free(&w.cmds);
  if (!s && oom) s = hali_status_oom();
  if (!s) {
    /* Tensor registers now hold their storage. */
    for (uint32_t r = 0; r < w.nregs; ++r)
      if (f->reg_types[r] == HALI_TYPE_TENSOR) f->reg_types[r] = HALI_TYPE_BUFFER;
      else if (f->reg_types[r] == HALI_TYPE_INDEX) f->reg_types[r] = HALI_TYPE_I64;
    if (f->reg_xtypes) {
      for (uint32_t r = 0; r < f->reg_count; ++r) free(f->reg_xtypes[r].dims);
      free(f->reg_xtypes);
      f->reg_xtypes = NULL;
    }
  }
  hali_status_free(w.err); /* one found after another error */
  free(w.t);
  free(w.exes);
  free(w.pending);
#undef w
  free(wp);
  return s;
}

hali_status_t hali_pass_stream_to_hal(hali_ir_module_t *m) {
  for (uint32_t fi = 0; fi < m->func_count; ++fi) {
    const hali_ir_func_t *f = &m->funcs[fi];
    bool has = false;
    for (uint32_t b = 0; b < f->block_count && !has; ++b)
      for (uint32_t i = 0; i < f->blocks[b].insn_count && !has; ++i)
        has = (hali_op_info(f->blocks[b].insns[i].op)->flags & HALI_OPF_TENSOR) != 0;
    for (uint32_t r = 0; r < f->reg_count && !has; ++r)
      has = f->reg_types[r] == HALI_TYPE_TENSOR || f->reg_types[r] == HALI_TYPE_INDEX;
    if (has) HALI_RETURN_IF_ERROR_PLAIN(lower_func(m, fi));
  }
  return HALI_OK;
}
