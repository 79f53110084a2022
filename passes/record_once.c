/* hali — stream-to-hal: regions recorded once (doc/passes.md, "Commands
 * recorded once"; hal/binding_table.h).
 *
 * A function with the attribute "record_once" (one block) records each of
 * its regions in the storage initializer instead of on every call: the
 * commands go on binding-slot placeholders, and the call binds the kept
 * recording to the buffers (and push-constant values) of this call.  This
 * file decides, at the close of each region, whether its commands can be
 * recorded ahead (every scalar they take but push constants and fill
 * patterns known at load: evaluated over the function's straight-line
 * code), builds the recording, and later emits the recordings into the
 * initializer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "passes/pass_util.h"
#include "passes/stream_to_hal_int.h"
#include "vm/ops.h"

/* What the function's code before the region leaves in each register:
 * a value known at load, or a subspan of known range of another buffer
 * (made at |pos|, from a buffer not written since). */
typedef struct {
  uint32_t n;
  uint8_t *known;
  int64_t *val;
  uint32_t *last_def; /* position of the last write (UINT32_MAX: none) */
  uint8_t *is_sub;
  uint32_t *sub_src, *sub_pos;
  int64_t *sub_off;
  uint32_t *gload; /* global.load.ref of this global (UINT32_MAX: not) */
  const hali_ir_module_t *m; /* whose immediates the code holds */
} cv_t;

static void cv_free(cv_t *c) {
  hali_free(c->known);
  hali_free(c->val);
  hali_free(c->last_def);
  hali_free(c->is_sub);
  hali_free(c->sub_src);
  hali_free(c->sub_pos);
  hali_free(c->sub_off);
  hali_free(c->gload);
}

static bool cv_init(cv_t *c, uint32_t n) {
  memset(c, 0, sizeof(*c));
  c->n = n;
  size_t k = (size_t)n + 1;
  c->known = hali_calloc(k, 1);
  c->val = hali_calloc(k, sizeof(int64_t));
  c->last_def = hali_malloc(k * sizeof(uint32_t));
  c->is_sub = hali_calloc(k, 1);
  c->sub_src = hali_calloc(k, sizeof(uint32_t));
  c->sub_pos = hali_calloc(k, sizeof(uint32_t));
  c->sub_off = hali_calloc(k, sizeof(int64_t));
  c->gload = hali_malloc(k * sizeof(uint32_t));
  if (!c->known || !c->val || !c->last_def || !c->is_sub || !c->sub_src ||
      !c->sub_pos || !c->sub_off || !c->gload) {
    cv_free(c);
    return false;
  }
  for (uint32_t r = 0; r < k; ++r) c->last_def[r] = c->gload[r] = UINT32_MAX;
  return true;
}

static bool reg_ok(const cv_t *c, const hali_ir_operand_t *o) {
  return o->kind == HALI_IR_REG && o->v < c->n;
}
static bool kn(const cv_t *c, const hali_ir_operand_t *o) {
  return reg_ok(c, o) && c->known[o->v];
}

/* One instruction at position |pos| of the straight-line code. */
static void cv_step(cv_t *c, const hali_ir_insn_t *insn, uint32_t pos) {
  const hali_ir_operand_t *o = insn->operands;
  bool ok = false;
  int64_t r = 0;
  const int64_t a = insn->operand_count > 1 && kn(c, &o[1]) ? c->val[o[1].v] : 0;
  const int64_t b = insn->operand_count > 2 && kn(c, &o[2]) ? c->val[o[2].v] : 0;
  const bool k1 = insn->operand_count > 1 && kn(c, &o[1]);
  const bool k12 = k1 && insn->operand_count > 2 && kn(c, &o[2]);
  switch (insn->op) {
    case HALI_OP_CONST_I32:
      ok = o[1].kind == HALI_IR_IMM, r = (int32_t)hali_ir_imm(c->m, &o[1]);
      break;
    case HALI_OP_CONST_I64:
      ok = o[1].kind == HALI_IR_IMM, r = hali_ir_imm(c->m, &o[1]);
      break;
    case HALI_OP_MOV_I32:
    case HALI_OP_MOV_I64:
      ok = k1, r = a;
      break;
    case HALI_OP_ADD_I32:
      ok = k12, r = (int32_t)((uint32_t)a + (uint32_t)b);
      break;
    case HALI_OP_SUB_I32:
      ok = k12, r = (int32_t)((uint32_t)a - (uint32_t)b);
      break;
    case HALI_OP_MUL_I32:
      ok = k12, r = (int32_t)((uint32_t)a * (uint32_t)b);
      break;
    case HALI_OP_ADD_I64:
      ok = k12, r = (int64_t)((uint64_t)a + (uint64_t)b);
      break;
    case HALI_OP_SUB_I64:
      ok = k12, r = (int64_t)((uint64_t)a - (uint64_t)b);
      break;
    case HALI_OP_MUL_I64:
      ok = k12, r = (int64_t)((uint64_t)a * (uint64_t)b);
      break;
    case HALI_OP_DIV_U_I32:
      ok = k12 && (uint32_t)b != 0;
      if (ok) r = (int32_t)((uint32_t)a / (uint32_t)b);
      break;
    case HALI_OP_DIV_U_I64:
      ok = k12 && b != 0;
      if (ok) r = (int64_t)((uint64_t)a / (uint64_t)b);
      break;
    case HALI_OP_TRUNC_I64_I32:
      ok = k1, r = (int32_t)(uint32_t)(uint64_t)a;
      break;
    case HALI_OP_EXT_S_I32_I64:
      ok = k1, r = (int32_t)a;
      break;
    case HALI_OP_EXT_U_I32_I64:
      ok = k1, r = (int64_t)(uint32_t)a;
      break;
    default:
      break;
  }
  const bool sub = insn->op == HALI_OP_HAL_BUFFER_SUBSPAN &&
                   insn->operand_count == 4 && reg_ok(c, &o[1]) &&
                   kn(c, &o[2]);
  for (uint32_t k = 0; k < insn->operand_count; ++k) {
    if (!reg_ok(c, &o[k]) || !hali_ir_operand_is_write(insn, k)) continue;
    uint32_t w = o[k].v;
    c->last_def[w] = pos;
    c->known[w] = k == 0 && ok;
    if (c->known[w]) c->val[w] = r;
    c->is_sub[w] = 0;
    c->gload[w] = k == 0 && insn->op == HALI_OP_GLOBAL_LOAD_REF &&
                          o[1].kind == HALI_IR_GLOBAL
                      ? o[1].v
                      : UINT32_MAX;
    if (k == 0 && sub) {
      /* Rooted: a subspan of a subspan is one of its root. */
      uint32_t src = o[1].v;
      int64_t off = c->val[o[2].v];
      if (c->is_sub[src] && c->last_def[c->sub_src[src]] < c->sub_pos[src]) {
        off += c->sub_off[src];
        src = c->sub_src[src];
      }
      c->is_sub[w] = 1;
      c->sub_src[w] = src;
      c->sub_off[w] = off;
      c->sub_pos[w] = pos;
    }
  }
}

/* ---- Building a recording. */

typedef struct {
  uint32_t reg;    /* the buffer bound at the call (a subspan for |off|) */
  uint32_t off;    /* i64 register: a run-time offset into |reg| */
  uint32_t len;    /* i64 register: its length (|off| != UINT32_MAX) */
  ro_slot_t slot;
} bslot_t;

typedef struct {
  lw_t *w;
  cv_t *c;
  bslot_t *slots;
  uint32_t nslots;
  uint32_t cregs[256]; /* constant slots: the registers bound */
  uint32_t ncregs;
  ro_insn_t *insns;
  uint32_t ninsns, cap;
  bool fail;
} build_t;

enum { MAX_SLOTS = 256 }; /* hal.command_buffer.bind's tail */

static bool known_val(build_t *b, const hali_ir_operand_t *o, int64_t *v) {
  if (o->kind == HALI_IR_IMM) {
    *v = hali_ir_imm(b->w->m, o);
    return true;
  }
  if (!kn(b->c, o)) return false;
  *v = b->c->val[o->v];
  return true;
}

/* The constant slot of push constant or pattern register |r|. */
static uint32_t cslot(build_t *b, uint32_t r) {
  for (uint32_t i = 0; i < b->ncregs; ++i)
    if (b->cregs[i] == r) return i;
  if (b->ncregs == sizeof(b->cregs) / sizeof(b->cregs[0])) {
    b->fail = true;
    return 0;
  }
  b->cregs[b->ncregs] = r;
  return b->ncregs++;
}

/* The slot and offset of bytes [off, off + len) of buffer register |buf|
 * (|off| an operand, |len| known), used as |usage|. */
static bool place(build_t *b, const hali_ir_operand_t *buf,
                  const hali_ir_operand_t *off, const hali_ir_operand_t *len,
                  uint32_t usage, ro_operand_t *out_slot,
                  ro_operand_t *out_off) {
  int64_t n = 0, at = 0;
  if (!reg_ok(b->c, buf) || !known_val(b, len, &n) || n < 0) return false;
  uint32_t r = buf->v;
  if (known_val(b, off, &at)) {
    if (at < 0) return false;
    int64_t extra = 0;
    const cv_t *c = b->c;
    if (c->is_sub[r] && c->last_def[c->sub_src[r]] < c->sub_pos[r]) {
      extra = c->sub_off[r];
      r = c->sub_src[r];
    }
    /* A parameter's buffer (bound before any initializer runs) and the
     * constant pool's (stored by the storage initializer before the
     * recordings) never change: recorded as they are, not slots. */
    const uint32_t g = c->gload[r];
    const hali_ir_module_t *m = b->w->m;
    if (g < m->global_count && !(m->globals[g].flags & HALI_GLOBAL_MUTABLE) &&
        ((m->globals[g].flags & HALI_GLOBAL_PARAMETER) ||
         (b->w->pool_offset && g == b->w->pool_global))) {
      *out_slot = (ro_operand_t){RO_GLOBAL, g};
      *out_off = (ro_operand_t){RO_I64, extra + at};
      return true;
    }
    uint32_t s = 0;
    while (s < b->nslots &&
           !(b->slots[s].reg == r && b->slots[s].off == UINT32_MAX))
      ++s;
    if (s == b->nslots) {
      if (s == MAX_SLOTS) return false;
      b->slots[s] = (bslot_t){r, UINT32_MAX, UINT32_MAX, {0, 0}};
      b->nslots++;
    }
    uint64_t end = (uint64_t)extra + (uint64_t)at + (uint64_t)n;
    if (end > (uint64_t)INT64_MAX) return false;
    if (end > b->slots[s].slot.length) b->slots[s].slot.length = end;
    b->slots[s].slot.usage |= usage;
    *out_slot = (ro_operand_t){RO_SLOT, s};
    *out_off = (ro_operand_t){RO_I64, extra + at};
    return true;
  }
  /* A run-time offset: a slot of its own, bound to the subspan. */
  if (!reg_ok(b->c, off) || !reg_ok(b->c, len) || b->nslots == MAX_SLOTS)
    return false;
  uint32_t s = b->nslots++;
  b->slots[s] = (bslot_t){r, off->v, len->v, {(uint64_t)n, usage}};
  *out_slot = (ro_operand_t){RO_SLOT, s};
  *out_off = (ro_operand_t){RO_I64, 0};
  return true;
}

static ro_insn_t *add(build_t *b, uint16_t op, uint32_t n, uint32_t line) {
  if (b->ninsns == b->cap) {
    uint32_t cap = b->cap ? 2 * b->cap : 64;
    ro_insn_t *v = hali_realloc(b->insns, cap * sizeof(*v));
    if (!v) {
      b->fail = true;
      return NULL;
    }
    b->insns = v;
    b->cap = cap;
  }
  ro_operand_t *o = hali_calloc(n ? n : 1, sizeof(*o));
  if (!o) {
    b->fail = true;
    return NULL;
  }
  ro_insn_t *i = &b->insns[b->ninsns++];
  *i = (ro_insn_t){op, n, line, o};
  return i;
}

static bool int_operand(build_t *b, const hali_ir_operand_t *o,
                        ro_operand_t *out) {
  int64_t v = 0;
  if (!known_val(b, o, &v)) return false;
  if (o->kind == HALI_IR_IMM) {
    *out = (ro_operand_t){RO_IMM, v};
    return true;
  }
  *out = (ro_operand_t){b->w->f->reg_types[o->v] == HALI_TYPE_I64 ? RO_I64
                                                                 : RO_I32,
                        v};
  return true;
}

/* push_constants: runs of known values stay push_constants, the others
 * become push_constant_slots. */
static bool build_push_constants(build_t *b, const hali_ir_insn_t *insn) {
  const hali_ir_operand_t *o = insn->operands;
  int64_t base = 0;
  if (!known_val(b, &o[1], &base) || base < 0) return false;
  uint32_t n = insn->operand_count - 2;
  for (uint32_t i = 0; i < n;) {
    int64_t v = 0;
    bool k = known_val(b, &o[2 + i], &v);
    uint32_t j = i;
    while (j < n && known_val(b, &o[2 + j], &v) == k) ++j;
    if (!k)
      for (uint32_t q = i; q < j; ++q)
        if (!reg_ok(b->c, &o[2 + q])) return false;
    ro_insn_t *r = add(b,
                       k ? HALI_OP_HAL_COMMAND_BUFFER_PUSH_CONSTANTS
                         : HALI_OP_HAL_COMMAND_BUFFER_PUSH_CONSTANT_SLOTS,
                       2 + (j - i), insn->line);
    if (!r) return false;
    r->o[0] = (ro_operand_t){RO_CMD, 0};
    r->o[1] = (ro_operand_t){RO_I32, base + i};
    for (uint32_t q = i; q < j; ++q) {
      if (k) {
        known_val(b, &o[2 + q], &v);
        r->o[2 + q - i] = (ro_operand_t){RO_I32, (int32_t)v};
      } else {
        r->o[2 + q - i] = (ro_operand_t){RO_I32, cslot(b, o[2 + q].v)};
      }
    }
    i = j;
  }
  return true;
}

static bool build_insn(build_t *b, const hali_ir_insn_t *insn) {
  const hali_ir_operand_t *o = insn->operands;
  const uint32_t T = HALI_HAL_BUFFER_USAGE_TRANSFER,
                 D = HALI_HAL_BUFFER_USAGE_DISPATCH;
  ro_insn_t *r = NULL;
  switch (insn->op) {
    case HALI_OP_HAL_COMMAND_BUFFER_PUSH_CONSTANTS:
      return build_push_constants(b, insn);
    case HALI_OP_HAL_COMMAND_BUFFER_EXECUTION_BARRIER:
      r = add(b, insn->op, 1, insn->line);
      if (r) r->o[0] = (ro_operand_t){RO_CMD, 0};
      return r != NULL;
    case HALI_OP_HAL_COMMAND_BUFFER_PUSH_DESCRIPTOR_SET: {
      ro_operand_t ord, s, at, len;
      if (!int_operand(b, &o[1], &ord) || !int_operand(b, &o[4], &len) ||
          !place(b, &o[2], &o[3], &o[4], D, &s, &at))
        return false;
      r = add(b, insn->op, 5, insn->line);
      if (!r) return false;
      r->o[0] = (ro_operand_t){RO_CMD, 0};
      r->o[1] = ord, r->o[2] = s, r->o[3] = at, r->o[4] = len;
      return true;
    }
    case HALI_OP_HAL_COMMAND_BUFFER_DISPATCH: {
      uint32_t e = UINT32_MAX;
      for (uint32_t k = 0; k < b->w->m->executable_count; ++k)
        if (o[1].kind == HALI_IR_REG && b->w->exes[k] == o[1].v) e = k;
      ro_operand_t v[4];
      if (e == UINT32_MAX) return false;
      for (uint32_t k = 0; k < 4; ++k)
        if (!int_operand(b, &o[2 + k], &v[k])) return false;
      r = add(b, insn->op, 6, insn->line);
      if (!r) return false;
      r->o[0] = (ro_operand_t){RO_CMD, 0};
      r->o[1] = (ro_operand_t){RO_EXE, e};
      for (uint32_t k = 0; k < 4; ++k) r->o[2 + k] = v[k];
      return true;
    }
    case HALI_OP_HAL_COMMAND_BUFFER_FILL: {
      ro_operand_t s, at, len, plen, pat;
      if (!int_operand(b, &o[3], &len) || !int_operand(b, &o[5], &plen) ||
          !place(b, &o[1], &o[2], &o[3], T, &s, &at))
        return false;
      bool slot = !int_operand(b, &o[4], &pat);
      if (slot) {
        if (!reg_ok(b->c, &o[4])) return false;
        pat = (ro_operand_t){RO_I32, cslot(b, o[4].v)};
      }
      r = add(b, slot ? HALI_OP_HAL_COMMAND_BUFFER_FILL_SLOT : insn->op, 6,
              insn->line);
      if (!r) return false;
      r->o[0] = (ro_operand_t){RO_CMD, 0};
      r->o[1] = s, r->o[2] = at, r->o[3] = len, r->o[4] = pat, r->o[5] = plen;
      return true;
    }
    case HALI_OP_HAL_COMMAND_BUFFER_COPY: {
      ro_operand_t s1, a1, s2, a2, len;
      if (!int_operand(b, &o[5], &len) ||
          !place(b, &o[1], &o[2], &o[5], T, &s1, &a1) ||
          !place(b, &o[3], &o[4], &o[5], T, &s2, &a2))
        return false;
      r = add(b, insn->op, 6, insn->line);
      if (!r) return false;
      r->o[0] = (ro_operand_t){RO_CMD, 0};
      r->o[1] = s1, r->o[2] = a1, r->o[3] = s2, r->o[4] = a2, r->o[5] = len;
      return true;
    }
    case HALI_OP_HAL_COMMAND_BUFFER_UPDATE: {
      ro_operand_t so, s, at, len;
      if (o[1].kind != HALI_IR_RODATA || !int_operand(b, &o[2], &so) ||
          !int_operand(b, &o[5], &len) ||
          !place(b, &o[3], &o[4], &o[5], T, &s, &at))
        return false;
      r = add(b, insn->op, 6, insn->line);
      if (!r) return false;
      r->o[0] = (ro_operand_t){RO_CMD, 0};
      r->o[1] = (ro_operand_t){RO_RODATA, o[1].v};
      r->o[2] = so, r->o[3] = s, r->o[4] = at, r->o[5] = len;
      return true;
    }
    default:
      return false; /* collectives, ...: recorded per call */
  }
}

static void free_insns(ro_insn_t *v, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) hali_free(v[i].o);
  hali_free(v);
}

bool hali_s2h_record_once(lw_t *w) {
  ro_state_t *ro = w->ro;
  /* A list that ran out of memory is incomplete: leave it (and its flag,
   * which fails the lowering) alone. */
  if (!ro || ro->oom || !w->cmds.b.insn_count || w->cmds.oom || w->out.oom)
    return false;
  cv_t c;
  if (!cv_init(&c, w->f->reg_count)) {
    ro->oom = true;
    return false;
  }
  c.m = w->m;
  const hali_ir_block_t *out = &w->out.b;
  for (uint32_t i = 0; i < out->insn_count; ++i)
    cv_step(&c, &out->insns[i], i);
  build_t b = {.w = w, .c = &c};
  b.slots = hali_malloc(MAX_SLOTS * sizeof(bslot_t));
  bool ok = b.slots != NULL;
  for (uint32_t i = 0; ok && i < w->cmds.b.insn_count; ++i)
    ok = build_insn(&b, &w->cmds.b.insns[i]) && !b.fail;
  cv_free(&c);
  if (ok && ro->n == ro->cap) {
    uint32_t cap = ro->cap ? 2 * ro->cap : 4;
    ro_recording_t *v = hali_realloc(ro->v, cap * sizeof(*v));
    char **names = hali_realloc(ro->names, cap * sizeof(*names));
    if (v) ro->v = v;
    if (names) ro->names = names;
    if (v && names) ro->cap = cap;
    else ok = false, ro->oom = true;
  }
  ro_slot_t *slots = ok ? hali_malloc((b.nslots ? b.nslots : 1) *
                                      sizeof(ro_slot_t))
                        : NULL;
  char *name = NULL;
  if (ok && slots) {
    const char *fname = w->f->name ? w->f->name : "f";
    size_t len = strlen(fname) + 32;
    name = hali_malloc(len);
    if (name) snprintf(name, len, "%s$commands%u", fname, w->regions);
  }
  if (!ok || !slots || !name) {
    if (ok) ro->oom = true;
    hali_free(slots);
    hali_free(name);
    hali_free(b.slots);
    free_insns(b.insns, b.ninsns);
    return false;
  }
  for (uint32_t s = 0; s < b.nslots; ++s) slots[s] = b.slots[s].slot;
  uint32_t global = ro->first_global + ro->n;
  ro->names[ro->n] = name;
  ro->v[ro->n++] = (ro_recording_t){global, w->cats, w->line, slots,
                                    b.nslots, b.insns, b.ninsns};
  w->regions++;
  /* The call: bind the kept recording to this call's buffers. */
  uint32_t rec = hali_pass_reg(w->f, HALI_TYPE_COMMAND_BUFFER, "%s",
                               name);
  hali_pass_emit(&w->out, w->line, HALI_OP_GLOBAL_LOAD_REF, 2, hali_pr(rec),
                 hali_pref(HALI_IR_GLOBAL, global));
  hali_ir_insn_t *bind = NULL;
  uint32_t *entry = hali_malloc((b.nslots ? b.nslots : 1) * sizeof(uint32_t));
  if (!entry) {
    w->out.oom = true;
  } else {
    for (uint32_t s = 0; s < b.nslots; ++s) {
      entry[s] = b.slots[s].reg;
      if (b.slots[s].off == UINT32_MAX) continue;
      entry[s] = hali_pass_reg(w->f, HALI_TYPE_BUFFER, "%s.slot%u",
                               hali_s2h_rname(w, b.slots[s].reg), s);
      hali_pass_emit(&w->out, w->line, HALI_OP_HAL_BUFFER_SUBSPAN, 4,
                     hali_pr(entry[s]), hali_pr(b.slots[s].reg),
                     hali_pr(b.slots[s].off), hali_pr(b.slots[s].len));
    }
    bind = hali_pass_emit_open(&w->out, w->line, HALI_OP_HAL_COMMAND_BUFFER_BIND,
                               2 + b.nslots, 2, hali_pr(w->cmd), hali_pr(rec));
    for (uint32_t s = 0; s < b.nslots; ++s)
      hali_pass_set_operand(&w->out, bind, 2 + s, hali_pr(entry[s]));
    hali_free(entry);
  }
  if (b.ncregs) {
    hali_ir_insn_t *bc = hali_pass_emit_open(
        &w->out, w->line, HALI_OP_HAL_COMMAND_BUFFER_BIND_CONSTANTS,
        1 + b.ncregs, 1, hali_pr(w->cmd));
    for (uint32_t i = 0; i < b.ncregs; ++i)
      hali_pass_set_operand(&w->out, bc, 1 + i, hali_pr(b.cregs[i]));
  }
  hali_free(b.slots);
  /* The commands are the recording's now. */
  hali_pass_list_free(&w->cmds);
  memset(&w->cmds, 0, sizeof(w->cmds));
  return true;
}

/* ---- The storage initializer's part. */

typedef struct {
  uint8_t kind;
  int64_t v;
  uint32_t reg;
} cached_t;
typedef struct {
  hali_ir_func_t *f;
  hali_insn_list_t *l;
  hali_ir_module_t *m;
  cached_t cache[512];
  uint32_t ncache;
} emit_t;

static uint32_t const_reg(emit_t *e, uint8_t kind, int64_t v) {
  for (uint32_t i = 0; i < e->ncache; ++i)
    if (e->cache[i].kind == kind && e->cache[i].v == v) return e->cache[i].reg;
  uint32_t r = kind == RO_I64
                   ? hali_pass_reg(e->f, HALI_TYPE_I64, "c%lld_i64", (long long)v)
                   : hali_pass_reg(e->f, HALI_TYPE_I32, "c%lld", (long long)v);
  hali_pass_emit(e->l, 0, kind == RO_I64 ? HALI_OP_CONST_I64 : HALI_OP_CONST_I32,
                 2, hali_pr(r), hali_pk(e->m, v));
  if (e->ncache < sizeof(e->cache) / sizeof(e->cache[0]))
    e->cache[e->ncache++] = (cached_t){kind, v, r};
  return r;
}

/* The initializer's register holding global (|global|) or executable |id|,
 * loaded at its first use: |*pairs| (id, register) of |*n| remembers them.
 * UINT32_MAX (|l| marked out of memory) when the list cannot grow. */
static uint32_t init_ref_reg(hali_ir_func_t *f, hali_insn_list_t *l,
                             uint32_t line, uint32_t **pairs, uint32_t *n,
                             uint32_t id, bool global) {
  for (uint32_t j = 0; j < *n; ++j)
    if ((*pairs)[2 * j] == id) return (*pairs)[2 * j + 1];
  uint32_t *grown = hali_realloc(*pairs, 2 * (*n + 1) * sizeof(uint32_t));
  if (!grown) {
    l->oom = true;
    return UINT32_MAX;
  }
  *pairs = grown;
  uint32_t reg =
      global ? hali_pass_reg(f, HALI_TYPE_BUFFER, "global%u", id)
             : hali_pass_reg(f, HALI_TYPE_EXECUTABLE, "exe%u", id);
  if (global)
    hali_pass_emit(l, line, HALI_OP_GLOBAL_LOAD_REF, 2, hali_pr(reg),
                   hali_pref(HALI_IR_GLOBAL, id));
  else
    hali_pass_emit(l, line, HALI_OP_HAL_EXECUTABLE_GET, 2, hali_pr(reg),
                   hali_pref(HALI_IR_EXECUTABLE, id));
  grown[2 * *n] = id;
  grown[2 * *n + 1] = reg;
  ++*n;
  return reg;
}

void hali_s2h_emit_recordings(hali_ir_module_t *m, hali_ir_func_t *f,
                              hali_insn_list_t *l, uint32_t device,
                              const ro_state_t *ro) {
  emit_t *e = hali_calloc(1, sizeof(emit_t));
  if (!e) {
    l->oom = true;
    return;
  }
  e->f = f;
  e->l = l;
  e->m = m;
  uint32_t *exes = NULL, nexes = 0, *gl = NULL, ngl = 0;
  for (uint32_t k = 0; k < ro->n; ++k) {
    const ro_recording_t *rc = &ro->v[k];
    uint32_t *ph = hali_malloc((rc->nslots ? rc->nslots : 1) * sizeof(uint32_t));
    if (!ph) {
      l->oom = true;
      break;
    }
    for (uint32_t s = 0; s < rc->nslots; ++s) {
      ph[s] = hali_pass_reg(f, HALI_TYPE_BUFFER, "%s.slot%u", ro->names[k], s);
      /* One statement each: C leaves the order of a call's arguments
       * open, and the constants' order is the printed program's. */
      const uint32_t slot = const_reg(e, RO_I32, s);
      const uint32_t length =
          const_reg(e, RO_I64, (int64_t)rc->slots[s].length);
      const uint32_t memory = const_reg(e, RO_I32, 0);
      const uint32_t usage = const_reg(e, RO_I32, rc->slots[s].usage);
      hali_pass_emit(l, rc->line, HALI_OP_HAL_BUFFER_SLOT, 5, hali_pr(ph[s]),
                     hali_pr(slot), hali_pr(length), hali_pr(memory),
                     hali_pr(usage));
    }
    uint32_t cmd = hali_pass_reg(f, HALI_TYPE_COMMAND_BUFFER, "%s", ro->names[k]);
    const uint32_t reusable = const_reg(e, RO_I32, 0);
    const uint32_t cats = const_reg(e, RO_I32, rc->cats);
    hali_pass_emit(l, rc->line, HALI_OP_HAL_COMMAND_BUFFER_CREATE, 4,
                   hali_pr(cmd), hali_pr(device), hali_pr(reusable),
                   hali_pr(cats));
    for (uint32_t i = 0; i < rc->ninsns; ++i) {
      const ro_insn_t *in = &rc->insns[i];
      /* Operands first: their constants are emitted before the op. */
      hali_ir_operand_t *ops = hali_malloc((in->n ? in->n : 1) * sizeof(*ops));
      if (!ops) {
        l->oom = true;
        break;
      }
      for (uint32_t q = 0; q < in->n; ++q) {
        const ro_operand_t *o = &in->o[q];
        hali_ir_operand_t op = hali_pk(m, o->v);
        switch (o->kind) {
          case RO_I32:
          case RO_I64:
            op = hali_pr(const_reg(e, o->kind, o->v));
            break;
          case RO_SLOT:
            op = hali_pr(ph[o->v]);
            break;
          case RO_CMD:
            op = hali_pr(cmd);
            break;
          case RO_RODATA:
            op = hali_pref(HALI_IR_RODATA, (uint32_t)o->v);
            break;
          case RO_GLOBAL:
          case RO_EXE: {
            const bool global = o->kind == RO_GLOBAL;
            uint32_t reg = init_ref_reg(
                f, l, in->line, global ? &gl : &exes, global ? &ngl : &nexes,
                (uint32_t)o->v, global);
            if (reg != UINT32_MAX) op = hali_pr(reg);
            break;
          }
          default:
            break;
        }
        ops[q] = op;
      }
      hali_ir_insn_t *x = hali_pass_emit_open(l, in->line, in->op, in->n, 0);
      for (uint32_t q = 0; q < in->n; ++q) hali_pass_set_operand(l, x, q, ops[q]);
      hali_free(ops);
    }
    hali_pass_emit(l, rc->line, HALI_OP_HAL_COMMAND_BUFFER_FINALIZE, 1,
                   hali_pr(cmd));
    hali_pass_emit(l, rc->line, HALI_OP_GLOBAL_STORE_REF, 2,
                   hali_pref(HALI_IR_GLOBAL, rc->global), hali_pr(cmd));
    hali_free(ph);
  }
  hali_free(exes);
  hali_free(gl);
  hali_free(e);
}

void hali_s2h_ro_free(ro_state_t *ro) {
  for (uint32_t k = 0; k < ro->n; ++k) {
    hali_free(ro->v[k].slots);
    free_insns(ro->v[k].insns, ro->v[k].ninsns);
    hali_free(ro->names[k]);
  }
  hali_free(ro->v);
  hali_free(ro->names);
  memset(ro, 0, sizeof(*ro));
}

/* ---- Dropping what the bound regions left unread. */

static bool droppable(const hali_ir_insn_t *insn) {
  if (insn->op == HALI_OP_HAL_BUFFER_SUBSPAN) return true; /* the pass's */
  const hali_op_info_t *info = hali_op_info(insn->op);
  return info && !(info->flags & (HALI_OPF_SIDE | HALI_OPF_FAILS |
                                  HALI_OPF_TERM | HALI_OPF_SUSPEND |
                                  HALI_OPF_VARIADIC)) &&
         insn->op != HALI_OP_CALL;
}

void hali_s2h_drop_unused(hali_ir_func_t *f) {
  if (f->block_count != 1) return;
  hali_ir_block_t *blk = &f->blocks[0];
  uint32_t *reads = hali_calloc((size_t)f->reg_count + 1, sizeof(uint32_t));
  uint8_t *drop = hali_calloc((size_t)blk->insn_count + 1, 1);
  if (!reads || !drop) {
    hali_free(reads);
    hali_free(drop);
    return; /* only an optimization */
  }
  for (uint32_t i = 0; i < blk->insn_count; ++i) {
    const hali_ir_insn_t *in = &blk->insns[i];
    for (uint32_t k = 0; k < in->operand_count; ++k)
      if (in->operands[k].kind == HALI_IR_REG &&
          in->operands[k].v < f->reg_count && !hali_ir_operand_is_write(in, k))
        reads[in->operands[k].v]++;
  }
  /* Backwards: dropping a reader may leave its operands unread. */
  uint32_t dropped = 0;
  for (uint32_t i = blk->insn_count; i-- > 0;) {
    const hali_ir_insn_t *in = &blk->insns[i];
    if (!droppable(in)) continue;
    bool unread = true, writes = false;
    for (uint32_t k = 0; k < in->operand_count && unread; ++k)
      if (in->operands[k].kind == HALI_IR_REG &&
          hali_ir_operand_is_write(in, k)) {
        writes = true;
        unread = in->operands[k].v < f->reg_count &&
                 reads[in->operands[k].v] == 0 &&
                 in->operands[k].v >= f->param_count;
      }
    if (!writes || !unread) continue;
    drop[i] = 1;
    dropped++;
    for (uint32_t k = 0; k < in->operand_count; ++k)
      if (in->operands[k].kind == HALI_IR_REG &&
          in->operands[k].v < f->reg_count && !hali_ir_operand_is_write(in, k))
        reads[in->operands[k].v]--;
  }
  if (dropped) {
    hali_insn_list_t l = {0};
    for (uint32_t i = 0; i < blk->insn_count; ++i)
      if (!drop[i]) hali_pass_copy_insn(&l, &blk->insns[i], NULL);
    if (!l.oom) hali_ir_block_take(blk, &l.b);
    hali_pass_list_free(&l);
  }
  hali_free(reads);
  hali_free(drop);
}
