/* hali — IR construction, destruction and printing helpers. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "hal/buffer_view.h"
#include "base/alloc.h"
#include "vm/ir.h"
#include "vm/strmap.h"

static char *dup_bytes(const char *s, size_t len) {
  char *d = hali_malloc(len + 1);
  if (!d) return NULL;
  memcpy(d, s, len);
  d[len] = 0;
  return d;
}

/* Grows |*p| (elements of |size|) to hold at least |need|; false on OOM. */
static bool hali_grow(void **p, uint32_t *cap, uint32_t need, size_t size) {
  if (need <= *cap) return true;
  uint64_t n = *cap ? *cap : 4;
  while (n < need) n *= 2;
  if (n > UINT32_MAX) n = UINT32_MAX;
  uint64_t bytes;
  if (hali_mul_overflows_u64(n, size, &bytes) || bytes > SIZE_MAX) return false;
  void *q = hali_realloc(*p, (size_t)bytes);
  if (!q) return false;
  *p = q;
  *cap = (uint32_t)n;
  return true;
}

hali_ir_module_t *hali_ir_module_create(void) {
  return hali_calloc(1, sizeof(hali_ir_module_t));
}

static void hali_ir_xtypes_free(hali_ir_xtype_t *v, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) hali_free(v[i].dims);
  hali_free(v);
}

static void hali_ir_func_free_all(hali_ir_func_t *f);

/* Frees |p|, an array of |f|, unless it lives in one of f's blocks. */
static void func_array_free(const hali_ir_func_t *f, void *p) {
  if (p && !hali_ir_func_in_block(f, p)) hali_free(p);
}

/* hali_realloc for an array of |f| (|old_bytes| long) that may live in
 * one of f's blocks: such an array is copied out rather than resized. */
static void *func_array_realloc(const hali_ir_func_t *f, void *p,
                                size_t old_bytes, size_t bytes) {
  if (!p || !hali_ir_func_in_block(f, p)) return hali_realloc(p, bytes);
  void *q = hali_malloc(bytes);
  if (q) memcpy(q, p, old_bytes < bytes ? old_bytes : bytes);
  return q;
}

void hali_ir_func_free(hali_ir_func_t *f) { hali_ir_func_free_all(f); }

hali_type_t hali_ir_abi_type(hali_type_t t) {
  switch (t) {
  case HALI_TYPE_I32: return HALI_TYPE_I64;
  case HALI_TYPE_INDEX: return HALI_TYPE_I64;
  case HALI_TYPE_F32: return HALI_TYPE_F64;
  case HALI_TYPE_TENSOR: return HALI_TYPE_BUFFER_VIEW;
  default: return t;
  }
}

void hali_ir_func_clear(hali_ir_func_t *f) {
  char *name = f->name;
  f->name = NULL;
  hali_ir_func_free_all(f);
  memset(f, 0, sizeof(*f));
  f->name = name;
}

static void hali_ir_func_free_all(hali_ir_func_t *f) {
  for (uint32_t b = 0; b < f->block_count; ++b) {
    hali_ir_block_t *blk = &f->blocks[b];
    hali_ir_block_clear(blk);
    hali_ir_func_free_name(f, blk->name);
  }
  func_array_free(f, f->blocks);
  if (f->reg_names)
    for (uint32_t r = 0; r < f->reg_count; ++r)
      hali_ir_func_free_name(f, f->reg_names[r]);
  func_array_free(f, f->reg_names);
  func_array_free(f, f->reg_types);
  func_array_free(f, f->results);
  hali_free(f->name_block);
  hali_free(f->array_block);
  hali_free(f->name);
  if (f->reg_xtypes)
    for (uint32_t r = 0; r < f->reg_count; ++r) hali_free(f->reg_xtypes[r].dims);
  hali_free(f->reg_xtypes);
  if (f->result_xtypes)
    for (uint32_t r = 0; r < f->result_count; ++r)
      hali_free(f->result_xtypes[r].dims);
  hali_free(f->result_xtypes);
  hali_free(f->result_ties);
  hali_free(f->param_flags);
  for (uint32_t i = 0; i < f->attr_count; ++i) hali_free(f->attrs[i]);
  hali_free(f->attrs);
  if (f->reg_index) hali_strmap_free(f->reg_index);
  hali_free(f->reg_index);
}

void hali_ir_module_free(hali_ir_module_t *m) {
  if (!m) return;
  for (uint32_t i = 0; i < m->func_count; ++i) hali_ir_func_free_all(&m->funcs[i]);
  hali_free(m->funcs);
  for (uint32_t i = 0; i < m->rodata_count; ++i) {
    hali_free(m->rodata[i].name);
    hali_aligned_free(m->rodata[i].data);
  }
  hali_free(m->rodata);
  for (uint32_t i = 0; i < m->executable_count; ++i) {
    hali_ir_executable_t *e = &m->executables[i];
    for (uint32_t k = 0; k < e->export_count; ++k) {
      hali_ir_export_t *x = &e->exports[k];
      hali_free(x->name);
      hali_free(x->symbol);
      hali_ir_xtypes_free(x->params, x->param_count);
      hali_ir_xtypes_free(x->results, x->result_count);
    }
    hali_free(e->exports);
    hali_free(e->name);
    hali_free(e->format);
    hali_free(e->library);
    hali_free(e->if_device);
    hali_free(e->if_loader);
    for (uint32_t k = 0; k < e->variant_count; ++k) {
      hali_free(e->variants[k].format);
      hali_free(e->variants[k].library);
      hali_free(e->variants[k].if_device);
      hali_free(e->variants[k].if_loader);
    }
    hali_free(e->variants);
  }
  hali_free(m->executables);
  for (uint32_t i = 0; i < m->global_count; ++i) {
    hali_ir_global_t *g = &m->globals[i];
    hali_free(g->name);
    hali_free(g->xtype.dims);
    hali_free(g->param_scope);
    hali_free(g->param_key);
  }
  hali_free(m->globals);
  const char *arena = m->string_arena;
  for (uint32_t i = 0; i < m->string_count; ++i)
    if (!arena || (uintptr_t)m->strings[i] - (uintptr_t)arena >=
                      m->string_arena_size)
      hali_free(m->strings[i]);
  hali_free(m->string_arena);
  hali_free(m->strings);
  hali_free(m->string_lengths);
  hali_free(m->imm_pool);
  hali_free(m->name);
  hali_free(m->source);
  hali_free(m);
}

bool hali_ir_set_imm(hali_ir_module_t *m, hali_ir_operand_t *o, int64_t x) {
  o->kind = HALI_IR_IMM;
  o->reserved = 0;
  if (x == (int64_t)(int32_t)x) {
    o->imm_form = HALI_IR_IMM_S32;
    o->v = (uint32_t)x;
    return true;
  }
  if ((uint64_t)x <= UINT32_MAX) {
    o->imm_form = HALI_IR_IMM_U32;
    o->v = (uint32_t)x;
    return true;
  }
  o->imm_form = HALI_IR_IMM_POOL;
  o->v = UINT32_MAX;
  if (m->imm_pool_count == m->imm_pool_capacity) {
    /* UINT32_MAX stays free: it marks the entry that could not be made. */
    if (m->imm_pool_capacity >= UINT32_MAX / 2) return false;
    uint32_t cap = m->imm_pool_capacity ? 2 * m->imm_pool_capacity : 16;
    int64_t *p = hali_realloc(m->imm_pool, (size_t)cap * sizeof(*p));
    if (!p) return false;
    m->imm_pool = p;
    m->imm_pool_capacity = cap;
  }
  m->imm_pool[m->imm_pool_count] = x;
  o->v = m->imm_pool_count++;
  return true;
}

uint32_t hali_ir_module_intern(hali_ir_module_t *m, const char *s,
                               size_t len) {
  for (uint32_t i = 0; i < m->string_count; ++i)
    if (m->string_lengths[i] == len && memcmp(m->strings[i], s, len) == 0)
      return i;
  if (len > UINT32_MAX / 2) return UINT32_MAX;
  char **strings = hali_realloc(m->strings, (m->string_count + 1) * sizeof(char *));
  if (!strings) return UINT32_MAX;
  m->strings = strings;
  uint32_t *lengths =
      hali_realloc(m->string_lengths, (m->string_count + 1) * sizeof(uint32_t));
  if (!lengths) return UINT32_MAX;
  m->string_lengths = lengths;
  char *copy = dup_bytes(s, len);
  if (!copy) return UINT32_MAX;
  m->strings[m->string_count] = copy;
  m->string_lengths[m->string_count] = (uint32_t)len;
  return m->string_count++;
}

hali_ir_func_t *hali_ir_module_add_func(hali_ir_module_t *m, const char *name,
                                        size_t len) {
  hali_ir_func_t *funcs =
      hali_realloc(m->funcs, (m->func_count + 1) * sizeof(hali_ir_func_t));
  if (!funcs) return NULL;
  m->funcs = funcs;
  hali_ir_func_t *f = &m->funcs[m->func_count];
  memset(f, 0, sizeof(*f));
  f->name = dup_bytes(name, len);
  if (!f->name) return NULL;
  m->func_count++;
  return f;
}

uint32_t hali_rodata_kind_size(uint8_t kind) {
  static const uint8_t sizes[HALI_RODATA_KIND_COUNT] = {1, 1, 2, 4, 8, 4, 8};
  return kind < HALI_RODATA_KIND_COUNT ? sizes[kind] : 1;
}

const char *hali_rodata_kind_name(uint8_t kind) {
  static const char *const names[HALI_RODATA_KIND_COUNT] = {
      "bytes", "i8", "i16", "i32", "i64", "f32", "f64"};
  return kind < HALI_RODATA_KIND_COUNT ? names[kind] : "?";
}

hali_ir_rodata_t *hali_ir_module_add_rodata(hali_ir_module_t *m,
                                           const char *name, size_t len,
                                           uint8_t kind, const void *data,
                                           uint64_t size) {
  if (size > ((uint64_t)1 << 40)) return NULL;
  hali_ir_rodata_t *r =
      hali_realloc(m->rodata, (m->rodata_count + 1) * sizeof(hali_ir_rodata_t));
  if (!r) return NULL;
  m->rodata = r;
  hali_ir_rodata_t *d = &m->rodata[m->rodata_count];
  memset(d, 0, sizeof(*d));
  d->name = dup_bytes(name, len);
  size_t rounded = ((size_t)size + 63) & ~(size_t)63;
  d->data = hali_aligned_alloc(64, rounded ? rounded : 64);
  if (!d->name || !d->data) {
    hali_free(d->name);
    hali_aligned_free(d->data);
    return NULL;
  }
  memset(d->data, 0, rounded ? rounded : 64);
  if (data && size) memcpy(d->data, data, (size_t)size);
  d->kind = kind;
  d->size = size;
  m->rodata_count++;
  return d;
}

hali_ir_executable_t *hali_ir_module_add_executable(hali_ir_module_t *m,
                                                   const char *name,
                                                   size_t len) {
  hali_ir_executable_t *x = hali_realloc(
      m->executables, (m->executable_count + 1) * sizeof(hali_ir_executable_t));
  if (!x) return NULL;
  m->executables = x;
  hali_ir_executable_t *e = &m->executables[m->executable_count];
  memset(e, 0, sizeof(*e));
  e->name = dup_bytes(name, len);
  if (!e->name) return NULL;
  m->executable_count++;
  return e;
}

hali_ir_variant_t hali_ir_executable_variant(const hali_ir_executable_t *e,
                                             uint32_t i) {
  if (i == 0)
    return (hali_ir_variant_t){e->format, e->library, e->if_device,
                               e->if_loader};
  return e->variants[i - 1];
}

hali_ir_variant_t *hali_ir_executable_add_variant(hali_ir_executable_t *e) {
  hali_ir_variant_t *v = hali_realloc(
      e->variants, (e->variant_count + 1) * sizeof(hali_ir_variant_t));
  if (!v) return NULL;
  e->variants = v;
  memset(&v[e->variant_count], 0, sizeof(*v));
  return &v[e->variant_count++];
}

hali_ir_export_t *hali_ir_executable_add_export(hali_ir_executable_t *e,
                                               const char *name, size_t len) {
  hali_ir_export_t *x =
      hali_realloc(e->exports, (e->export_count + 1) * sizeof(hali_ir_export_t));
  if (!x) return NULL;
  e->exports = x;
  hali_ir_export_t *ex = &e->exports[e->export_count];
  memset(ex, 0, sizeof(*ex));
  ex->function = UINT32_MAX;
  ex->count_function = UINT32_MAX;
  ex->workgroup_size[0] = ex->workgroup_size[1] = ex->workgroup_size[2] = 1;
  ex->name = dup_bytes(name, len);
  if (!ex->name) return NULL;
  e->export_count++;
  return ex;
}

hali_ir_xtype_t *hali_ir_xtype_append(hali_ir_xtype_t **values,
                                      uint32_t *count) {
  hali_ir_xtype_t *x = hali_realloc(*values, (*count + 1) * sizeof(hali_ir_xtype_t));
  if (!x) return NULL;
  *values = x;
  memset(&x[*count], 0, sizeof(x[0]));
  return &x[(*count)++];
}

uint32_t hali_ir_call_params(uint16_t op, const hali_ir_func_t *callee,
                             const hali_type_t **out_types) {
  static const hali_type_t fence[1] = {HALI_TYPE_FENCE};
  if (op == HALI_OP_FIBER_JOIN) {
    *out_types = fence;
    return 1;
  }
  *out_types = callee->reg_types;
  return callee->param_count;
}

uint32_t hali_ir_call_results(uint16_t op, const hali_ir_func_t *callee,
                              const hali_type_t **out_types) {
  static const hali_type_t fence[1] = {HALI_TYPE_FENCE};
  if (op == HALI_OP_FIBER_SPAWN) {
    *out_types = fence;
    return 1;
  }
  *out_types = callee->results;
  return callee->result_count;
}

void hali_ir_export_interface(const hali_ir_export_t *e,
                              uint32_t *out_bindings, uint32_t *out_constants) {
  uint32_t bindings = e->result_count, constants = 0;
  for (uint32_t i = 0; i < e->param_count; ++i) {
    hali_type_t t = e->params[i].type;
    if (t == HALI_TYPE_NONE) bindings++;
    else constants += (t == HALI_TYPE_I64 || t == HALI_TYPE_F64) ? 2 : 1;
    /* index: one 32-bit word, like i32. */
  }
  *out_bindings = bindings;
  *out_constants = constants;
}

int32_t hali_ir_module_find_func(const hali_ir_module_t *m, const char *name) {
  for (uint32_t i = 0; i < m->func_count; ++i)
    if (strcmp(m->funcs[i].name, name) == 0) return (int32_t)i;
  return -1;
}

/* The room the register arrays of |f| have (vm/ir.h, reg_capacity). */
static uint32_t reg_room(const hali_ir_func_t *f) {
  return f->reg_capacity > f->reg_count ? f->reg_capacity : f->reg_count;
}

/* Gives every register array of |f| room for |need| entries, doubling; on
 * OOM false, with f->reg_capacity still true of every array (those that
 * grew only have more room than it says). */
static bool reg_grow(hali_ir_func_t *f, uint32_t need) {
  uint32_t have = reg_room(f);
  f->reg_capacity = have;
  if (need <= have) return true;
  uint64_t cap = have < 8 ? 8 : 2 * (uint64_t)have;
  if (cap < need) cap = need;
  if (cap > UINT32_MAX) cap = UINT32_MAX;
  /* cap < 2^32 and each entry is at most a few dozen bytes: no product
   * below wraps 64 bits, but it may exceed what size_t holds. */
  if (cap * sizeof(hali_ir_xtype_t) > SIZE_MAX) return false;
  hali_type_t *types =
      func_array_realloc(f, f->reg_types, have, (size_t)cap);
  if (!types) return false;
  f->reg_types = types;
  if (f->reg_names) {
    char **names = func_array_realloc(f, f->reg_names, have * sizeof(char *),
                                      (size_t)cap * sizeof(char *));
    if (!names) return false;
    f->reg_names = names;
  }
  if (f->reg_xtypes) {
    hali_ir_xtype_t *x =
        hali_realloc(f->reg_xtypes, (size_t)cap * sizeof(hali_ir_xtype_t));
    if (!x) return false;
    f->reg_xtypes = x;
  }
  f->reg_capacity = (uint32_t)cap;
  return true;
}

uint32_t hali_ir_func_add_reg(hali_ir_func_t *f, hali_type_t type,
                              const char *name, size_t len) {
  uint32_t n = f->reg_count;
  if (n == UINT32_MAX || !reg_grow(f, n + 1)) return UINT32_MAX;
  /* A stripped function (registers but no names) stays stripped unless
   * this register has a name; then the earlier ones get NULL names. */
  if (!f->reg_names && (!n || name)) {
    f->reg_names = hali_calloc(reg_room(f), sizeof(char *));
    if (!f->reg_names) return UINT32_MAX;
  }
  char *copy = NULL;
  if (name && !(copy = dup_bytes(name, len))) return UINT32_MAX;
  /* Nothing below can fail: the name is owned from here on. */
  f->reg_types[n] = type;
  if (f->reg_names) f->reg_names[n] = copy;
  if (f->reg_xtypes) memset(&f->reg_xtypes[n], 0, sizeof(f->reg_xtypes[0]));
  f->reg_count = n + 1;
  return n;
}

void hali_ir_func_free_name(const hali_ir_func_t *f, char *name) {
  if (name && !hali_ir_func_name_in_block(f, name)) hali_free(name);
}

/* The register-name index (pass_util) holds reg_names' strings as keys:
 * renaming or stripping a register invalidates it. */
static void reg_index_reset(hali_ir_func_t *f) {
  if (f->reg_index) hali_strmap_clear(f->reg_index);
  f->reg_index_count = 0;
}

bool hali_ir_func_set_reg_name(hali_ir_func_t *f, uint32_t r,
                               const char *name, size_t len) {
  if (r >= f->reg_count) return false;
  if (!f->reg_names && !name) return true;
  char *copy = NULL;
  if (name && !(copy = dup_bytes(name, len))) return false;
  if (!f->reg_names && !(f->reg_names = hali_calloc(reg_room(f), sizeof(char *)))) {
    hali_free(copy);
    return false;
  }
  hali_ir_func_free_name(f, f->reg_names[r]);
  f->reg_names[r] = copy;
  reg_index_reset(f);
  return true;
}

bool hali_ir_func_set_block_name(hali_ir_func_t *f, uint32_t b,
                                 const char *name, size_t len) {
  if (b >= f->block_count) return false;
  char *copy = NULL;
  if (name && !(copy = dup_bytes(name, len))) return false;
  hali_ir_func_free_name(f, f->blocks[b].name);
  f->blocks[b].name = copy;
  return true;
}

void hali_ir_func_strip_names(hali_ir_func_t *f) {
  if (f->reg_names)
    for (uint32_t r = 0; r < f->reg_count; ++r)
      hali_ir_func_free_name(f, f->reg_names[r]);
  func_array_free(f, f->reg_names);
  f->reg_names = NULL;
  for (uint32_t b = 0; b < f->block_count; ++b) {
    hali_ir_func_free_name(f, f->blocks[b].name);
    f->blocks[b].name = NULL;
  }
  hali_free(f->name_block);
  f->name_block = NULL;
  f->name_block_size = 0;
  reg_index_reset(f);
}

bool hali_ir_func_set_reg_xtype(hali_ir_func_t *f, uint32_t r,
                                const hali_ir_xtype_t *x) {
  if (!f->reg_xtypes) {
    f->reg_xtypes = hali_calloc(reg_room(f) ? reg_room(f) : 1,
                                sizeof(hali_ir_xtype_t));
    if (!f->reg_xtypes) return false;
  }
  hali_free(f->reg_xtypes[r].dims);
  f->reg_xtypes[r].dims = NULL;
  return hali_ir_xtype_copy(&f->reg_xtypes[r], x);
}

bool hali_ir_func_add_attr(hali_ir_func_t *f, const char *s, size_t len) {
  char **a = hali_realloc(f->attrs, (f->attr_count + 1) * sizeof(char *));
  if (!a) return false;
  f->attrs = a;
  if (!(a[f->attr_count] = dup_bytes(s, len))) return false;
  f->attr_count++;
  return true;
}

hali_ir_lists_result_t hali_ir_op_lists(const hali_ir_insn_t *insn,
                                        hali_ir_lists_t *out) {
  const hali_op_info_t *info = hali_op_info(insn->op);
  uint32_t n = insn->operand_count;
  if (!info || n < info->operand_count) return HALI_IR_LISTS_BAD;
  const hali_ir_operand_t *o = insn->operands;
  int64_t count[HALI_OP_MAX_LISTS];
  for (unsigned i = 0; i < info->list_count; ++i) {
    unsigned c = info->lists[i].count;
    if (c == HALI_LIST_REST) continue;
    if (c >= info->operand_count || o[c].kind != HALI_IR_IMM)
      return HALI_IR_LISTS_BAD;
    /* A count is at most |n|: one in the module's pool is not. */
    count[i] = hali_ir_imm_small(&o[c]);
    if (count[i] < 0 || count[i] > (int64_t)n) return HALI_IR_LISTS_BAD;
  }
  /* Each length is at most n < 2^32 and there are at most
   * HALI_OP_MAX_LISTS of them, so the sum does not wrap. */
  uint64_t end = info->operand_count;
  for (unsigned i = 0; i < info->list_count; ++i)
    if (info->lists[i].count != HALI_LIST_REST) end += (uint64_t)count[i];
  if (end > UINT32_MAX) return HALI_IR_LISTS_BAD;
  bool fits = end <= n;
  uint32_t at = info->operand_count;
  out->count_total = info->list_count;
  for (unsigned i = 0; i < info->list_count; ++i) {
    out->start[i] = at;
    if (info->lists[i].count == HALI_LIST_REST)
      out->count[i] = fits ? n - (uint32_t)end : 0;
    else
      out->count[i] = (uint32_t)count[i];
    at += out->count[i];
  }
  return fits ? HALI_IR_LISTS_FIT : HALI_IR_LISTS_SHORT;
}

bool hali_ir_dispatch_lists(const hali_ir_insn_t *insn,
                            hali_ir_dispatch_t *out) {
  hali_ir_lists_t l;
  hali_ir_lists_result_t r = hali_ir_op_lists(insn, &l);
  if (r == HALI_IR_LISTS_BAD || l.count_total != 5) return false;
  out->workload = l.start[0];
  out->nworkload = l.count[0];
  out->operands = l.start[1];
  out->noperands = l.count[1];
  out->results = l.start[2];
  out->nresults = l.count[2];
  out->ties = l.start[3];
  out->dims = l.start[4];
  return r == HALI_IR_LISTS_FIT;
}

uint8_t hali_ir_operand_role(const hali_ir_insn_t *insn, uint32_t k) {
  const hali_op_info_t *info = hali_op_info(insn->op);
  if (!info || k >= insn->operand_count) return 0;
  if (hali_op_is_call(insn->op))
    return k == 0          ? HALI_ROLE_FUNC
           : k > insn->aux ? HALI_ROLE_WRITE
                           : HALI_ROLE_READ;
  if (insn->op == HALI_OP_RETURN) return HALI_ROLE_READ;
  if (k < info->operand_count) return info->operands[k].role;
  if (!info->list_count) /* a variadic tail */
    return info->tail == 'b' ? HALI_ROLE_BLOCK : HALI_ROLE_READ;
  hali_ir_lists_t l;
  if (hali_ir_op_lists(insn, &l) != HALI_IR_LISTS_FIT) return 0;
  for (unsigned i = 0; i < l.count_total; ++i)
    if (k >= l.start[i] && k - l.start[i] < l.count[i])
      return info->lists[i].role;
  return 0;
}

/* Per opcode, which fixed operands an instruction writes (bit k: operand
 * k), for the ops whose roles come from their signature alone (no call
 * shape, not return, no counted lists: |simple|); built once.  The
 * encoder asks hali_ir_operand_is_write of every operand of a module, and
 * the table answers without the op lookup and role walk of
 * hali_ir_operand_role (which answers the rest). */
typedef struct {
  uint16_t writes;
  bool simple;
} op_writes_t;
static op_writes_t op_writes[HALI_OP_COUNT];
static atomic_bool op_writes_ready;
static pthread_once_t op_writes_once = PTHREAD_ONCE_INIT;

static void op_writes_init(void) {
  _Static_assert(HALI_OP_MAX_OPERANDS <= 16, "op_writes_t.writes is 16 bits");
  for (unsigned op = 0; op < HALI_OP_COUNT; ++op) {
    const hali_op_info_t *info = hali_op_info(op);
    op_writes_t *w = &op_writes[op];
    w->simple = info && !hali_op_is_call((uint16_t)op) &&
                op != HALI_OP_RETURN && !info->list_count;
    for (unsigned k = 0; w->simple && k < info->operand_count; ++k)
      if (info->operands[k].role == HALI_ROLE_WRITE)
        w->writes |= (uint16_t)(1u << k);
  }
  atomic_store_explicit(&op_writes_ready, true, memory_order_release);
}

bool hali_ir_operand_is_write(const hali_ir_insn_t *insn, uint32_t k) {
  if (k >= insn->operand_count || insn->operands[k].kind != HALI_IR_REG)
    return false;
  if (!atomic_load_explicit(&op_writes_ready, memory_order_acquire))
    pthread_once(&op_writes_once, op_writes_init);
  if (insn->op < HALI_OP_COUNT && op_writes[insn->op].simple)
    /* A tail operand (past the fixed ones) is read or a block. */
    return k < HALI_OP_MAX_OPERANDS && ((op_writes[insn->op].writes >> k) & 1);
  return hali_ir_operand_role(insn, k) == HALI_ROLE_WRITE;
}

uint32_t hali_ir_xtype_dynamic_dims(const hali_ir_xtype_t *x) {
  uint32_t n = 0;
  for (uint32_t d = 0; d < x->rank; ++d) n += x->dims[d] < 0;
  return n;
}

bool hali_ir_xtype_static_bytes(const hali_ir_xtype_t *x, uint64_t *out_bytes,
                                uint32_t *out_dim) {
  uint64_t n = 1;
  *out_bytes = 0;
  *out_dim = 0;
  for (uint32_t d = 0; d < x->rank; ++d)
    if (x->dims[d] == 0) return true; /* empty, whatever the others are */
  for (uint32_t d = 0; d < x->rank; ++d) {
    if (x->dims[d] < 0) continue; /* dynamic */
    if (__builtin_mul_overflow(n, (uint64_t)x->dims[d], &n)) {
      *out_dim = d;
      return false;
    }
  }
  uint64_t size = hali_hal_element_type_byte_size(x->element_type);
  if (__builtin_mul_overflow(n, size, &n)) {
    *out_dim = x->rank;
    return false;
  }
  *out_bytes = n;
  return true;
}

bool hali_ir_xtype_copy(hali_ir_xtype_t *dst, const hali_ir_xtype_t *src) {
  *dst = *src;
  dst->dims = NULL;
  if (!src->rank) return true;
  dst->dims = hali_malloc(src->rank * sizeof(int64_t));
  if (!dst->dims) {
    dst->rank = 0;
    return false;
  }
  memcpy(dst->dims, src->dims, src->rank * sizeof(int64_t));
  return true;
}

bool hali_ir_xtype_equal(const hali_ir_xtype_t *a, const hali_ir_xtype_t *b) {
  if (a->type != b->type) return false;
  if (a->type != HALI_TYPE_NONE) return true;
  return a->element_type == b->element_type && a->rank == b->rank &&
         (!a->rank || memcmp(a->dims, b->dims, a->rank * sizeof(int64_t)) == 0);
}

bool hali_ir_func_is_tensor_level(const hali_ir_func_t *f) {
  for (uint32_t r = 0; r < f->reg_count; ++r)
    if (f->reg_types[r] == HALI_TYPE_TENSOR ||
        f->reg_types[r] == HALI_TYPE_INDEX)
      return true;
  for (uint32_t r = 0; r < f->result_count; ++r)
    if (f->results[r] == HALI_TYPE_TENSOR || f->results[r] == HALI_TYPE_INDEX)
      return true;
  for (uint32_t b = 0; b < f->block_count; ++b)
    for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i) {
      const hali_op_info_t *info = hali_op_info(f->blocks[b].insns[i].op);
      if (info && (info->flags & HALI_OPF_TENSOR)) return true;
    }
  return false;
}

bool hali_ir_module_is_tensor_level(const hali_ir_module_t *m) {
  for (uint32_t i = 0; i < m->func_count; ++i)
    if (hali_ir_func_is_tensor_level(&m->funcs[i])) return true;
  return false;
}

hali_ir_block_t *hali_ir_func_add_block(hali_ir_func_t *f, const char *name,
                                        size_t len) {
  if (f->block_count == UINT32_MAX) return NULL;
  hali_ir_block_t *blocks = func_array_realloc(
      f, f->blocks, (size_t)f->block_count * sizeof(hali_ir_block_t),
      ((size_t)f->block_count + 1) * sizeof(hali_ir_block_t));
  if (!blocks) return NULL;
  f->blocks = blocks;
  hali_ir_block_t *b = &f->blocks[f->block_count];
  memset(b, 0, sizeof(*b));
  if (name) {
    b->name = dup_bytes(name, len);
    if (!b->name) return NULL;
  }
  f->block_count++;
  return b;
}

/* A chunk of operand slots (vm/ir.h): allocated whole, never moved. */
struct hali_ir_operand_chunk_s {
  struct hali_ir_operand_chunk_s *next;
  uint32_t capacity, used;
  hali_ir_operand_t slots[];
};

/* The largest chunk grown geometrically (32 KiB of operands): bigger ones
 * only for one instruction that needs more. */
#define HALI_IR_CHUNK_MAX 4096u

/* |n| (> 0) uninitialised operand slots from |b|'s chunks; NULL on OOM. */
static hali_ir_operand_t *operands_alloc(hali_ir_block_t *b, uint32_t n) {
  struct hali_ir_operand_chunk_s *c = b->operand_chunks;
  if (c && c->capacity - c->used >= n) {
    hali_ir_operand_t *o = c->slots + c->used;
    c->used += n;
    return o;
  }
  /* Chunks double (a reader that sized |insns| from a count starts at
   * about three operands an instruction), so a block of N instructions
   * makes O(log N) allocations, then one per HALI_IR_CHUNK_MAX slots.  The
   * first is small: a block of a few instructions wastes little, and its
   * chunks stay in malloc's fast small sizes (under 1 KiB). */
  uint64_t cap = c ? 2 * (uint64_t)c->capacity : 16;
  if (!c && 3 * (uint64_t)b->insn_capacity > cap)
    cap = 3 * (uint64_t)b->insn_capacity;
  if (cap > HALI_IR_CHUNK_MAX) cap = HALI_IR_CHUNK_MAX;
  if (cap < n) cap = n;
  uint64_t bytes;
  if (hali_mul_overflows_u64(cap, sizeof(hali_ir_operand_t), &bytes) ||
      hali_add_overflows_u64(bytes, sizeof(*c), &bytes) || bytes > SIZE_MAX)
    return NULL;
  struct hali_ir_operand_chunk_s *nc = hali_malloc((size_t)bytes);
  if (!nc) return NULL;
  nc->capacity = (uint32_t)cap;
  nc->used = n;
  nc->next = c;
  b->operand_chunks = nc;
  return nc->slots;
}

static void chunks_free(struct hali_ir_operand_chunk_s *c) {
  while (c) {
    struct hali_ir_operand_chunk_s *next = c->next;
    hali_free(c);
    c = next;
  }
}

static int cmp_name_keys(const void *a, const void *b) {
  const hali_ir_name_key_t *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = n ? memcmp(x->name, y->name, n) : 0;
  if (!c) c = (x->len > y->len) - (x->len < y->len);
  return c ? c : (x->index > y->index) - (x->index < y->index);
}

void hali_ir_sort_name_keys(hali_ir_name_key_t *keys, hali_ir_name_key_t *tmp,
                            uint32_t n) {
  hali_ir_name_key_t *a = keys, *t = tmp;
  for (unsigned shift = 0; shift < 32; shift += 8) {
    uint32_t count[257] = {0}; /* then where each byte value's keys go */
    for (uint32_t k = 0; k < n; ++k)
      count[((a[k].hash >> shift) & 0xff) + 1]++;
    for (unsigned d = 0; d < 256; ++d) count[d + 1] += count[d];
    for (uint32_t k = 0; k < n; ++k)
      t[count[(a[k].hash >> shift) & 0xff]++] = a[k];
    hali_ir_name_key_t *x = a;
    a = t;
    t = x;
  }
  /* Four passes (even): the keys are back in |keys|, sorted by hash and,
   * the sort being stable, by index within a hash. */
  for (uint32_t k = 0; k < n;) {
    uint32_t end = k + 1;
    while (end < n && keys[end].hash == keys[k].hash) ++end;
    if (end - k > 2 ||
        (end - k == 2 && !hali_ir_name_keys_equal(&keys[k], &keys[k + 1])))
      qsort(keys + k, end - k, sizeof(keys[0]), cmp_name_keys);
    k = end;
  }
}

uint32_t hali_ir_block_chunk_count(const hali_ir_block_t *b) {
  uint32_t n = 0;
  for (const struct hali_ir_operand_chunk_s *c = b->operand_chunks; c;
       c = c->next)
    n++;
  return n;
}

void hali_ir_block_clear(hali_ir_block_t *b) {
  chunks_free(b->operand_chunks);
  hali_free(b->insns);
  b->operand_chunks = NULL;
  b->insns = NULL;
  b->insn_count = b->insn_capacity = 0;
}

void hali_ir_block_take(hali_ir_block_t *dst, hali_ir_block_t *src) {
  hali_ir_block_clear(dst);
  dst->insns = src->insns;
  dst->insn_count = src->insn_count;
  dst->insn_capacity = src->insn_capacity;
  dst->operand_chunks = src->operand_chunks;
  src->insns = NULL;
  src->insn_count = src->insn_capacity = 0;
  src->operand_chunks = NULL;
}

bool hali_ir_block_append(hali_ir_block_t *dst, hali_ir_block_t *src) {
  if (!src->insn_count) {
    hali_ir_block_clear(src);
    return true;
  }
  if (!dst->insn_count && !dst->operand_chunks) {
    hali_ir_block_take(dst, src);
    return true;
  }
  uint64_t need = (uint64_t)dst->insn_count + src->insn_count;
  if (need > UINT32_MAX ||
      !hali_grow((void **)&dst->insns, &dst->insn_capacity, (uint32_t)need,
                 sizeof(hali_ir_insn_t)))
    return false;
  memcpy(dst->insns + dst->insn_count, src->insns,
         (size_t)src->insn_count * sizeof(hali_ir_insn_t));
  dst->insn_count = (uint32_t)need;
  /* Adopt the chunks behind dst's newest one, which keeps serving new
   * operands. */
  struct hali_ir_operand_chunk_s *tail = src->operand_chunks;
  if (tail) {
    while (tail->next) tail = tail->next;
    if (dst->operand_chunks) {
      tail->next = dst->operand_chunks->next;
      dst->operand_chunks->next = src->operand_chunks;
    } else {
      dst->operand_chunks = src->operand_chunks;
    }
  }
  src->operand_chunks = NULL;
  hali_free(src->insns);
  src->insns = NULL;
  src->insn_count = src->insn_capacity = 0;
  return true;
}

bool hali_ir_insn_resize(hali_ir_block_t *b, hali_ir_insn_t *insn,
                         uint32_t n) {
  if (n <= insn->operand_count) {
    insn->operand_count = n;
    return true;
  }
  hali_ir_operand_t *o = operands_alloc(b, n);
  if (!o) return false;
  if (insn->operand_count)
    memcpy(o, insn->operands, insn->operand_count * sizeof(*o));
  memset(o + insn->operand_count, 0,
         (size_t)(n - insn->operand_count) * sizeof(*o));
  insn->operands = o;
  insn->operand_count = n;
  return true;
}

hali_ir_insn_t *hali_ir_block_add_insn(hali_ir_block_t *b, uint16_t op,
                                       uint32_t operand_count) {
  if (!hali_grow((void **)&b->insns, &b->insn_capacity, b->insn_count + 1,
                 sizeof(hali_ir_insn_t)))
    return NULL;
  hali_ir_insn_t *insn = &b->insns[b->insn_count];
  memset(insn, 0, sizeof(*insn));
  insn->op = op;
  if (operand_count) {
    insn->operands = operands_alloc(b, operand_count);
    if (!insn->operands) return NULL;
    memset(insn->operands, 0, operand_count * sizeof(hali_ir_operand_t));
  }
  insn->operand_count = operand_count;
  b->insn_count++;
  return insn;
}

size_t hali_name_length(const char *s) {
  if (!s) return 0;
  const char *p = s;
  for (; *p; ++p)
    if (!hali_name_char(*p)) return 0;
  return (size_t)(p - s);
}

bool hali_name_valid(const char *s) {
  if (!s || !*s) return false;
  for (; *s; ++s)
    if (!hali_name_char(*s)) return false;
  return true;
}

hali_ir_global_t *hali_ir_module_add_global(hali_ir_module_t *m,
                                           const char *name, size_t len) {
  if (m->global_count >= UINT32_MAX / 2) return NULL;
  hali_ir_global_t *g =
      hali_realloc(m->globals, (m->global_count + 1) * sizeof(hali_ir_global_t));
  if (!g) return NULL;
  m->globals = g;
  g = &m->globals[m->global_count];
  memset(g, 0, sizeof(*g));
  g->name = hali_strndup(name, len);
  if (!g->name) return NULL;
  m->global_count++;
  return g;
}

int32_t hali_ir_module_find_global(const hali_ir_module_t *m,
                                   const char *name) {
  for (uint32_t i = 0; i < m->global_count; ++i)
    if (strcmp(m->globals[i].name, name) == 0) return (int32_t)i;
  return -1;
}

bool hali_ir_func_has_attr(const hali_ir_func_t *f, const char *attr) {
  for (uint32_t i = 0; i < f->attr_count; ++i)
    if (strcmp(f->attrs[i], attr) == 0) return true;
  return false;
}
