/* hali — the load-time pass pipeline. */
#include <stdlib.h>
#include <string.h>

#include "passes/pipeline.h"
#include "base/alloc.h"

static const hali_pass_t hali_pass_table[] = {
    {"func-conversion",
     "tensor-level functions become f$async(args, wait, signal) and a "
     "synchronous wrapper f",
     hali_pass_func_conversion},
    {"materialize-interfaces",
     "derive each export's bindings and push constants from its signature; "
     "annotate dispatch sites",
     hali_pass_materialize_interfaces},
    {"stream-to-hal",
     "execution regions become command buffers; tensors get buffers by "
     "lifetime; regions chain through fences",
     hali_pass_stream_to_hal},
};
#define HALI_PASS_COUNT \
  (uint32_t)(sizeof(hali_pass_table) / sizeof(hali_pass_table[0]))

const hali_pass_t *hali_passes(uint32_t *out_count) {
  *out_count = HALI_PASS_COUNT;
  return hali_pass_table;
}

static int32_t pass_index(const char *name, size_t len) {
  for (uint32_t i = 0; i < HALI_PASS_COUNT; ++i)
    if (strlen(hali_pass_table[i].name) == len &&
        memcmp(hali_pass_table[i].name, name, len) == 0)
      return (int32_t)i;
  return -1;
}

static hali_status_t unknown_pass(const char *name, size_t len) {
  return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                          "unknown pass '%.*s' (passes: func-conversion, "
                          "materialize-interfaces, stream-to-hal; or all)",
                          (int)len, name);
}

/* Which passes |o| selects, as a bit set. */
static hali_status_t selected(const hali_pass_options_t *o, uint32_t *out) {
  *out = (1u << HALI_PASS_COUNT) - 1;
  if (!o) return HALI_OK;
  if (o->none) *out = 0;
  if (o->only && !o->none) {
    *out = 0;
    const char *s = o->only;
    while (*s) {
      size_t len = strcspn(s, ",");
      if (len) {
        int32_t i = pass_index(s, len);
        if (i < 0) return unknown_pass(s, len);
        *out |= 1u << i;
      }
      s += len;
      if (*s == ',') ++s;
    }
  }
  if (o->after && strcmp(o->after, "all") != 0) {
    int32_t i = pass_index(o->after, strlen(o->after));
    if (i < 0) return unknown_pass(o->after, strlen(o->after));
    *out &= (1u << (i + 1)) - 1;
  }
  return HALI_OK;
}

hali_status_t hali_pass_options_check(const hali_pass_options_t *o) {
  uint32_t set;
  return selected(o, &set);
}

/* The passes intern messages as they go; the assembler interns strings in
 * text order.  Renumbering them in order of first use makes a module after
 * the passes print (hali dis) as text that reassembles to the same bytes. */
static hali_status_t canonical_strings(hali_ir_module_t *m) {
  uint32_t n = m->string_count;
  if (!n) return HALI_OK;
  uint32_t *remap = hali_malloc(n * sizeof(uint32_t));
  uint32_t *order = hali_malloc(n * sizeof(uint32_t));
  char **strings = hali_malloc(n * sizeof(char *));
  uint32_t *lengths = hali_malloc(n * sizeof(uint32_t));
  if (!remap || !order || !strings || !lengths) {
    hali_free(remap);
    hali_free(order);
    hali_free(strings);
    hali_free(lengths);
    return hali_status_oom();
  }
  for (uint32_t i = 0; i < n; ++i) remap[i] = UINT32_MAX;
  uint32_t k = 0;
  for (uint32_t fi = 0; fi < m->func_count; ++fi) {
    const hali_ir_func_t *f = &m->funcs[fi];
    for (uint32_t b = 0; b < f->block_count; ++b)
      for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i) {
        const hali_ir_insn_t *insn = &f->blocks[b].insns[i];
        for (uint32_t o = 0; o < insn->operand_count; ++o)
          if (insn->operands[o].kind == HALI_IR_STRING &&
              insn->operands[o].v < n && remap[insn->operands[o].v] == UINT32_MAX) {
            remap[insn->operands[o].v] = k;
            order[k++] = insn->operands[o].v;
          }
      }
  }
  for (uint32_t i = 0; i < n; ++i)
    if (remap[i] == UINT32_MAX) {
      remap[i] = k;
      order[k++] = i;
    }
  for (uint32_t i = 0; i < n; ++i) {
    strings[i] = m->strings[order[i]];
    lengths[i] = m->string_lengths[order[i]];
  }
  hali_free(m->strings);
  hali_free(m->string_lengths);
  m->strings = strings;
  m->string_lengths = lengths;
  for (uint32_t fi = 0; fi < m->func_count; ++fi) {
    hali_ir_func_t *f = &m->funcs[fi];
    for (uint32_t b = 0; b < f->block_count; ++b)
      for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i) {
        hali_ir_insn_t *insn = &f->blocks[b].insns[i];
        for (uint32_t o = 0; o < insn->operand_count; ++o)
          if (insn->operands[o].kind == HALI_IR_STRING && insn->operands[o].v < n)
            insn->operands[o].v = remap[insn->operands[o].v];
      }
  }
  hali_free(remap);
  hali_free(order);
  return HALI_OK;
}

static hali_status_t run(hali_ir_module_t *m, const hali_pass_options_t *o,
                         int tensor_known) {
  uint32_t set;
  HALI_RETURN_IF_ERROR_PLAIN(selected(o, &set));
  /* A module with nothing at the tensor level is left exactly as read
   * (materialize-interfaces still records layouts on its exports). */
  bool tensor = tensor_known >= 0 ? tensor_known != 0
                                  : hali_ir_module_is_tensor_level(m);
  for (uint32_t i = 0; i < HALI_PASS_COUNT; ++i) {
    if (!(set & (1u << i))) continue;
    /* Without tensor-level code func-conversion and stream-to-hal have
     * nothing to do and materialize-interfaces no sites: skipping their
     * scans keeps loading a HAL-level module one walk of its code. */
    if (!tensor) {
      if (hali_pass_table[i].run == hali_pass_materialize_interfaces)
        HALI_RETURN_IF_ERROR_PLAIN(hali_pass_materialize_exports(m));
      continue;
    }
    HALI_RETURN_IF_ERROR_PLAIN(hali_pass_table[i].run(m));
  }
  if (tensor && set) HALI_RETURN_IF_ERROR_PLAIN(canonical_strings(m));
  return HALI_OK;
}

hali_status_t hali_passes_run(hali_ir_module_t *m,
                              const hali_pass_options_t *o) {
  return run(m, o, -1);
}

hali_status_t hali_passes_run_hal_level(hali_ir_module_t *m,
                                        const hali_pass_options_t *o) {
  return run(m, o, 0);
}
