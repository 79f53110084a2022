/* hali — writing .hbc (layout in loader/hbc.h and doc/format.md). */
#include <stdlib.h>
#include <string.h>

#include "loader/hbc.h"
#include "base/alloc.h"
#include "loader/loader.h"
#include "vm/strmap.h"

typedef struct {
  uint8_t *data;
  size_t len, cap;
  bool oom;
} wbuf_t;

static void put(wbuf_t *w, const void *p, size_t n) {
  if (w->oom) return;
  if (w->len + n > w->cap) {
    size_t cap = w->cap ? w->cap : 1024;
    while (cap < w->len + n) cap *= 2;
    uint8_t *d = hali_realloc(w->data, cap);
    if (!d) {
      w->oom = true;
      return;
    }
    w->data = d;
    w->cap = cap;
  }
  memcpy(w->data + w->len, p, n);
  w->len += n;
}
static void put_u8(wbuf_t *w, uint8_t v) { put(w, &v, 1); }
static void put_u16(wbuf_t *w, uint16_t v) {
  uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
  put(w, b, 2);
}
static void put_u32(wbuf_t *w, uint32_t v) {
  uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                  (uint8_t)(v >> 24)};
  put(w, b, 4);
}
static void put_u64(wbuf_t *w, uint64_t v) {
  put_u32(w, (uint32_t)v);
  put_u32(w, (uint32_t)(v >> 32));
}
static void patch_u32(wbuf_t *w, size_t at, uint32_t v) {
  if (w->oom) return;
  uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                  (uint8_t)(v >> 24)};
  memcpy(w->data + at, b, 4);
}

/* A string table: the module's strings first (string operands keep their
 * indices), then names the sections need. */
typedef struct {
  const char **s;
  uint32_t *len;
  uint32_t n, cap;
  bool oom;
  hali_strmap_t index; /* string -> its entry, so that adding is O(1) */
} stab_t;

static uint32_t stab_add(stab_t *t, const char *s, size_t len) {
  uint32_t i = hali_strmap_insert(&t->index, s, len, t->n);
  if (i == HALI_STRMAP_NONE) {
    t->oom = true;
    return 0;
  }
  if (i != t->n) return i;
  if (t->n == t->cap) {
    uint32_t cap = t->cap ? t->cap * 2 : 64;
    const char **ns = hali_realloc(t->s, cap * sizeof(*ns));
    if (!ns) {
      t->oom = true;
      return 0;
    }
    t->s = ns;
    uint32_t *nl = hali_realloc(t->len, cap * sizeof(*nl));
    if (!nl) {
      t->oom = true;
      return 0;
    }
    t->len = nl;
    t->cap = cap;
  }
  t->s[t->n] = s;
  t->len[t->n] = (uint32_t)len;
  return t->n++;
}
static uint32_t stab_name(stab_t *t, const char *s) {
  return s ? stab_add(t, s, strlen(s)) : HALI_HBC_NONE;
}

static void write_insn(wbuf_t *w, const hali_ir_module_t *m,
                       const hali_ir_insn_t *insn) {
  const hali_op_info_t *info = hali_op_info(insn->op);
  put_u16(w, insn->op);
  if (info->flags & HALI_OPF_TENSOR) {
    /* Tensor ops: a generic operand list (u32 count, then u8 kind and
     * u64 value each). */
    put_u32(w, insn->operand_count);
    for (uint32_t i = 0; i < insn->operand_count; ++i) {
      const hali_ir_operand_t *o = &insn->operands[i];
      put_u8(w, o->kind);
      put_u64(w, o->kind == HALI_IR_IMM ? (uint64_t)hali_ir_imm(m, o) : o->v);
    }
    return;
  }
  if (hali_op_is_call(insn->op)) {
    put_u32(w, insn->operands[0].v);
    put_u16(w, insn->aux);
    put_u16(w, (uint16_t)(insn->operand_count - 1 - insn->aux));
    for (uint32_t i = 1; i < insn->operand_count; ++i)
      put_u16(w, (uint16_t)insn->operands[i].v);
    return;
  }
  if (insn->op == HALI_OP_RETURN) {
    put_u16(w, (uint16_t)insn->operand_count);
    for (uint32_t i = 0; i < insn->operand_count; ++i)
      put_u16(w, (uint16_t)insn->operands[i].v);
    return;
  }
  for (uint32_t i = 0; i < info->operand_count; ++i) {
    const hali_operand_desc_t *d = &info->operands[i];
    const hali_ir_operand_t *o = &insn->operands[i];
    switch (d->role) {
    case HALI_ROLE_READ:
    case HALI_ROLE_WRITE:
    case HALI_ROLE_BLOCK:
      put_u16(w, (uint16_t)o->v);
      break;
    case HALI_ROLE_STRING:
    case HALI_ROLE_FUNC:
    case HALI_ROLE_RODATA:
    case HALI_ROLE_EXECUTABLE:
    case HALI_ROLE_GLOBAL:
      put_u32(w, o->v);
      break;
    case HALI_ROLE_IMM:
      if (d->type == HALI_TYPE_I64 || d->type == HALI_TYPE_F64)
        put_u64(w, (uint64_t)hali_ir_imm(m, o));
      else
        put_u32(w, (uint32_t)hali_ir_imm(m, o));
      break;
    }
  }
  if (info->tail) {
    put_u16(w, (uint16_t)(insn->operand_count - info->operand_count));
    for (uint32_t i = info->operand_count; i < insn->operand_count; ++i)
      put_u16(w, (uint16_t)insn->operands[i].v);
  }
}

static void write_xtypes(wbuf_t *w, const hali_ir_xtype_t *v, uint32_t n) {
  put_u32(w, n);
  for (uint32_t i = 0; i < n; ++i) {
    put_u8(w, v[i].type);
    if (v[i].type != HALI_TYPE_NONE) continue;
    put_u32(w, v[i].element_type);
    put_u32(w, v[i].rank);
    for (uint32_t d = 0; d < v[i].rank; ++d) put_u64(w, (uint64_t)v[i].dims[d]);
  }
}

static void write_xtype(wbuf_t *w, const hali_ir_xtype_t *x) {
  put_u8(w, x->type);
  if (x->type != HALI_TYPE_NONE) return;
  put_u32(w, x->element_type);
  put_u32(w, x->rank);
  for (uint32_t d = 0; d < x->rank; ++d) put_u64(w, (uint64_t)x->dims[d]);
}

static bool module_has_tensor_section(const hali_ir_module_t *m) {
  for (uint32_t i = 0; i < m->executable_count; ++i)
    for (uint32_t k = 0; k < m->executables[i].export_count; ++k)
      if (m->executables[i].exports[k].layout_declared) return true;
  for (uint32_t i = 0; i < m->func_count; ++i) {
    const hali_ir_func_t *f = &m->funcs[i];
    if (f->attr_count || hali_ir_func_is_tensor_level(f)) return true;
    for (uint32_t k = 0; f->param_flags && k < f->param_count; ++k)
      if (f->param_flags[k]) return true;
    for (uint32_t k = 0; f->result_ties && k < f->result_count; ++k)
      if (f->result_ties[k] >= 0) return true;
  }
  return false;
}

/* The TENSOR section: per function its attributes, parameter flags,
 * result ties and shapes and the shapes of its tensor registers; per
 * export its declared layout. */
static void write_tensor_section(wbuf_t *w, stab_t *st,
                                 const hali_ir_module_t *m) {
  put_u32(w, m->func_count);
  for (uint32_t fi = 0; fi < m->func_count; ++fi) {
    const hali_ir_func_t *f = &m->funcs[fi];
    put_u32(w, f->attr_count);
    for (uint32_t i = 0; i < f->attr_count; ++i)
      put_u32(w, stab_name(st, f->attrs[i]));
    /* Written only when they say something, so that the text form (which
     * shows only what is set) reassembles to the same bytes. */
    bool flags = false, results = false;
    for (uint32_t i = 0; f->param_flags && i < f->param_count; ++i)
      flags |= f->param_flags[i] != 0;
    for (uint32_t i = 0; f->result_xtypes && i < f->result_count; ++i)
      results |= f->results[i] == HALI_TYPE_TENSOR || f->result_ties[i] >= 0;
    put_u8(w, flags);
    for (uint32_t i = 0; flags && i < f->param_count; ++i)
      put_u8(w, f->param_flags[i]);
    put_u8(w, results);
    for (uint32_t i = 0; results && i < f->result_count; ++i) {
      put_u32(w, (uint32_t)f->result_ties[i]);
      write_xtype(w, &f->result_xtypes[i]);
    }
    for (uint32_t r = 0; r < f->reg_count; ++r)
      if (f->reg_types[r] == HALI_TYPE_TENSOR) write_xtype(w, &f->reg_xtypes[r]);
  }
  put_u32(w, m->executable_count);
  for (uint32_t i = 0; i < m->executable_count; ++i) {
    const hali_ir_executable_t *e = &m->executables[i];
    put_u32(w, e->export_count);
    for (uint32_t k = 0; k < e->export_count; ++k) {
      const hali_ir_export_t *x = &e->exports[k];
      put_u8(w, x->layout_declared);
      if (!x->layout_declared) continue;
      put_u32(w, x->layout_constants);
      put_u32(w, x->layout_bindings);
    }
  }
}

static size_t begin_section(wbuf_t *w, uint32_t id) {
  put_u32(w, id);
  put_u32(w, 0);
  return w->len;
}
static void end_section(wbuf_t *w, size_t start) {
  patch_u32(w, start - 4, (uint32_t)(w->len - start));
}

hali_status_t hali_hbc_write(const hali_ir_module_t *m,
                             const hali_hbc_write_options_t *o,
                             uint8_t **out_data, size_t *out_size) {
  *out_data = NULL;
  *out_size = 0;
  bool debug = !(o && o->strip) && m->has_debug;
  stab_t st = {0};
  for (uint32_t i = 0; i < m->string_count; ++i)
    stab_add(&st, m->strings[i], m->string_lengths[i]);
  uint32_t module_name = stab_name(&st, m->name ? m->name : "module");
  uint32_t *rnames = hali_calloc(m->rodata_count + 1, sizeof(uint32_t));
  for (uint32_t i = 0; rnames && i < m->rodata_count; ++i)
    rnames[i] = stab_name(&st, m->rodata[i].name);
  /* Executable strings: name, format, library, then per export name and
   * symbol. */
  wbuf_t exe = {0};
  put_u32(&exe, m->executable_count);
  for (uint32_t i = 0; i < m->executable_count; ++i) {
    const hali_ir_executable_t *e = &m->executables[i];
    put_u32(&exe, stab_name(&st, e->name));
    put_u32(&exe, stab_name(&st, e->format ? e->format : ""));
    put_u32(&exe, stab_name(&st, e->library));
    put_u32(&exe, e->export_count);
    for (uint32_t k = 0; k < e->export_count; ++k) {
      const hali_ir_export_t *x = &e->exports[k];
      put_u32(&exe, stab_name(&st, x->name));
      put_u32(&exe, stab_name(&st, x->symbol));
      put_u32(&exe, x->function);
      put_u32(&exe, x->flags);
      for (int d = 0; d < 3; ++d) put_u32(&exe, x->workgroup_size[d]);
      if (x->flags & HALI_EXPORT_COUNT_FUNCTION) put_u32(&exe, x->count_function);
      write_xtypes(&exe, x->params, x->param_count);
      write_xtypes(&exe, x->results, x->result_count);
    }
  }
  /* VARIANTS: per executable with fallbacks or conditions its index,
   * variant 0's conditions, then each fallback's format, library and
   * conditions (strings, HALI_HBC_NONE for none). */
  wbuf_t vsec = {0};
  uint32_t with_variants = 0;
  for (uint32_t i = 0; i < m->executable_count; ++i) {
    const hali_ir_executable_t *e = &m->executables[i];
    with_variants += e->variant_count || e->if_device || e->if_loader;
  }
  if (with_variants) put_u32(&vsec, with_variants);
  for (uint32_t i = 0; with_variants && i < m->executable_count; ++i) {
    const hali_ir_executable_t *e = &m->executables[i];
    if (!e->variant_count && !e->if_device && !e->if_loader) continue;
    put_u32(&vsec, i);
    put_u32(&vsec, stab_name(&st, e->if_device));
    put_u32(&vsec, stab_name(&st, e->if_loader));
    put_u32(&vsec, e->variant_count);
    for (uint32_t k = 0; k < e->variant_count; ++k) {
      const hali_ir_variant_t *v = &e->variants[k];
      put_u32(&vsec, stab_name(&st, v->format ? v->format : ""));
      put_u32(&vsec, stab_name(&st, v->library));
      put_u32(&vsec, stab_name(&st, v->if_device));
      put_u32(&vsec, stab_name(&st, v->if_loader));
    }
  }
  /* GLOBALS: per global its name, type, flags, then its initial value,
   * shape or parameter as the flags say. */
  wbuf_t gsec = {0};
  put_u32(&gsec, m->global_count);
  for (uint32_t i = 0; i < m->global_count; ++i) {
    const hali_ir_global_t *g = &m->globals[i];
    put_u32(&gsec, stab_name(&st, g->name));
    put_u8(&gsec, g->type);
    put_u8(&gsec, (uint8_t)g->flags);
    if (g->flags & HALI_GLOBAL_INIT) put_u64(&gsec, (uint64_t)g->init);
    if (g->type == HALI_TYPE_TENSOR || (g->flags & HALI_GLOBAL_PARAMETER))
      write_xtype(&gsec, &g->xtype);
    if (g->flags & HALI_GLOBAL_PARAMETER) {
      put_u32(&gsec, stab_name(&st, g->param_scope));
      put_u32(&gsec, stab_name(&st, g->param_key));
    }
  }
  uint32_t *fnames = hali_calloc(m->func_count + 1, sizeof(uint32_t));
  if (!fnames || !rnames) {
    hali_free(gsec.data);
    hali_free(vsec.data);
    hali_free(fnames);
    hali_free(rnames);
    hali_free(st.s);
    hali_free(st.len);
    hali_strmap_free(&st.index);
    return hali_status_oom();
  }
  for (uint32_t i = 0; i < m->func_count; ++i)
    fnames[i] = stab_name(&st, m->funcs[i].name);
  wbuf_t tsec = {0};
  bool tensor = module_has_tensor_section(m);
  if (tensor) write_tensor_section(&tsec, &st, m);
  wbuf_t dbg = {0};
  if (debug) {
    put_u32(&dbg, stab_name(&st, m->source));
    for (uint32_t fi = 0; fi < m->func_count; ++fi) {
      const hali_ir_func_t *f = &m->funcs[fi];
      for (uint32_t r = 0; r < f->reg_count; ++r)
        put_u32(&dbg, stab_name(&st, f->reg_names ? f->reg_names[r] : NULL));
      for (uint32_t b = 0; b < f->block_count; ++b) {
        put_u32(&dbg, stab_name(&st, f->blocks[b].name));
        for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i)
          put_u32(&dbg, f->blocks[b].insns[i].line);
      }
    }
  }

  wbuf_t w = {0};
  put(&w, HALI_HBC_MAGIC, HALI_HBC_MAGIC_SIZE);
  put_u16(&w, HALI_HBC_VERSION_MAJOR);
  put_u16(&w, HALI_HBC_VERSION_MINOR);
  put_u32(&w, 0);
  put_u32(&w, 0); /* payload length, patched */
  put_u32(&w, 0); /* checksum, patched */

  size_t s = begin_section(&w, HALI_HBC_SECTION_MODULE);
  put_u32(&w, module_name);
  put_u32(&w, 0);
  end_section(&w, s);

  s = begin_section(&w, HALI_HBC_SECTION_STRINGS);
  put_u32(&w, st.n);
  for (uint32_t i = 0; i < st.n; ++i) {
    put_u32(&w, st.len[i]);
    put(&w, st.s[i], st.len[i]);
  }
  end_section(&w, s);

  if (m->rodata_count) {
    s = begin_section(&w, HALI_HBC_SECTION_RODATA);
    put_u32(&w, m->rodata_count);
    for (uint32_t i = 0; i < m->rodata_count; ++i) {
      put_u32(&w, rnames[i]);
      put_u32(&w, m->rodata[i].kind);
      put_u64(&w, m->rodata[i].size);
      put(&w, m->rodata[i].data, (size_t)m->rodata[i].size);
    }
    end_section(&w, s);
  }

  if (m->executable_count) {
    s = begin_section(&w, HALI_HBC_SECTION_EXECUTABLES);
    put(&w, exe.data, exe.len);
    end_section(&w, s);
  }

  if (with_variants) {
    s = begin_section(&w, HALI_HBC_SECTION_VARIANTS);
    put(&w, vsec.data, vsec.len);
    end_section(&w, s);
  }

  if (m->global_count) {
    s = begin_section(&w, HALI_HBC_SECTION_GLOBALS);
    put(&w, gsec.data, gsec.len);
    end_section(&w, s);
  }

  s = begin_section(&w, HALI_HBC_SECTION_FUNCTIONS);
  put_u32(&w, m->func_count);
  for (uint32_t fi = 0; fi < m->func_count; ++fi) {
    const hali_ir_func_t *f = &m->funcs[fi];
    put_u32(&w, fnames[fi]);
    put_u32(&w, f->param_count);
    put_u32(&w, f->result_count);
    for (uint32_t i = 0; i < f->result_count; ++i) put_u8(&w, f->results[i]);
    put_u32(&w, f->reg_count);
    for (uint32_t i = 0; i < f->reg_count; ++i) put_u8(&w, f->reg_types[i]);
    put_u32(&w, f->block_count);
    for (uint32_t b = 0; b < f->block_count; ++b) {
      put_u32(&w, f->blocks[b].insn_count);
      for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i)
        write_insn(&w, m, &f->blocks[b].insns[i]);
    }
  }
  end_section(&w, s);

  uint32_t nimports = 0;
  for (uint32_t fi = 0; fi < m->func_count; ++fi)
    nimports += (m->funcs[fi].flags & HALI_FUNC_IMPORT) != 0;
  if (nimports) {
    s = begin_section(&w, HALI_HBC_SECTION_IMPORTS);
    put_u32(&w, nimports);
    for (uint32_t fi = 0; fi < m->func_count; ++fi)
      if (m->funcs[fi].flags & HALI_FUNC_IMPORT) {
        put_u32(&w, fi);
        put_u32(&w, m->funcs[fi].flags);
      }
    end_section(&w, s);
  }

  if (tensor) {
    s = begin_section(&w, HALI_HBC_SECTION_TENSOR);
    put(&w, tsec.data, tsec.len);
    end_section(&w, s);
  }
  if (debug) {
    s = begin_section(&w, HALI_HBC_SECTION_DEBUG);
    put(&w, dbg.data, dbg.len);
    end_section(&w, s);
  }
  hali_free(dbg.data);
  hali_free(gsec.data);
  hali_free(vsec.data);
  hali_free(tsec.data);
  hali_free(exe.data);
  hali_free(fnames);
  hali_free(rnames);
  bool oom = w.oom || st.oom || dbg.oom || exe.oom || tsec.oom || gsec.oom ||
             vsec.oom;
  hali_free(st.s);
  hali_free(st.len);
  hali_strmap_free(&st.index);
  if (oom) {
    hali_free(w.data);
    return hali_status_annotate(hali_status_oom(), "writing module");
  }
  patch_u32(&w, 16, (uint32_t)(w.len - HALI_HBC_HEADER_SIZE));
  patch_u32(&w, 20,
            hali_crc32(w.data + HALI_HBC_HEADER_SIZE,
                       w.len - HALI_HBC_HEADER_SIZE));
  *out_data = w.data;
  *out_size = w.len;
  return HALI_OK;
}
