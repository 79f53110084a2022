/* hali — inspecting modules and contexts (hali/hali.h, "Inspection"):
 * what `hali dump` prints, and waiting for a context's queued work. */
#include "api/api_int.h"
#include "base/alloc.h"

#include "base/checked.h"
#include "base/strbuf.h"
#include "loader/hbc.h"
#include "vm/ir.h"

hali_status_t hali_context_wait_idle(hali_context_t *context,
                                     int64_t timeout_ns) {
  CHECK_ARG(context);
  return hali_hal_device_wait_idle(context->hal,
                                   timeout_ns < 0 ? HALI_INFINITE : timeout_ns);
}

/* ---- Describing a module ------------------------------------------------ */

/* Appends a string literal. */
#define LIT(sb, s) hali_strbuf_append((sb), (s), sizeof(s) - 1)

typedef struct {
  hali_strbuf_t sb;
  bool json;
} out_t;

static void json_string(hali_strbuf_t *sb, const char *s) {
  LIT(sb, "\"");
  for (; s && *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') hali_strbuf_printf(sb, "\\%c", c);
    else if (c < 0x20) hali_strbuf_printf(sb, "\\u%04x", c);
    else hali_strbuf_append(sb, s, 1);
  }
  LIT(sb, "\"");
}

/* A value's type in a signature: a tensor's shape, else the type's name. */
static void type_text(hali_strbuf_t *sb, hali_type_t t,
                      const hali_ir_xtype_t *x) {
  if (t == HALI_TYPE_TENSOR && x) hali_ir_xtype_print(sb, x);
  else hali_strbuf_printf(sb, "%s", hali_type_name(t));
}

/* "(%x: tensor<4xf32>, i32) -> (tensor<4xf32>)" into |sb|. */
static void func_signature(hali_strbuf_t *sb, const hali_ir_func_t *f) {
  LIT(sb, "(");
  for (uint32_t i = 0; i < f->param_count; ++i) {
    if (i) LIT(sb, ", ");
    const char *name = f->reg_names ? f->reg_names[i] : NULL;
    if (name) hali_strbuf_printf(sb, "%%%s: ", name);
    type_text(sb, f->reg_types[i], f->reg_xtypes ? &f->reg_xtypes[i] : NULL);
  }
  LIT(sb, ") -> (");
  for (uint32_t i = 0; i < f->result_count; ++i) {
    if (i) LIT(sb, ", ");
    type_text(sb, f->results[i],
              f->result_xtypes ? &f->result_xtypes[i] : NULL);
  }
  LIT(sb, ")");
}

static void export_signature(hali_strbuf_t *sb, const hali_ir_export_t *e) {
  LIT(sb, "(");
  for (uint32_t i = 0; i < e->param_count; ++i) {
    if (i) LIT(sb, ", ");
    hali_ir_xtype_print(sb, &e->params[i]);
  }
  LIT(sb, ") -> (");
  for (uint32_t i = 0; i < e->result_count; ++i) {
    if (i) LIT(sb, ", ");
    hali_ir_xtype_print(sb, &e->results[i]);
  }
  LIT(sb, ")");
}

/* The signature text alone (for JSON values). */
static char *func_signature_string(const hali_ir_func_t *f) {
  hali_strbuf_t sb = {0};
  func_signature(&sb, f);
  return hali_strbuf_take(&sb);
}

static void functions(out_t *o, const char *key, const char *title,
                      const hali_ir_module_t *m, bool imports) {
  bool first = true;
  if (o->json) hali_strbuf_printf(&o->sb, ",\n  \"%s\": [", key);
  for (uint32_t i = 0; i < m->func_count; ++i) {
    const hali_ir_func_t *f = &m->funcs[i];
    if (((f->flags & HALI_FUNC_IMPORT) != 0) != imports) continue;
    /* An f$async placeholder is not written: the passes make it. */
    if (f->flags & HALI_FUNC_ASYNC_STUB) continue;
    if (o->json) {
      char *sig = func_signature_string(f);
      if (!sig) {
        o->sb.oom = true;
        return;
      }
      hali_strbuf_printf(&o->sb, "%s\n    {\"name\": ", first ? "" : ",");
      json_string(&o->sb, f->name);
      LIT(&o->sb, ", \"signature\": ");
      json_string(&o->sb, sig);
      hali_free(sig);
      hali_strbuf_printf(&o->sb, ", \"arguments\": %u, \"results\": %u",
                         f->param_count, f->result_count);
      if (imports)
        hali_strbuf_printf(&o->sb, ", \"optional\": %s",
                           f->flags & HALI_FUNC_OPTIONAL ? "true" : "false");
      else
        hali_strbuf_printf(&o->sb, ", \"tensor_level\": %s",
                           hali_ir_func_is_tensor_level(f) ? "true" : "false");
      LIT(&o->sb, "}");
    } else {
      if (first) hali_strbuf_printf(&o->sb, "%s:\n", title);
      hali_strbuf_printf(&o->sb, "  @%s", f->name);
      func_signature(&o->sb, f);
      if (imports && (f->flags & HALI_FUNC_OPTIONAL))
        hali_strbuf_printf(&o->sb, " (optional)");
      LIT(&o->sb, "\n");
    }
    first = false;
  }
  if (o->json) hali_strbuf_printf(&o->sb, "%s]", first ? "" : "\n  ");
  else if (first && !imports) hali_strbuf_printf(&o->sb, "%s: none\n", title);
}

static void executables(out_t *o, const hali_ir_module_t *m) {
  if (o->json) LIT(&o->sb, ",\n  \"executables\": [");
  else if (m->executable_count)
    hali_strbuf_printf(&o->sb, "executables:\n");
  for (uint32_t i = 0; i < m->executable_count; ++i) {
    const hali_ir_executable_t *x = &m->executables[i];
    if (o->json) {
      hali_strbuf_printf(&o->sb, "%s\n    {\"name\": ", i ? "," : "");
      json_string(&o->sb, x->name);
      LIT(&o->sb, ", \"format\": ");
      json_string(&o->sb, x->format);
      LIT(&o->sb, ", \"library\": ");
      if (x->library) json_string(&o->sb, x->library);
      else LIT(&o->sb, "null");
      if (x->variant_count || x->if_device || x->if_loader) {
        /* Every variant in link-time order, variant 0 first. */
        LIT(&o->sb, ", \"variants\": [");
        for (uint32_t k = 0; k <= x->variant_count; ++k) {
          hali_ir_variant_t v = hali_ir_executable_variant(x, k);
          const char *keys[4] = {"format", "library", "if_device",
                                 "if_loader"};
          const char *vals[4] = {v.format, v.library, v.if_device,
                                 v.if_loader};
          hali_strbuf_printf(&o->sb, "%s{", k ? ", " : "");
          for (int f = 0; f < 4; ++f) {
            hali_strbuf_printf(&o->sb, "%s\"%s\": ", f ? ", " : "", keys[f]);
            if (vals[f]) json_string(&o->sb, vals[f]);
            else LIT(&o->sb, "null");
          }
          LIT(&o->sb, "}");
        }
        LIT(&o->sb, "]");
      }
      LIT(&o->sb, ", \"exports\": [");
    } else {
      hali_strbuf_printf(&o->sb, "  @%s format \"%s\"", x->name, x->format);
      if (x->library) hali_strbuf_printf(&o->sb, " library \"%s\"", x->library);
      hali_strbuf_printf(&o->sb, " (%u export%s)\n", x->export_count,
                         x->export_count == 1 ? "" : "s");
      if (x->variant_count || x->if_device || x->if_loader) {
        hali_strbuf_printf(&o->sb,
                           "    %u variants, tried in order at link time:\n",
                           x->variant_count + 1);
        for (uint32_t k = 0; k <= x->variant_count; ++k) {
          hali_ir_variant_t v = hali_ir_executable_variant(x, k);
          hali_strbuf_printf(&o->sb, "      %u: format \"%s\"", k, v.format);
          if (v.library)
            hali_strbuf_printf(&o->sb, " library \"%s\"", v.library);
          if (v.if_device)
            hali_strbuf_printf(&o->sb, " if device \"%s\"", v.if_device);
          if (v.if_loader)
            hali_strbuf_printf(&o->sb, " if loader \"%s\"", v.if_loader);
          LIT(&o->sb, "\n");
        }
      }
    }
    for (uint32_t k = 0; k < x->export_count; ++k) {
      const hali_ir_export_t *e = &x->exports[k];
      uint32_t bindings = e->layout_bindings, constants = e->layout_constants;
      if (!e->layout_declared && !e->layout_materialized)
        hali_ir_export_interface(e, &bindings, &constants);
      hali_strbuf_t sig = {0};
      export_signature(&sig, e);
      char *sigs = hali_strbuf_take(&sig);
      if (!sigs) {
        o->sb.oom = true;
        return;
      }
      if (o->json) {
        hali_strbuf_printf(&o->sb, "%s{\"name\": ", k ? ", " : "");
        json_string(&o->sb, e->name);
        LIT(&o->sb, ", \"signature\": ");
        json_string(&o->sb, sigs);
        LIT(&o->sb, ", \"symbol\": ");
        json_string(&o->sb, e->symbol ? e->symbol : e->name);
        hali_strbuf_printf(&o->sb,
                           ", \"workgroup_size\": [%u, %u, %u], "
                           "\"bindings\": %u, \"constants\": %u}",
                           e->workgroup_size[0], e->workgroup_size[1],
                           e->workgroup_size[2], bindings, constants);
      } else {
        hali_strbuf_printf(&o->sb, "    export @%s%s", e->name, sigs);
        if (e->symbol && strcmp(e->symbol, e->name) != 0)
          hali_strbuf_printf(&o->sb, " symbol \"%s\"", e->symbol);
        hali_strbuf_printf(&o->sb,
                           "\n      workgroup size [%u, %u, %u], "
                           "layout(constants %u, bindings %u)\n",
                           e->workgroup_size[0], e->workgroup_size[1],
                           e->workgroup_size[2], constants, bindings);
      }
      hali_free(sigs);
    }
    if (o->json) LIT(&o->sb, "]}");
  }
  if (o->json)
    hali_strbuf_printf(&o->sb, "%s]", m->executable_count ? "\n  " : "");
}

static void rodata(out_t *o, const hali_ir_module_t *m) {
  uint64_t total = 0;
  if (o->json) LIT(&o->sb, ",\n  \"rodata\": [");
  else if (m->rodata_count) hali_strbuf_printf(&o->sb, "rodata:\n");
  for (uint32_t i = 0; i < m->rodata_count; ++i) {
    const hali_ir_rodata_t *r = &m->rodata[i];
    total += r->size;
    if (o->json) {
      hali_strbuf_printf(&o->sb, "%s\n    {\"name\": ", i ? "," : "");
      json_string(&o->sb, r->name);
      hali_strbuf_printf(&o->sb, ", \"kind\": \"%s\", \"bytes\": %llu}",
                         hali_rodata_kind_name(r->kind),
                         (unsigned long long)r->size);
    } else {
      hali_strbuf_printf(&o->sb, "  @%s %s, %llu bytes\n", r->name,
                         hali_rodata_kind_name(r->kind),
                         (unsigned long long)r->size);
    }
  }
  if (o->json)
    hali_strbuf_printf(&o->sb, "%s],\n  \"rodata_bytes\": %llu",
                       m->rodata_count ? "\n  " : "",
                       (unsigned long long)total);
  else if (m->rodata_count)
    hali_strbuf_printf(&o->sb, "  total %llu bytes\n",
                       (unsigned long long)total);
}

/* Bytes a tensor global of static shape holds; false when a dim is
 * dynamic or the size overflows. */
static bool tensor_bytes(const hali_ir_xtype_t *x, uint64_t *out) {
  uint64_t n = hali_element_type_byte_size(x->element_type);
  for (uint32_t d = 0; d < x->rank; ++d) {
    if (x->dims[d] < 0) return false;
    if (hali_mul_overflows_u64(n, (uint64_t)x->dims[d], &n)) return false;
  }
  *out = n;
  return true;
}

static void globals(out_t *o, const hali_ir_module_t *m) {
  uint64_t param_total = 0;
  if (o->json) LIT(&o->sb, ",\n  \"globals\": [");
  else if (m->global_count) hali_strbuf_printf(&o->sb, "globals:\n");
  for (uint32_t i = 0; i < m->global_count; ++i) {
    const hali_ir_global_t *g = &m->globals[i];
    bool param = (g->flags & HALI_GLOBAL_PARAMETER) != 0;
    bool is_mutable = (g->flags & HALI_GLOBAL_MUTABLE) != 0;
    uint64_t bytes = 0;
    bool sized = g->type == HALI_TYPE_TENSOR && tensor_bytes(&g->xtype, &bytes);
    if (param && sized) param_total += bytes;
    hali_strbuf_t ty = {0};
    type_text(&ty, g->type, &g->xtype);
    char *tys = hali_strbuf_take(&ty);
    if (!tys) {
      o->sb.oom = true;
      return;
    }
    if (o->json) {
      hali_strbuf_printf(&o->sb, "%s\n    {\"name\": ", i ? "," : "");
      json_string(&o->sb, g->name);
      LIT(&o->sb, ", \"type\": ");
      json_string(&o->sb, tys);
      hali_strbuf_printf(&o->sb, ", \"mutable\": %s, \"parameter\": ",
                         is_mutable ? "true" : "false");
      if (param) {
        LIT(&o->sb, "{\"scope\": ");
        json_string(&o->sb, g->param_scope);
        LIT(&o->sb, ", \"key\": ");
        json_string(&o->sb, g->param_key);
        LIT(&o->sb, "}");
      } else {
        LIT(&o->sb, "null");
      }
      if (sized)
        hali_strbuf_printf(&o->sb, ", \"bytes\": %llu}",
                           (unsigned long long)bytes);
      else
        LIT(&o->sb, ", \"bytes\": null}");
    } else {
      hali_strbuf_printf(&o->sb, "  @%s : %s%s", g->name, tys,
                         is_mutable ? " mutable" : "");
      if (param)
        hali_strbuf_printf(&o->sb, " = parameter \"%s\" :: \"%s\"",
                           g->param_scope ? g->param_scope : "",
                           g->param_key ? g->param_key : "");
      if (sized)
        hali_strbuf_printf(&o->sb, ", %llu bytes", (unsigned long long)bytes);
      LIT(&o->sb, "\n");
    }
    hali_free(tys);
  }
  if (o->json)
    hali_strbuf_printf(&o->sb, "%s],\n  \"parameter_bytes\": %llu",
                       m->global_count ? "\n  " : "",
                       (unsigned long long)param_total);
  else if (param_total)
    hali_strbuf_printf(&o->sb, "  parameters total %llu bytes\n",
                       (unsigned long long)param_total);
}

/* The module as written: the bytes it was loaded from, read again without
 * the passes. */
static hali_status_t read_as_written(const hali_module_t *module,
                                     hali_ir_module_t **out) {
  if (hali_hbc_is_binary(module->data, module->size))
    return hali_hbc_read(module->data, module->size, NULL, out);
  return hali_asm_parse((const char *)module->data, module->size,
                        module->name, out);
}

hali_status_t hali_module_describe(const hali_module_t *module,
                                   hali_describe_format_t format,
                                   char **out_text) {
  CHECK_ARG(out_text);
  *out_text = NULL;
  CHECK_ARG(module);
  if (format != HALI_DESCRIBE_TEXT && format != HALI_DESCRIBE_JSON)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "hali_module_describe: unknown format %d",
                            (int)format);
  hali_ir_module_t *written = NULL;
  HALI_RETURN_IF_ERROR(read_as_written(module, &written),
                       "hali_module_describe: reading %s as written",
                       module->name);
  const hali_ir_module_t *m = module->ir;
  bool binary = hali_hbc_is_binary(module->data, module->size);
  unsigned major = 0, minor = 0;
  if (binary && module->size >= HALI_HBC_HEADER_SIZE) {
    major = module->data[8] | (unsigned)module->data[9] << 8;
    minor = module->data[10] | (unsigned)module->data[11] << 8;
  }
  out_t o = {.json = format == HALI_DESCRIBE_JSON};
  if (o.json) {
    LIT(&o.sb, "{\n  \"module\": ");
    json_string(&o.sb, m->name);
    LIT(&o.sb, ",\n  \"file\": ");
    json_string(&o.sb, module->name);
    if (binary)
      hali_strbuf_printf(&o.sb, ",\n  \"format\": \"hbc\", \"format_version\": "
                                "\"%u.%u\"", major, minor);
    else
      hali_strbuf_printf(&o.sb, ",\n  \"format\": \"hasm\", "
                                "\"format_version\": null");
    hali_strbuf_printf(&o.sb, ",\n  \"bytes\": %zu", module->size);
    hali_strbuf_printf(&o.sb, ",\n  \"debug_info\": %s",
                       written->has_debug ? "true" : "false");
    LIT(&o.sb, ",\n  \"source\": ");
    if (written->source) json_string(&o.sb, written->source);
    else LIT(&o.sb, "null");
  } else {
    hali_strbuf_printf(&o.sb, "module @%s\n", m->name);
    if (binary)
      hali_strbuf_printf(&o.sb, "  file: %s (binary .hbc, format %u.%u, %zu "
                                "bytes)\n",
                         module->name, major, minor, module->size);
    else
      hali_strbuf_printf(&o.sb, "  file: %s (text .hasm, %zu bytes)\n",
                         module->name, module->size);
    hali_strbuf_printf(&o.sb, "  debug info: %s",
                       written->has_debug ? "yes (names, source lines)"
                                          : "no (stripped)");
    if (written->source)
      hali_strbuf_printf(&o.sb, ", source %s", written->source);
    LIT(&o.sb, "\n");
  }
  functions(&o, "functions_as_written", "functions as written", written,
            false);
  functions(&o, "functions", "functions after the load-time passes", m,
            false);
  functions(&o, "imports", "imports", m, true);
  globals(&o, written);
  executables(&o, m);
  rodata(&o, m);
  if (o.json) LIT(&o.sb, "\n}\n");
  hali_ir_module_free(written);
  *out_text = hali_strbuf_take(&o.sb);
  return *out_text ? HALI_OK : oom();
}

hali_status_t hali_module_generated_functions(const hali_module_t *module,
                                              bool *out_generated,
                                              size_t count) {
  CHECK_ARG(module);
  CHECK_ARG(out_generated || count == 0);
  const hali_ir_module_t *m = module->ir;
  if (count != m->func_count)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "hali_module_generated_functions: count is %zu, "
                            "the module has %u functions",
                            count, m->func_count);
  hali_ir_module_t *written = NULL;
  HALI_RETURN_IF_ERROR(read_as_written(module, &written),
                       "hali_module_generated_functions: reading %s as "
                       "written",
                       module->name);
  for (uint32_t i = 0; i < m->func_count; ++i) {
    int32_t k = hali_ir_module_find_func(written, m->funcs[i].name);
    out_generated[i] =
        k < 0 || (written->funcs[k].flags & HALI_FUNC_ASYNC_STUB) != 0;
  }
  hali_ir_module_free(written);
  return HALI_OK;
}
