/* hali — reading .hbc.
 *
 * Untrusted input: every read goes through a cursor that checks the bytes
 * left, every count is checked against what the remaining bytes could
 * possibly hold before anything is allocated for it, and every index is
 * checked against its table.  The first problem stops the read with a
 * message naming the section and the byte offset.  What the reader does
 * not prove about instructions (register types, block targets, call
 * signatures) the verifier proves next.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <inttypes.h>

#include "hal/buffer_view.h"
#include "base/alloc.h"
#include "base/checked.h"
#include "loader/hbc.h"
#include "vm/strmap.h"
#include "loader/loader.h"

typedef struct cur_s {
  const uint8_t *base; /* start of the file (for offsets in messages) */
  const uint8_t *p, *end;
  const char *section;
  hali_status_t error;
  uint16_t minor; /* the format minor version the module declares */
  struct strings_s *strs; /* FUNCTIONS: the string table's compaction */
  /* FUNCTIONS: the DEBUG section, read a function at a time along with
   * the functions (read_functions); NULL when it is read on its own. */
  struct cur_s *debug;
} cur_t;

/* The string table is compacted (compact_strings) in order of first use,
 * and the functions are read in that order: string operands are renumbered
 * as they are read, so that the compaction needs no walk over the
 * instructions afterwards.  |map| takes an index of the table as read to
 * its new one; |order| lists the strings kept, in their new order. */
typedef struct strings_s {
  const hali_ir_module_t *m;
  uint32_t n;
  uint32_t *map, *order;
  uint32_t kept;
  bool oom;
} strings_t;

/* The new index of string operand |v| (|m|'s table as read): table
 * entries in order of first use.  Entries of equal contents fold into one
 * afterwards (fold_strings), which a table written by hali never has. */
static uint32_t string_use(strings_t *t, uint32_t v) {
  if (v >= t->n || t->oom) return v;
  if (t->map[v] == UINT32_MAX) {
    t->map[v] = t->kept;
    t->order[t->kept++] = v;
  }
  return t->map[v];
}

/* Folds the kept strings of equal contents into the first used: finds
 * them by sorting (hali_ir_sort_name_keys: a hash table of every string
 * misses the cache on each once the table is large), and only when there
 * are any renumbers the string operands again (one walk, for a table hali
 * does not write).  False on OOM. */
static bool fold_strings(hali_ir_module_t *m, strings_t *t) {
  uint32_t kept = t->kept;
  if (kept < 2) return true;
  uint64_t bytes;
  if (hali_mul_overflows_u64(2 * (uint64_t)kept, sizeof(hali_ir_name_key_t),
                             &bytes) ||
      bytes > SIZE_MAX)
    return false;
  hali_ir_name_key_t *keys = hali_malloc((size_t)bytes);
  if (!keys) return false;
  for (uint32_t k = 0; k < kept; ++k) {
    uint32_t v = t->order[k];
    keys[k] = (hali_ir_name_key_t){
        hali_strmap_hash(m->strings[v], m->string_lengths[v]), k,
        m->strings[v], m->string_lengths[v]};
  }
  hali_ir_sort_name_keys(keys, keys + kept, kept);
  /* renum[k]: the kept index k folds into (the first of its contents);
   * then its index among the strings left. */
  uint32_t *renum = (uint32_t *)(keys + kept); /* |tmp| is free again */
  bool folded = false;
  for (uint32_t k = 0; k < kept; ++k) renum[k] = k;
  for (uint32_t k = 1; k < kept; ++k)
    if (hali_ir_name_keys_equal(&keys[k], &keys[k - 1])) {
      renum[keys[k].index] = renum[keys[k - 1].index];
      folded = true;
    }
  if (!folded) {
    hali_free(keys);
    return true;
  }
  uint32_t left = 0;
  for (uint32_t k = 0; k < kept; ++k) {
    if (renum[k] == k) {
      t->order[left] = t->order[k];
      renum[k] = left++;
    } else {
      renum[k] = renum[renum[k]]; /* an earlier k, renumbered already */
    }
  }
  for (uint32_t fi = 0; fi < m->func_count; ++fi) {
    const hali_ir_func_t *f = &m->funcs[fi];
    for (uint32_t b = 0; b < f->block_count; ++b)
      for (uint32_t i = 0; i < f->blocks[b].insn_count; ++i) {
        hali_ir_insn_t *insn = &f->blocks[b].insns[i];
        for (uint32_t o = 0; o < insn->operand_count; ++o)
          if (insn->operands[o].kind == HALI_IR_STRING &&
              insn->operands[o].v < kept)
            insn->operands[o].v = renum[insn->operands[o].v];
      }
  }
  t->kept = left;
  hali_free(keys);
  return true;
}

static void rerr(cur_t *c, const char *fmt, ...) HALI_PRINTF(2, 3);
static void rerr(cur_t *c, const char *fmt, ...) {
  if (c->error) return;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  c->error = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                              "malformed module: %s section at byte %zu: %s",
                              c->section, (size_t)(c->p - c->base), msg);
}

/* An allocation failed: RESOURCE_EXHAUSTED, never "malformed" (the file
 * may be fine), with the place it was reading. */
static void rerr_oom(cur_t *c) {
  if (c->error) return;
  c->error = hali_status_annotate(hali_status_oom(),
                                  "reading the %s section at byte %zu",
                                  c->section, (size_t)(c->p - c->base));
}

/* Records an error and leaves the (void) reader. */
#define FAIL(...)                                                              \
  do {                                                                         \
    rerr(c, __VA_ARGS__);                                                      \
    return;                                                                    \
  } while (0)
#define FAIL_OOM()                                                             \
  do {                                                                         \
    rerr_oom(c);                                                               \
    return;                                                                    \
  } while (0)

/* The failing side of need(), out of line: the readers below are called
 * for every operand, and their common case is a compare and a load. */
__attribute__((noinline, cold)) static bool need_failed(cur_t *c, size_t n,
                                                         const char *what) {
  if (c->error) return false;
  rerr(c, "truncated %s (need %zu bytes, %zu left)", what, n,
       (size_t)(c->end - c->p));
  return false;
}
static inline bool need(cur_t *c, size_t n, const char *what) {
  if (__builtin_expect(!c->error && (size_t)(c->end - c->p) >= n, 1))
    return true;
  return need_failed(c, n, what);
}
static inline uint8_t get_u8(cur_t *c, const char *what) {
  if (!need(c, 1, what)) return 0;
  return *c->p++;
}
static inline uint16_t get_u16(cur_t *c, const char *what) {
  if (!need(c, 2, what)) return 0;
  uint16_t v = (uint16_t)(c->p[0] | (c->p[1] << 8));
  c->p += 2;
  return v;
}
static inline uint32_t get_u32(cur_t *c, const char *what) {
  if (!need(c, 4, what)) return 0;
  uint32_t v = (uint32_t)c->p[0] | ((uint32_t)c->p[1] << 8) |
               ((uint32_t)c->p[2] << 16) | ((uint32_t)c->p[3] << 24);
  c->p += 4;
  return v;
}
static uint64_t get_u64(cur_t *c, const char *what) {
  uint64_t lo = get_u32(c, what);
  uint64_t hi = get_u32(c, what);
  return lo | (hi << 32);
}
/* A count of items each at least |min_size| bytes: rejects counts the rest
 * of the section could not hold, so a forged count cannot force a huge
 * allocation. */
static uint32_t get_count(cur_t *c, uint32_t min_size, const char *what) {
  uint32_t n = get_u32(c, what);
  /* n * min_size is at most (2^32 - 1)^2, which fits in 64 bits. */
  uint64_t bytes = (uint64_t)n * min_size;
  if (!c->error && bytes > (uint64_t)(c->end - c->p)) {
    rerr(c, "%s count %u exceeds what the %zu remaining bytes can hold (%u "
            "x %u bytes at least = %" PRIu64 ")",
         what, n, (size_t)(c->end - c->p), n, min_size, bytes);
    return 0;
  }
  return n;
}

static char *get_string_copy(cur_t *c, const hali_ir_module_t *m,
                             const char *what) {
  uint32_t idx = get_u32(c, what);
  if (c->error || idx == HALI_HBC_NONE) return NULL;
  if (idx >= m->string_count) {
    rerr(c, "%s refers to string %u but the table has %u", what, idx,
         m->string_count);
    return NULL;
  }
  if (memchr(m->strings[idx], 0, m->string_lengths[idx])) {
    rerr(c, "%s (string %u) contains a NUL byte", what, idx);
    return NULL;
  }
  /* The length is known: a copy without strdup's strlen. */
  size_t len = m->string_lengths[idx];
  char *s = hali_malloc(len + 1);
  if (!s) {
    rerr_oom(c);
    return NULL;
  }
  memcpy(s, m->strings[idx], len + 1);
  return s;
}

static hali_type_t get_type(cur_t *c, const char *what) {
  uint8_t t = get_u8(c, what);
  if (!c->error && !hali_type_is_valid_tensor_level(t)) {
    c->p--;
    rerr(c, "unknown type code %u in %s", t, what);
  }
  return t;
}

static void read_strings(cur_t *c, hali_ir_module_t *m) {
  uint32_t n = get_count(c, 4, "string");
  if (c->error) return;
  m->strings = hali_calloc(n ? n : 1, sizeof(char *));
  m->string_lengths = hali_calloc(n ? n : 1, sizeof(uint32_t));
  if (!m->strings || !m->string_lengths) {
    rerr_oom(c);
    return;
  }
  /* One block for the whole table (compact_strings copies out the
   * strings the module keeps): each string takes its bytes and a NUL,
   * which its 4-byte length prefix more than pays for, so the section's
   * size bounds the block. */
  size_t arena_size = (size_t)(c->end - c->p);
  char *arena = hali_malloc(arena_size ? arena_size : 1);
  if (!arena) {
    rerr_oom(c);
    return;
  }
  m->string_arena = arena;
  m->string_arena_size = arena_size;
  size_t used = 0;
  for (uint32_t i = 0; i < n && !c->error; ++i) {
    uint32_t len = get_u32(c, "string length");
    if (!need(c, len, "string bytes")) return;
    char *s = arena + used;
    used += (size_t)len + 1; /* <= the 4 + len bytes read */
    memcpy(s, c->p, len);
    s[len] = 0;
    c->p += len;
    m->strings[i] = s;
    m->string_lengths[i] = len;
    m->string_count++;
  }
}

/* The first opcode of each block of rows added after format 1.0
 * (vm/ops.def): a module must declare a minor version that has its ops. */
static const struct {
  uint16_t minor;
  unsigned first_op;
} op_blocks[] = {
    {2, HALI_OP_FMA_I32},
    {3, HALI_OP_GLOBAL_LOAD_I32},
    {4, HALI_OP_TENSOR_DIM},
    {5, HALI_OP_TENSOR_SLICE},
    {6, HALI_OP_HAL_BUFFER_SLOT},
};

static uint16_t op_minor(unsigned op) {
  uint16_t minor = 0;
  for (size_t i = 0; i < sizeof op_blocks / sizeof op_blocks[0]; ++i)
    if (op >= op_blocks[i].first_op) minor = op_blocks[i].minor;
  return minor;
}

static void read_insn(cur_t *c, hali_ir_module_t *m, hali_ir_block_t *blk) {
  uint16_t op = get_u16(c, "opcode");
  if (c->error) return;
  const hali_op_info_t *info = hali_op_info(op);
  if (!info) {
    c->p -= 2;
    rerr(c, "unknown opcode %u", op);
    return;
  }
  if (op_minor(op) > c->minor) {
    c->p -= 2;
    rerr(c, "opcode %u (%s) is new in format %d.%u, but the module declares "
         "%d.%u",
         op, info->name, HALI_HBC_VERSION_MAJOR, op_minor(op),
         HALI_HBC_VERSION_MAJOR, c->minor);
    return;
  }
  if (info->flags & HALI_OPF_TENSOR) {
    uint32_t n = get_count(c, 9, "tensor operand");
    if (c->error) return;
    hali_ir_insn_t *insn = hali_ir_block_add_insn(blk, op, n);
    if (!insn) {
      rerr_oom(c);
      return;
    }
    for (uint32_t i = 0; i < n && !c->error; ++i) {
      uint8_t kind = get_u8(c, "operand kind");
      uint64_t v = get_u64(c, "operand");
      if (c->error) return;
      if (kind < HALI_IR_REG || kind > HALI_IR_GLOBAL ||
          (kind == HALI_IR_GLOBAL && c->minor < 3)) {
        rerr(c, "unknown operand kind %u", kind);
        return;
      }
      if (kind != HALI_IR_IMM && v > UINT32_MAX) {
        rerr(c, "operand %u out of range", i);
        return;
      }
      insn->operands[i].kind = kind;
      if (kind == HALI_IR_IMM) {
        if (!hali_ir_set_imm(m, &insn->operands[i], (int64_t)v)) {
          rerr_oom(c);
          return;
        }
      } else if (kind == HALI_IR_STRING) /* tensor.trace's label */
        insn->operands[i].v = string_use(c->strs, (uint32_t)v);
      else insn->operands[i].v = (uint32_t)v;
    }
    return;
  }
  hali_ir_operand_t ops[HALI_OP_MAX_OPERANDS];
  uint32_t nfixed = 0;
  uint16_t aux = 0;
  uint32_t ntail = 0;
  const uint8_t *tail = NULL;
  if (hali_op_is_call(op)) {
    ops[0].kind = HALI_IR_FUNC;
    ops[0].v = get_u32(c, "callee");
    nfixed = 1;
    aux = get_u16(c, "argument count");
    ntail = (uint32_t)aux + get_u16(c, "result count");
  } else if (op == HALI_OP_RETURN) {
    ntail = get_u16(c, "return count");
  } else {
    for (uint32_t i = 0; i < info->operand_count && !c->error; ++i) {
      const hali_operand_desc_t *d = &info->operands[i];
      hali_ir_operand_t *o = &ops[nfixed++];
      memset(o, 0, sizeof(*o));
      switch (d->role) {
      case HALI_ROLE_READ:
      case HALI_ROLE_WRITE:
        o->kind = HALI_IR_REG;
        o->v = get_u16(c, "register");
        break;
      case HALI_ROLE_BLOCK:
        o->kind = HALI_IR_BLOCK;
        o->v = get_u16(c, "block");
        break;
      case HALI_ROLE_STRING:
        o->kind = HALI_IR_STRING;
        o->v = get_u32(c, "string");
        if (!c->error) o->v = string_use(c->strs, o->v);
        break;
      case HALI_ROLE_FUNC:
        o->kind = HALI_IR_FUNC;
        o->v = get_u32(c, "function");
        break;
      case HALI_ROLE_RODATA:
        o->kind = HALI_IR_RODATA;
        o->v = get_u32(c, "rodata");
        break;
      case HALI_ROLE_EXECUTABLE:
        o->kind = HALI_IR_EXECUTABLE;
        o->v = get_u32(c, "executable");
        break;
      case HALI_ROLE_GLOBAL:
        o->kind = HALI_IR_GLOBAL;
        o->v = get_u32(c, "global");
        break;
      case HALI_ROLE_IMM: {
        int64_t x;
        if (d->type == HALI_TYPE_I64 || d->type == HALI_TYPE_F64)
          x = (int64_t)get_u64(c, "immediate");
        else if (d->type == HALI_TYPE_I32)
          x = (int32_t)get_u32(c, "immediate");
        else
          x = (int64_t)get_u32(c, "immediate");
        if (!hali_ir_set_imm(m, o, x)) rerr_oom(c);
        break;
      }
      }
    }
    if (info->tail) ntail = get_u16(c, "list length");
  }
  if (c->error) return;
  if (!need(c, (size_t)ntail * 2, "operand list")) return;
  tail = c->p;
  c->p += (size_t)ntail * 2;
  hali_ir_insn_t *insn = hali_ir_block_add_insn(blk, op, nfixed + ntail);
  if (!insn) {
    rerr_oom(c);
    return;
  }
  insn->aux = aux;
  if (nfixed) memcpy(insn->operands, ops, nfixed * sizeof(ops[0]));
  uint8_t tail_kind = info->tail == 'b' ? HALI_IR_BLOCK : HALI_IR_REG;
  for (uint32_t i = 0; i < ntail; ++i) {
    insn->operands[nfixed + i].kind = tail_kind;
    insn->operands[nfixed + i].v = (uint32_t)(tail[2 * i] | (tail[2 * i + 1] << 8));
  }
}

/* Reads ahead, without moving |c|, the register and block counts of the
 * function whose |nresults| result types |c| is at; true when both are
 * there and within what get_count accepts (so the reads that follow
 * find the same counts and sizes). */
static bool peek_counts(const cur_t *c, uint32_t nresults, uint32_t *regs,
                        uint32_t *blocks) {
  size_t left = (size_t)(c->end - c->p);
  if (left < (size_t)nresults + 4) return false;
  const uint8_t *p = c->p + nresults;
  *regs = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
          ((uint32_t)p[3] << 24);
  left -= (size_t)nresults + 4;
  if (*regs > left || left - *regs < 4) return false;
  p += 4 + (size_t)*regs;
  left -= (size_t)*regs + 4;
  *blocks = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
            ((uint32_t)p[3] << 24);
  return (uint64_t)*blocks * 4 <= left;
}

static void read_debug_func(cur_t *c, hali_ir_module_t *m, hali_ir_func_t *f);

static void read_functions(cur_t *c, hali_ir_module_t *m) {
  /* The smallest function: name, 3 counts, and a block count. */
  uint32_t n = get_count(c, 20, "function");
  if (c->error) return;
  m->funcs = hali_calloc(n ? n : 1, sizeof(hali_ir_func_t));
  if (!m->funcs) {
    rerr_oom(c);
    return;
  }
  /* DEBUG read along (hali_hbc_read): its errors stay in its cursor, to
   * be reported when the section's turn comes, as if read then. */
  if (c->debug) m->source = get_string_copy(c->debug, m, "source file name");
  for (uint32_t fi = 0; fi < n && !c->error; ++fi) {
    hali_ir_func_t *f = &m->funcs[fi];
    m->func_count++;
    f->name = get_string_copy(c, m, "function name");
    if (!c->error && !f->name) rerr(c, "function %u has no name", fi);
    f->param_count = get_u32(c, "parameter count");
    f->result_count = get_count(c, 1, "result");
    if (c->error) return;
    /* The blocks, register types and result types in one allocation
     * (vm/ir.h array_block), sized from the counts read ahead; when they
     * do not fit what is left (the reads below then fail), each apart. */
    uint32_t ahead_regs, ahead_blocks;
    if (peek_counts(c, f->result_count, &ahead_regs, &ahead_blocks)) {
      size_t blocks_bytes = (size_t)ahead_blocks * sizeof(hali_ir_block_t);
      /* One byte more: an empty array at the end still points inside. */
      size_t bytes = blocks_bytes + ahead_regs + f->result_count + 1;
      char *arrays = hali_malloc(bytes);
      if (!arrays) FAIL_OOM();
      memset(arrays, 0, blocks_bytes);
      f->array_block = arrays;
      f->array_block_size = bytes;
      f->results = (hali_type_t *)(arrays + blocks_bytes + ahead_regs);
    } else {
      f->results = hali_malloc(f->result_count ? f->result_count : 1);
      if (!f->results) FAIL_OOM();
    }
    for (uint32_t i = 0; i < f->result_count; ++i)
      f->results[i] = get_type(c, "result type");
    f->reg_count = get_count(c, 1, "register");
    if (c->error) return;
    if (f->param_count > f->reg_count)
      FAIL("function @%s has %u parameters but only %u registers",
                  f->name, f->param_count, f->reg_count);
    if (f->array_block) {
      f->reg_types = (hali_type_t *)(f->results - f->reg_count);
    } else {
      f->reg_types = hali_malloc(f->reg_count ? f->reg_count : 1);
      if (!f->reg_types) FAIL_OOM();
    }
    for (uint32_t i = 0; i < f->reg_count; ++i)
      f->reg_types[i] = get_type(c, "register type");
    uint32_t nblocks = get_count(c, 4, "block");
    if (c->error) return;
    if (f->array_block) {
      f->blocks = (hali_ir_block_t *)f->array_block;
    } else {
      f->blocks = hali_calloc(nblocks ? nblocks : 1, sizeof(hali_ir_block_t));
      if (!f->blocks) FAIL_OOM();
    }
    for (uint32_t b = 0; b < nblocks && !c->error; ++b) {
      f->block_count++;
      uint32_t ninsns = get_count(c, 2, "instruction");
      if (c->error) return;
      /* Sized once (the count is bounded by the bytes left), so that
       * reading a block never reallocates its instructions. */
      hali_ir_block_t *blk = &f->blocks[b];
      if (ninsns) {
        blk->insns = hali_malloc((size_t)ninsns * sizeof(hali_ir_insn_t));
        if (!blk->insns) FAIL_OOM();
        blk->insn_capacity = ninsns;
      }
      for (uint32_t i = 0; i < ninsns && !c->error; ++i)
        read_insn(c, m, &f->blocks[b]);
    }
    /* The function's names and lines while its instructions are in cache
     * (read after every function, the lines meant one more walk over all
     * of a large module's instructions, from memory). */
    if (c->debug && !c->error && !c->debug->error)
      read_debug_func(c->debug, m, f);
  }
}

static void read_rodata(cur_t *c, hali_ir_module_t *m) {
  uint32_t n = get_count(c, 16, "rodata");
  for (uint32_t i = 0; i < n && !c->error; ++i) {
    char *name = get_string_copy(c, m, "rodata name");
    uint32_t kind = get_u32(c, "rodata kind");
    uint64_t size = get_u64(c, "rodata size");
    if (!c->error && !name) rerr(c, "rodata %u has no name", i);
    if (!c->error && kind >= HALI_RODATA_KIND_COUNT)
      rerr(c, "rodata @%s has unknown kind %u", name, kind);
    if (!c->error && size % hali_rodata_kind_size((uint8_t)kind))
      rerr(c, "rodata @%s: %llu bytes is not a whole number of %s", name,
           (unsigned long long)size, hali_rodata_kind_name((uint8_t)kind));
    if (!c->error && need(c, size, "rodata bytes") &&
        !hali_ir_module_add_rodata(m, name, strlen(name), (uint8_t)kind, c->p,
                                   size))
      rerr_oom(c);
    if (!c->error) c->p += size;
    hali_free(name);
  }
}

/* Rejects a tensor type whose static size in bytes overflows 64 bits
 * (vm/ir.h hali_ir_xtype_static_bytes), naming |what| |index|. */
static void check_tensor_size(cur_t *c, const hali_ir_xtype_t *x,
                              const char *what, uint32_t index) {
  uint64_t bytes;
  uint32_t at;
  if (c->error || x->type != HALI_TYPE_NONE ||
      hali_ir_xtype_static_bytes(x, &bytes, &at))
    return;
  if (at < x->rank)
    rerr(c, "%s %u: tensor too large: the product of its dimensions "
            "overflows 64 bits at dimension %u (%" PRId64 ")",
         what, index, at, x->dims[at]);
  else
    rerr(c, "%s %u: tensor too large: its element count times the %u-byte "
            "element size overflows 64 bits",
         what, index, hali_hal_element_type_byte_size(x->element_type));
}

static void read_xtypes(cur_t *c, hali_ir_xtype_t **v, uint32_t *n) {
  uint32_t count = get_count(c, 1, "signature value");
  for (uint32_t i = 0; i < count && !c->error; ++i) {
    hali_ir_xtype_t *x = hali_ir_xtype_append(v, n);
    if (!x) FAIL_OOM();
    x->type = get_u8(c, "signature type");
    if (c->error) return;
    if (x->type != HALI_TYPE_NONE) {
      if (!hali_type_is_valid(x->type) && x->type != HALI_TYPE_INDEX)
        FAIL("signature value %u has type code %u (expected a scalar, 9 for "
             "index, or 0 for a tensor)",
             i, x->type);
      continue;
    }
    x->element_type = get_u32(c, "element type");
    if (!c->error && !hali_hal_element_type_is_known(x->element_type))
      FAIL("unknown element type 0x%08x", x->element_type);
    uint32_t rank = get_count(c, 8, "dimension");
    if (c->error) return;
    if (rank > HALI_HAL_MAX_RANK) FAIL("rank %u exceeds %d", rank, HALI_HAL_MAX_RANK);
    x->dims = hali_malloc((rank ? rank : 1) * sizeof(int64_t));
    if (!x->dims) FAIL_OOM();
    for (uint32_t d = 0; d < rank; ++d) {
      x->dims[d] = (int64_t)get_u64(c, "dimension");
      if (!c->error && x->dims[d] < -1) FAIL("dimension %" PRId64 " is negative", x->dims[d]);
    }
    x->rank = rank;
    check_tensor_size(c, x, "signature value", i);
  }
}

static bool read_one_xtype(cur_t *c, hali_ir_xtype_t *x, const char *what,
                           uint32_t index) {
  memset(x, 0, sizeof(*x));
  x->type = get_u8(c, "shape type");
  if (c->error) return false;
  if (x->type != HALI_TYPE_NONE) {
    if (!hali_type_is_valid(x->type) && x->type != HALI_TYPE_INDEX) {
      rerr(c, "unknown type code %u", x->type);
      return false;
    }
    return true;
  }
  x->element_type = get_u32(c, "element type");
  if (!c->error && !hali_hal_element_type_is_known(x->element_type)) {
    rerr(c, "unknown element type 0x%08x", x->element_type);
    return false;
  }
  uint32_t rank = get_count(c, 8, "dimension");
  if (c->error) return false;
  if (rank > HALI_HAL_MAX_RANK) {
    rerr(c, "rank %u exceeds %d", rank, HALI_HAL_MAX_RANK);
    return false;
  }
  x->dims = hali_malloc((rank ? rank : 1) * sizeof(int64_t));
  if (!x->dims) {
    rerr_oom(c);
    return false;
  }
  x->rank = rank;
  for (uint32_t d = 0; d < rank; ++d) {
    x->dims[d] = (int64_t)get_u64(c, "dimension");
    if (!c->error && x->dims[d] < -1) rerr(c, "negative dimension");
  }
  check_tensor_size(c, x, what, index);
  return !c->error;
}

/* GLOBALS (format 1.3): name, type, flags, then the initial value, shape
 * and parameter the flags and type call for.  The verifier checks what the
 * values mean; here only what a reader must know to go on. */
static void read_globals(cur_t *c, hali_ir_module_t *m) {
  uint32_t n = get_count(c, 6, "global");
  for (uint32_t i = 0; i < n && !c->error; ++i) {
    char *name = get_string_copy(c, m, "global name");
    uint8_t type = get_u8(c, "global type");
    uint8_t flags = get_u8(c, "global flags");
    if (c->error) {
      hali_free(name);
      return;
    }
    if (!name) {
      rerr(c, "global %u has no name", i);
      return;
    }
    hali_ir_global_t *g = hali_ir_module_add_global(m, name, strlen(name));
    hali_free(name);
    if (!g) FAIL_OOM();
    g->type = type;
    g->flags = flags;
    if (flags & ~(uint32_t)HALI_GLOBAL_FLAGS_ALL)
      FAIL("global @%s has unknown flags 0x%02x", g->name, flags);
    if (type != HALI_TYPE_TENSOR && !hali_type_is_valid(type))
      FAIL("global @%s has unknown type code %u", g->name, type);
    if (flags & HALI_GLOBAL_INIT) g->init = (int64_t)get_u64(c, "initial value");
    if (type == HALI_TYPE_TENSOR || (flags & HALI_GLOBAL_PARAMETER)) {
      if (!read_one_xtype(c, &g->xtype, "global", i)) return;
      if (g->xtype.type != HALI_TYPE_NONE)
        FAIL("tensor global @%s has a scalar shape", g->name);
    }
    if (flags & HALI_GLOBAL_PARAMETER) {
      g->param_scope = get_string_copy(c, m, "parameter scope");
      g->param_key = get_string_copy(c, m, "parameter key");
      if (!c->error && (!g->param_scope || !g->param_key))
        FAIL("parameter global @%s lacks its scope or key", g->name);
    }
  }
}

static void read_tensor(cur_t *c, hali_ir_module_t *m) {
  uint32_t nf = get_u32(c, "function count");
  if (!c->error && nf != m->func_count) {
    rerr(c, "describes %u functions, the module has %u", nf, m->func_count);
    return;
  }
  for (uint32_t fi = 0; fi < nf && !c->error; ++fi) {
    hali_ir_func_t *f = &m->funcs[fi];
    uint32_t na = get_count(c, 4, "attribute");
    for (uint32_t i = 0; i < na && !c->error; ++i) {
      char *a = get_string_copy(c, m, "attribute");
      if (!c->error && (!a || !hali_ir_func_add_attr(f, a, strlen(a))))
        rerr(c, "bad attribute");
      hali_free(a);
    }
    if (get_u8(c, "parameter flags") && !c->error) {
      f->param_flags = hali_calloc((size_t)f->param_count + 1, 1);
      if (!f->param_flags) FAIL_OOM();
      for (uint32_t i = 0; i < f->param_count; ++i)
        f->param_flags[i] = get_u8(c, "parameter flags");
    }
    if (get_u8(c, "result shapes") && !c->error) {
      f->result_xtypes =
          hali_calloc((size_t)f->result_count + 1, sizeof(hali_ir_xtype_t));
      f->result_ties = hali_calloc((size_t)f->result_count + 1, sizeof(int32_t));
      if (!f->result_xtypes || !f->result_ties) FAIL_OOM();
      for (uint32_t i = 0; i < f->result_count && !c->error; ++i) {
        f->result_ties[i] = (int32_t)get_u32(c, "result tie");
        if (!c->error && f->result_ties[i] != -1 &&
            (f->result_ties[i] < 0 || (uint32_t)f->result_ties[i] >= f->param_count))
          FAIL("result %u tied to parameter %d of %u", i, f->result_ties[i],
               f->param_count);
        read_one_xtype(c, &f->result_xtypes[i], "result", i);
      }
    }
    for (uint32_t r = 0; r < f->reg_count && !c->error; ++r) {
      if (f->reg_types[r] != HALI_TYPE_TENSOR) continue;
      hali_ir_xtype_t x;
      if (!read_one_xtype(c, &x, "tensor register", r)) {
        hali_free(x.dims);
        return;
      }
      if (x.type != HALI_TYPE_NONE) {
        hali_free(x.dims);
        FAIL("tensor register %u has a scalar shape", r);
      }
      bool ok = hali_ir_func_set_reg_xtype(f, r, &x);
      hali_free(x.dims);
      if (!ok) FAIL_OOM();
    }
  }
  uint32_t ne = get_u32(c, "executable count");
  if (!c->error && ne != m->executable_count) {
    rerr(c, "describes %u executables, the module has %u", ne,
         m->executable_count);
    return;
  }
  for (uint32_t i = 0; i < ne && !c->error; ++i) {
    hali_ir_executable_t *e = &m->executables[i];
    uint32_t nx = get_u32(c, "export count");
    if (!c->error && nx != e->export_count) FAIL("export count mismatch");
    for (uint32_t k = 0; k < nx && !c->error; ++k) {
      hali_ir_export_t *x = &e->exports[k];
      x->layout_declared = get_u8(c, "layout flag") != 0;
      if (!x->layout_declared) continue;
      x->layout_constants = get_u32(c, "layout constants");
      x->layout_bindings = get_u32(c, "layout bindings");
    }
  }
}

static void read_executables(cur_t *c, hali_ir_module_t *m) {
  uint32_t n = get_count(c, 16, "executable");
  for (uint32_t i = 0; i < n && !c->error; ++i) {
    char *name = get_string_copy(c, m, "executable name");
    if (!c->error && !name) rerr(c, "executable %u has no name", i);
    if (c->error) {
      hali_free(name);
      return;
    }
    hali_ir_executable_t *e =
        hali_ir_module_add_executable(m, name, strlen(name));
    hali_free(name);
    if (!e) FAIL_OOM();
    e->format = get_string_copy(c, m, "executable format");
    if (!c->error && !e->format) FAIL("executable @%s has no format", e->name);
    e->library = get_string_copy(c, m, "executable library");
    uint32_t nx = get_count(c, 36, "export");
    for (uint32_t k = 0; k < nx && !c->error; ++k) {
      char *xname = get_string_copy(c, m, "export name");
      if (!c->error && !xname) rerr(c, "export %u of @%s has no name", k, e->name);
      if (c->error) {
        hali_free(xname);
        return;
      }
      hali_ir_export_t *x = hali_ir_executable_add_export(e, xname, strlen(xname));
      hali_free(xname);
      if (!x) FAIL_OOM();
      x->symbol = get_string_copy(c, m, "export symbol");
      x->function = get_u32(c, "export function");
      x->flags = get_u32(c, "export flags");
      if (!c->error && (x->flags & ~(uint32_t)HALI_EXPORT_FLAGS_ALL))
        FAIL("export @%s has unknown flags 0x%x", x->name, x->flags);
      for (int d = 0; d < 3; ++d) {
        x->workgroup_size[d] = get_u32(c, "workgroup size");
        if (!c->error && (x->workgroup_size[d] == 0 ||
                          x->workgroup_size[d] > INT32_MAX))
          FAIL("export @%s has workgroup size %" PRIu32
               ", expected 1 to 2147483647 (as the text form)",
               x->name, x->workgroup_size[d]);
      }
      if (!c->error && (x->flags & HALI_EXPORT_COUNT_FUNCTION)) {
        if (c->minor < 5)
          FAIL("export @%s names a workgroup-count function, which is new "
               "in format %d.5, but the module declares %d.%u",
               x->name, HALI_HBC_VERSION_MAJOR, HALI_HBC_VERSION_MAJOR,
               c->minor);
        x->count_function = get_u32(c, "workgroup-count function");
      }
      read_xtypes(c, &x->params, &x->param_count);
      read_xtypes(c, &x->results, &x->result_count);
    }
  }
}

/* A device kind a variant condition may name (as the text form). */
static bool known_device_kind(const char *s) {
  return strcmp(s, "local-sync") == 0 || strcmp(s, "local-task") == 0;
}

static void read_variants(cur_t *c, hali_ir_module_t *m) {
  uint32_t n = get_count(c, 16, "executable with variants");
  uint32_t last = 0;
  for (uint32_t i = 0; i < n && !c->error; ++i) {
    uint32_t ei = get_u32(c, "variant executable");
    if (c->error) return;
    if (ei >= m->executable_count)
      FAIL("variants for executable %u but the module has %u", ei,
           m->executable_count);
    if (i && ei <= last)
      FAIL("variants for executable %u after executable %u (expected "
           "increasing indices, each once)",
           ei, last);
    last = ei;
    hali_ir_executable_t *e = &m->executables[ei];
    e->if_device = get_string_copy(c, m, "variant device condition");
    e->if_loader = get_string_copy(c, m, "variant loader condition");
    uint32_t nv = get_count(c, 16, "variant");
    if (!c->error && nv > 63)
      FAIL("executable @%s has %u fallback variants, at most 63", e->name, nv);
    for (uint32_t k = 0; k < nv && !c->error; ++k) {
      hali_ir_variant_t *v = hali_ir_executable_add_variant(e);
      if (!v) FAIL_OOM();
      v->format = get_string_copy(c, m, "variant format");
      if (!c->error && !v->format)
        FAIL("variant %u of executable @%s has no format", k + 1, e->name);
      v->library = get_string_copy(c, m, "variant library");
      v->if_device = get_string_copy(c, m, "variant device condition");
      v->if_loader = get_string_copy(c, m, "variant loader condition");
    }
    for (uint32_t k = 0; k <= e->variant_count && !c->error; ++k) {
      hali_ir_variant_t v = hali_ir_executable_variant(e, k);
      if (v.if_device && !known_device_kind(v.if_device))
        FAIL("variant %u of executable @%s: unknown device kind \"%s\" "
             "(known: local-sync, local-task)",
             k, e->name, v.if_device);
    }
  }
}

/* A function without a body that is not an import, named f$async for a
 * function @f of the module, is the assembler's placeholder for the
 * f$async func-conversion makes (vm/ir.h, HALI_FUNC_ASYNC_STUB): the
 * binary keeps the module as written, calls to it included.  (Any other
 * body-less function is still rejected, by the verifier.) */
static void mark_async_stubs(hali_ir_module_t *m) {
  for (uint32_t i = 0; i < m->func_count; ++i) {
    hali_ir_func_t *f = &m->funcs[i];
    size_t n = f->name ? strlen(f->name) : 0;
    if (f->block_count || f->flags || n <= 6 ||
        strcmp(f->name + n - 6, "$async") != 0)
      continue;
    for (uint32_t k = 0; k < m->func_count; ++k)
      if (k != i && strlen(m->funcs[k].name) == n - 6 &&
          memcmp(m->funcs[k].name, f->name, n - 6) == 0) {
        f->flags = HALI_FUNC_ASYNC_STUB;
        /* Its registers have no names (the assembler gives none; the
         * debug reader named them rN): as written, so that `dis | asm`
         * gives the same bytes. */
        for (uint32_t r = 0; f->reg_names && r < f->reg_count; ++r)
          (void)hali_ir_func_set_reg_name(f, r, NULL, 0); /* cannot fail */
        break;
      }
  }
}

static void read_imports(cur_t *c, hali_ir_module_t *m) {
  uint32_t n = get_count(c, 8, "import");
  for (uint32_t i = 0; i < n && !c->error; ++i) {
    uint32_t fi = get_u32(c, "import function");
    uint32_t flags = get_u32(c, "import flags");
    if (c->error) return;
    if (fi >= m->func_count)
      FAIL("import %u names function %u but the module has %u", i, fi,
           m->func_count);
    if (!(flags & HALI_FUNC_IMPORT) ||
        (flags & ~(uint32_t)(HALI_FUNC_IMPORT | HALI_FUNC_OPTIONAL)))
      FAIL("import %u has bad flags 0x%x", i, flags);
    if (m->funcs[fi].flags)
      FAIL("function %u is imported twice", fi);
    m->funcs[fi].flags = flags;
  }
}

/* The digits of |n| in decimal. */
static size_t decimal_digits(uint32_t n) {
  size_t d = 1;
  while (n >= 10) {
    n /= 10;
    ++d;
  }
  return d;
}

/* The bytes debug name |idx| (a string index as stored) takes in a name
 * block: the string and its NUL, or the %rN / ^bbN spelling read_debug
 * gives a name left out (|prefix| and |n|).  Indices the read rejects
 * take nothing. */
static uint64_t debug_name_size(const hali_ir_module_t *m, uint32_t idx,
                                const char *prefix, uint32_t n) {
  if (idx == HALI_HBC_NONE) return strlen(prefix) + decimal_digits(n) + 1;
  return idx < m->string_count ? (uint64_t)m->string_lengths[idx] + 1 : 0;
}

/* The size of a name block holding every register and block name of |f|
 * that DEBUG records at |c| (read ahead, without moving |c|); 0 when the
 * section ends first (the read then fails there) or when the names repeat
 * strings beyond what distinct names can take: names are unique per
 * function (the verifier checks it), so the file's string table bounds a
 * good module's names, and a forged one that names every register with
 * one long string gets no block (each name is copied apart, and the
 * verifier turns the duplicates down) rather than one of that product. */
static size_t debug_names_size(const cur_t *c, const hali_ir_module_t *m,
                               const hali_ir_func_t *f) {
  const uint8_t *p = c->p, *end = c->end;
  uint64_t total = 0;
  for (uint32_t r = 0; r < f->reg_count; ++r) {
    if (end - p < 4) return 0;
    uint32_t idx = (uint32_t)p[0] | ((uint32_t)p[1] << 8) |
                   ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
    p += 4;
    total += debug_name_size(m, idx, "r", r);
  }
  for (uint32_t b = 0; b < f->block_count; ++b) {
    if (end - p < 4) return 0;
    uint32_t idx = (uint32_t)p[0] | ((uint32_t)p[1] << 8) |
                   ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
    p += 4;
    total += debug_name_size(m, idx, "bb", b);
    uint64_t lines = 4 * (uint64_t)f->blocks[b].insn_count;
    if ((uint64_t)(end - p) < lines) return 0;
    p += lines;
  }
  /* Each left-out name takes at most 13 bytes ("bb" and 10 digits and a
   * NUL), each string of the table its bytes and a NUL once. */
  uint64_t bound = (uint64_t)m->string_arena_size +
                   13 * ((uint64_t)f->reg_count + f->block_count);
  if (total > bound) return 0;
  /* The reg_names array first (pointer-aligned). */
  total += (uint64_t)f->reg_count * sizeof(char *);
  return total <= SIZE_MAX ? (size_t)total : 0;
}

/* Where read_debug puts a function's names: one block (vm/ir.h
 * name_block), filled in order. */
typedef struct {
  char *block;
  size_t size, used;
} names_t;

/* A copy of |len| bytes of |s| (and a NUL) for function |f|: in the name
 * block while it has room, else allocated apart; NULL on OOM. */
static char *name_put(names_t *nb, const char *s, size_t len) {
  char *d;
  if (nb->block && nb->size - nb->used > len) {
    d = nb->block + nb->used;
    nb->used += len + 1;
  } else if (!(d = hali_malloc(len + 1))) {
    return NULL;
  }
  memcpy(d, s, len);
  d[len] = 0;
  return d;
}

/* Debug name |what| at |c| (get_string_copy's checks), into |nb|.  The
 * NUL check and the copy are one loop: debug names are a few bytes, for
 * which the calls of memchr and memcpy cost more than the bytes. */
static char *get_debug_name(cur_t *c, const hali_ir_module_t *m, names_t *nb,
                            const char *what) {
  uint32_t idx = get_u32(c, what);
  if (c->error || idx == HALI_HBC_NONE) return NULL;
  if (idx >= m->string_count) {
    rerr(c, "%s refers to string %u but the table has %u", what, idx,
         m->string_count);
    return NULL;
  }
  size_t len = m->string_lengths[idx];
  const char *src = m->strings[idx];
  bool in_block = nb->block && nb->size - nb->used > len;
  char *d = in_block ? nb->block + nb->used : hali_malloc(len + 1);
  if (!d) {
    rerr_oom(c);
    return NULL;
  }
  char no_nul = 1;
  for (size_t i = 0; i < len; ++i) {
    d[i] = src[i];
    no_nul &= (char)(src[i] != 0);
  }
  if (!no_nul) {
    if (!in_block) hali_free(d);
    rerr(c, "%s (string %u) contains a NUL byte", what, idx);
    return NULL;
  }
  d[len] = 0;
  if (in_block) nb->used += len + 1;
  return d;
}

/* The name hali dis prints for an unnamed register or block ("r7",
 * "bb2"), into |nb|; NULL on OOM. */
static char *numbered(names_t *nb, const char *prefix, uint32_t n) {
  char buf[16];
  int len = snprintf(buf, sizeof(buf), "%s%u", prefix, n);
  return name_put(nb, buf, (size_t)len);
}

/* DEBUG's names and lines of function |f| at |c|. */
static void read_debug_func(cur_t *c, hali_ir_module_t *m, hali_ir_func_t *f) {
  /* The reg_names array and all of the function's names in one
   * allocation: a function's names cost one malloc, not one each. */
  names_t nb = {NULL, debug_names_size(c, m, f), 0};
  if (nb.size) {
    if (!(nb.block = hali_malloc(nb.size))) FAIL_OOM();
    f->name_block = nb.block;
    f->name_block_size = nb.size;
    f->reg_names = (char **)nb.block;
    nb.used = (size_t)f->reg_count * sizeof(char *);
    memset(f->reg_names, 0, nb.used);
  } else {
    f->reg_names = hali_calloc(f->reg_count ? f->reg_count : 1, sizeof(char *));
    if (!f->reg_names) FAIL_OOM();
  }
  for (uint32_t r = 0; r < f->reg_count && !c->error; ++r)
    f->reg_names[r] = get_debug_name(c, m, &nb, "register name");
  for (uint32_t b = 0; b < f->block_count && !c->error; ++b) {
    f->blocks[b].name = get_debug_name(c, m, &nb, "block name");
    for (uint32_t i = 0; i < f->blocks[b].insn_count && !c->error; ++i)
      f->blocks[b].insns[i].line = get_u32(c, "line");
  }
  if (!c->error && f->block_count && f->blocks[0].insn_count)
    f->line = f->blocks[0].insns[0].line;
  /* A name left out is the one hali dis prints for it (%rN, ^bbN), which
   * is what `hali asm` then reads: the module is the same either way. */
  for (uint32_t r = 0; r < f->reg_count && !c->error; ++r)
    if (!f->reg_names[r] && !(f->reg_names[r] = numbered(&nb, "r", r)))
      FAIL_OOM();
  for (uint32_t b = 0; b < f->block_count && !c->error; ++b)
    if (!f->blocks[b].name && !(f->blocks[b].name = numbered(&nb, "bb", b)))
      FAIL_OOM();
}

static void read_debug(cur_t *c, hali_ir_module_t *m) {
  m->source = get_string_copy(c, m, "source file name");
  for (uint32_t fi = 0; fi < m->func_count && !c->error; ++fi)
    read_debug_func(c, m, &m->funcs[fi]);
  m->has_debug = !c->error;
}

/* The text form names rodata, executables and exports: each must be a
 * name the assembler reads back (vm/ir.h hali_name_valid) and unique in its
 * scope (rodata and executables per module, exports per executable), or
 * `hali dis` would print a module that `hali asm` rejects or reads as
 * another.  Functions, registers and blocks are the verifier's. */
static hali_status_t check_scope(hali_strmap_t *seen, const char *what,
                                 const char *scope, const char *name,
                                 uint32_t index) {
  if (!hali_name_valid(name))
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "malformed module: %s %u%s has the name \"%s\", "
                            "which is not a name (letters, digits, _ . $)",
                            what, index, scope, name);
  uint32_t v = hali_strmap_insert(seen, name, strlen(name), index);
  if (v == HALI_STRMAP_NONE)
    return hali_status_annotate(hali_status_oom(), "checking names");
  if (v != index)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "malformed module: %s @%s%s is defined twice "
                            "(%s %u and %u)",
                            what, name, scope, what, v, index);
  return HALI_OK;
}

static hali_status_t check_names(const hali_ir_module_t *m) {
  if (!hali_name_valid(m->name))
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "malformed module: the module's name \"%s\" is "
                            "not a name (letters, digits, _ . $)",
                            m->name);
  hali_strmap_t seen = {0};
  hali_status_t s = HALI_OK;
  for (uint32_t i = 0; i < m->rodata_count && !s; ++i)
    s = check_scope(&seen, "rodata", "", m->rodata[i].name, i);
  hali_strmap_clear(&seen);
  for (uint32_t i = 0; i < m->executable_count && !s; ++i)
    s = check_scope(&seen, "executable", "", m->executables[i].name, i);
  for (uint32_t i = 0; i < m->executable_count && !s; ++i) {
    const hali_ir_executable_t *e = &m->executables[i];
    char scope[300];
    snprintf(scope, sizeof(scope), " of executable @%s", e->name);
    hali_strmap_clear(&seen);
    for (uint32_t k = 0; k < e->export_count && !s; ++k)
      s = check_scope(&seen, "export", scope, e->exports[k].name, k);
  }
  hali_strmap_free(&seen);
  return s;
}

bool hali_hbc_is_binary(const uint8_t *data, size_t size) {
  return size >= HALI_HBC_MAGIC_SIZE &&
         memcmp(data, HALI_HBC_MAGIC, HALI_HBC_MAGIC_SIZE) == 0;
}

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
         ((uint32_t)p[3] << 24);
}

/* The file's string table holds every name the sections use as well as
 * the string operands; the IR's strings are the operands' alone, numbered
 * in order of first use and without duplicates, as the assembler interns
 * them.  So a module read from a file is the module its text assembles to
 * (hali dis | hali asm writes the same bytes), and a stripped write of it
 * carries no names.  Out-of-range operands stay out of range (the
 * verifier names them).  False on OOM. */
static bool compact_strings(hali_ir_module_t *m, strings_t *t) {
  /* The operands were renumbered as they were read (string_use). */
  if (t->oom || t->n != m->string_count || !fold_strings(m, t)) return false;
  uint32_t n = m->string_count, kept = t->kept;
  char **strings = hali_calloc(kept ? kept : 1, sizeof(char *));
  uint32_t *lengths = hali_calloc(kept ? kept : 1, sizeof(uint32_t));
  if (!strings || !lengths) {
    hali_free(strings);
    hali_free(lengths);
    return false;
  }
  /* The strings kept leave the reader's arena (read_strings) for one
   * block of their own, which the module keeps as its string arena
   * (vm/ir.h): one allocation for the module's strings, not one each. */
  uint64_t total = 1;
  for (uint32_t k = 0; k < kept; ++k)
    total += (uint64_t)m->string_lengths[t->order[k]] + 1;
  char *block = total <= SIZE_MAX ? hali_malloc((size_t)total) : NULL;
  if (!block) {
    hali_free(strings);
    hali_free(lengths);
    return false;
  }
  size_t at = 0;
  for (uint32_t k = 0; k < kept; ++k) {
    lengths[k] = m->string_lengths[t->order[k]];
    strings[k] = block + at;
    memcpy(strings[k], m->strings[t->order[k]], (size_t)lengths[k] + 1);
    at += (size_t)lengths[k] + 1;
  }
  const char *arena = m->string_arena;
  for (uint32_t i = 0; i < n; ++i)
    if (!arena || (uintptr_t)m->strings[i] - (uintptr_t)arena >=
                      m->string_arena_size)
      hali_free(m->strings[i]);
  hali_free(m->string_arena);
  m->string_arena = block;
  m->string_arena_size = (size_t)total;
  hali_free(m->strings);
  hali_free(m->string_lengths);
  m->strings = strings;
  m->string_lengths = lengths;
  m->string_count = kept;
  return true;
}

/* Readies |t| for the functions of |m| (its strings are read). */
static void strings_begin(strings_t *t, const hali_ir_module_t *m) {
  t->m = m;
  t->n = m->string_count;
  t->map = hali_malloc((t->n ? t->n : 1) * sizeof(uint32_t));
  t->order = hali_malloc((t->n ? t->n : 1) * sizeof(uint32_t));
  if (!t->map || !t->order) {
    t->oom = true;
    return;
  }
  for (uint32_t i = 0; i < t->n; ++i) t->map[i] = UINT32_MAX;
}

static void strings_free(strings_t *t) {
  hali_free(t->map);
  hali_free(t->order);
}

/* Where the first DEBUG section after the first FUNCTIONS section lies
 * (its bytes in [*out_p, *out_end)), walking the section headers as
 * hali_hbc_read does; false when there is none or a header is truncated
 * (the read then finds the problem in its turn). */
static bool find_debug_after_functions(const uint8_t *data, size_t size,
                                       const uint8_t **out_p,
                                       const uint8_t **out_end) {
  const uint8_t *p = data + HALI_HBC_HEADER_SIZE, *end = data + size;
  bool functions = false;
  while ((size_t)(end - p) >= 8) {
    uint32_t id = le32(p), len = le32(p + 4);
    p += 8;
    if ((size_t)(end - p) < len) return false;
    if (id == HALI_HBC_SECTION_FUNCTIONS) {
      if (functions) return false; /* twice: an error before DEBUG */
      functions = true;
    } else if (id == HALI_HBC_SECTION_DEBUG && functions) {
      *out_p = p;
      *out_end = p + len;
      return true;
    }
    p += len;
  }
  return false;
}

/* Is the DEBUG section the main loop reached, |c|, the one read along? */
static bool debug_along_at(const cur_t *debug, const cur_t *c) {
  return debug->end == c->end;
}

hali_status_t hali_hbc_read(const uint8_t *data, size_t size,
                            const hali_hbc_read_options_t *o,
                            hali_ir_module_t **out_module) {
  *out_module = NULL;
  if (!hali_hbc_is_binary(data, size))
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "not a hali binary module (bad magic)");
  if (size < HALI_HBC_HEADER_SIZE)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "malformed module: header truncated (%zu of %d "
                            "bytes)",
                            size, HALI_HBC_HEADER_SIZE);
  uint16_t major = (uint16_t)(data[8] | (data[9] << 8));
  uint16_t minor = (uint16_t)(data[10] | (data[11] << 8));
  if (major != HALI_HBC_VERSION_MAJOR)
    return hali_status_make(
        HALI_STATUS_UNIMPLEMENTED,
        "module format version %u.%u is not supported: this hali reads "
        "version %d.x (%d.%d)",
        major, minor, HALI_HBC_VERSION_MAJOR, HALI_HBC_VERSION_MAJOR,
        HALI_HBC_VERSION_MINOR);
  if (minor > HALI_HBC_VERSION_MINOR)
    return hali_status_make(
        HALI_STATUS_UNIMPLEMENTED,
        "module format version %u.%u is newer than this hali reads (%d.%d): "
        "it may use instructions this hali does not know",
        major, minor, HALI_HBC_VERSION_MAJOR, HALI_HBC_VERSION_MINOR);
  uint32_t payload = le32(data + 16);
  if (payload != size - HALI_HBC_HEADER_SIZE)
    return hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                            "malformed module: header says %u payload bytes "
                            "but the file has %zu",
                            payload, size - HALI_HBC_HEADER_SIZE);
  uint32_t crc = hali_crc32(data + HALI_HBC_HEADER_SIZE, payload);
  if (!(o && o->ignore_checksum) && crc != le32(data + 20))
    return hali_status_make(HALI_STATUS_DATA_LOSS,
                            "malformed module: checksum mismatch (stored "
                            "%08x, computed %08x): the file is corrupted",
                            le32(data + 20), crc);
  hali_ir_module_t *m = hali_ir_module_create();
  if (!m) return hali_status_oom();
  cur_t top = {data, data + HALI_HBC_HEADER_SIZE, data + size, "header", NULL,
               minor, NULL, NULL};
  bool seen[HALI_HBC_SECTION_LAST + 1] = {0};
  strings_t strs = {0};
  uint32_t module_name = HALI_HBC_NONE;
  /* The first DEBUG section after the first FUNCTIONS, if the section
   * headers lead to one, is read along with the functions (read_functions)
   * and only checked when its turn comes. */
  cur_t debug = {data, NULL, NULL, "DEBUG", NULL, minor, NULL, NULL};
  bool debug_along = find_debug_after_functions(data, size, &debug.p,
                                                &debug.end);
  while (!top.error && top.p < top.end) {
    uint32_t id = get_u32(&top, "section id");
    uint32_t len = get_u32(&top, "section length");
    if (!need(&top, len, "section")) break;
    cur_t c = {data, top.p, top.p + len, "?", NULL, minor, NULL, NULL};
    top.p += len;
    if (id >= 1 && id <= HALI_HBC_SECTION_LAST) {
      if (seen[id]) {
        c.section = "a";
        rerr(&c, "section %u appears twice", id);
        top.error = c.error;
        break;
      }
      seen[id] = true;
    }
    switch (id) {
    case HALI_HBC_SECTION_MODULE:
      c.section = "MODULE";
      module_name = get_u32(&c, "module name");
      get_u32(&c, "module flags");
      break;
    case HALI_HBC_SECTION_STRINGS:
      c.section = "STRINGS";
      read_strings(&c, m);
      break;
    case HALI_HBC_SECTION_FUNCTIONS:
      c.section = "FUNCTIONS";
      if (!seen[HALI_HBC_SECTION_STRINGS]) {
        rerr(&c, "FUNCTIONS must follow STRINGS");
      } else {
        strings_begin(&strs, m);
        c.strs = &strs;
        c.debug = debug_along ? &debug : NULL;
        read_functions(&c, m);
      }
      break;
    case HALI_HBC_SECTION_RODATA:
      c.section = "RODATA";
      if (!seen[HALI_HBC_SECTION_STRINGS] || seen[HALI_HBC_SECTION_FUNCTIONS])
        rerr(&c, "RODATA must follow STRINGS and precede FUNCTIONS");
      else
        read_rodata(&c, m);
      break;
    case HALI_HBC_SECTION_EXECUTABLES:
      c.section = "EXECUTABLES";
      if (!seen[HALI_HBC_SECTION_STRINGS] || seen[HALI_HBC_SECTION_FUNCTIONS])
        rerr(&c, "EXECUTABLES must follow STRINGS and precede FUNCTIONS");
      else
        read_executables(&c, m);
      break;
    case HALI_HBC_SECTION_IMPORTS:
      c.section = "IMPORTS";
      if (!seen[HALI_HBC_SECTION_FUNCTIONS])
        rerr(&c, "IMPORTS must follow FUNCTIONS");
      else
        read_imports(&c, m);
      break;
    case HALI_HBC_SECTION_DEBUG:
      c.section = "DEBUG";
      if (!seen[HALI_HBC_SECTION_FUNCTIONS]) {
        rerr(&c, "DEBUG must follow FUNCTIONS");
      } else if (debug_along && debug_along_at(&debug, &c)) {
        /* Read along with the functions: its outcome is this section's. */
        c.error = debug.error;
        debug.error = NULL;
        c.p = debug.p;
        m->has_debug = !c.error;
        debug_along = false;
      } else {
        read_debug(&c, m);
      }
      break;
    case HALI_HBC_SECTION_GLOBALS:
      c.section = "GLOBALS";
      if (minor < 3)
        rerr(&c, "GLOBALS is new in format %d.3, but the module declares "
                 "%d.%u",
             HALI_HBC_VERSION_MAJOR, HALI_HBC_VERSION_MAJOR, minor);
      else if (!seen[HALI_HBC_SECTION_STRINGS] ||
               seen[HALI_HBC_SECTION_FUNCTIONS])
        rerr(&c, "GLOBALS must follow STRINGS and precede FUNCTIONS");
      else
        read_globals(&c, m);
      break;
    case HALI_HBC_SECTION_VARIANTS:
      c.section = "VARIANTS";
      if (minor < 5)
        rerr(&c, "VARIANTS is new in format %d.5, but the module declares "
                 "%d.%u",
             HALI_HBC_VERSION_MAJOR, HALI_HBC_VERSION_MAJOR, minor);
      else if (!seen[HALI_HBC_SECTION_EXECUTABLES])
        rerr(&c, "VARIANTS must follow EXECUTABLES");
      else
        read_variants(&c, m);
      break;
    case HALI_HBC_SECTION_TENSOR:
      c.section = "TENSOR";
      if (!seen[HALI_HBC_SECTION_FUNCTIONS])
        rerr(&c, "TENSOR must follow FUNCTIONS");
      else
        read_tensor(&c, m);
      break;
    default:
      break; /* unknown sections are skipped */
    }
    if (!c.error && c.p != c.end && id >= 1 && id <= HALI_HBC_SECTION_LAST)
      rerr(&c, "%zu unread bytes at the end of the section",
           (size_t)(c.end - c.p));
    top.error = c.error;
  }
  if (!top.error && (!seen[HALI_HBC_SECTION_STRINGS] ||
                     !seen[HALI_HBC_SECTION_FUNCTIONS] ||
                     !seen[HALI_HBC_SECTION_MODULE]))
    rerr(&top, "missing required section (MODULE, STRINGS and FUNCTIONS)");
  if (!top.error) {
    if (module_name >= m->string_count ||
        memchr(m->strings[module_name], 0, m->string_lengths[module_name]))
      rerr(&top, "module name refers to string %u of %u", module_name,
           m->string_count);
    else if (!(m->name = hali_strdup(m->strings[module_name])))
      rerr_oom(&top);
  }
  if (!top.error) mark_async_stubs(m);
  if (!top.error) top.error = check_names(m);
  if (!top.error && !compact_strings(m, &strs))
    top.error = hali_status_annotate(hali_status_oom(),
                                     "compacting the string table");
  strings_free(&strs);
  hali_status_free(debug.error); /* read along, never reached */
  if (top.error) {
    hali_ir_module_free(m);
    return top.error;
  }
  *out_module = m;
  return HALI_OK;
}

/* CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), eight bytes per
 * step ("slicing by 8"): table k holds the CRC of a byte followed by k zero
 * bytes, so that one step folds eight input bytes with eight lookups.  The
 * checksum covers the whole payload, so at about 10 bytes per instruction
 * a byte-at-a-time loop was a sixth of the binary reader's time. */
static uint32_t hali_crc_table[8][256];
static pthread_once_t hali_crc_once = PTHREAD_ONCE_INIT;
static void hali_crc_init(void) {
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    hali_crc_table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i)
    for (int t = 1; t < 8; ++t)
      hali_crc_table[t][i] = hali_crc_table[0][hali_crc_table[t - 1][i] & 0xff] ^
                             (hali_crc_table[t - 1][i] >> 8);
}

/* The table CRC of |size| bytes, continuing from register value |crc|
 * (no initial or final inversion). */
static uint32_t crc_sliced(uint32_t crc, const uint8_t *data, size_t size) {
  pthread_once(&hali_crc_once, hali_crc_init);
  const uint32_t(*t)[256] = (const uint32_t(*)[256])hali_crc_table;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint32_t lo = crc ^ le32(data + i), hi = le32(data + i + 4);
    crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^
          t[4][lo >> 24] ^ t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^
          t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
  }
  for (; i < size; ++i) crc = t[0][(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

uint32_t hali_crc32_sliced(const uint8_t *data, size_t size) {
  return crc_sliced(0xffffffffu, data, size) ^ 0xffffffffu;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HALI_CRC_CLMUL 1
/* Folding with carry-less multiplication (PCLMULQDQ), 64 bytes a step.
 *
 * The CRC register without its inversions is M(x) * x^32 mod P(x) for the
 * message polynomial M, and is linear in M; the initial inversion is the
 * same as XORing 0xffffffff into the first four bytes.  In this CRC's bit
 * order a little-endian 64-bit word w of the input holds the polynomial
 * whose coefficient of x^(63-j) is bit j, and a 16-byte block X is
 * LO(x) * x^64 + HI(x) (LO from bytes 0-7).  PCLMULQDQ of two such words
 * gives, read the same way as 128 bits, x * A(x) * B(x) (the 127-bit
 * product lands one place off), so a constant for "times x^N" is
 * x^(N-1) mod P written as such a word.
 *
 * Folding a block X over the 16 * d bytes after it replaces it by
 * LO * (x^(128d+64) mod P) + HI * (x^(128d) mod P), a polynomial of
 * under 96 bits with the same remainder once the rest follows; XORed
 * into the block d places on, the message keeps its CRC and is 16 * d
 * bytes shorter.  Four blocks fold over the next four (d = 4) while the
 * input lasts, then into one another (d = 1), then the remaining whole
 * blocks (d = 1); the last block and the bytes after it go through the
 * table.  The constants are computed once from P, not written out. */
static uint64_t crc_xpow_word(unsigned n) {
  uint64_t r = 1; /* x^0, in the ordinary bit order (bit d: x^d) */
  for (unsigned i = 0; i < n; ++i) {
    r <<= 1;
    if (r & (1ull << 32)) r ^= 0x104C11DB7ull; /* P(x) */
  }
  uint64_t w = 0;
  for (unsigned d = 0; d < 32; ++d)
    if (r >> d & 1) w |= 1ull << (63 - d);
  return w;
}

static uint64_t crc_k[4]; /* d = 1: {LO, HI}; d = 4: {LO, HI} */
static pthread_once_t crc_k_once = PTHREAD_ONCE_INIT;
static bool crc_have_clmul;
static void crc_k_init(void) {
  crc_k[0] = crc_xpow_word(128 + 64 - 1);
  crc_k[1] = crc_xpow_word(128 - 1);
  crc_k[2] = crc_xpow_word(512 + 64 - 1);
  crc_k[3] = crc_xpow_word(512 - 1);
  __builtin_cpu_init();
  crc_have_clmul = __builtin_cpu_supports("pclmul") &&
                   __builtin_cpu_supports("sse4.1");
}

__attribute__((target("pclmul,sse4.1"))) static inline __m128i
crc_fold(__m128i x, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),
                       _mm_clmulepi64_si128(x, k, 0x11));
}

/* |size| >= 64. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t
crc_clmul(const uint8_t *data, size_t size) {
  const __m128i k1 = _mm_set_epi64x((long long)crc_k[1], (long long)crc_k[0]);
  const __m128i k4 = _mm_set_epi64x((long long)crc_k[3], (long long)crc_k[2]);
  __m128i x0 = _mm_loadu_si128((const __m128i *)data);
  __m128i x1 = _mm_loadu_si128((const __m128i *)(data + 16));
  __m128i x2 = _mm_loadu_si128((const __m128i *)(data + 32));
  __m128i x3 = _mm_loadu_si128((const __m128i *)(data + 48));
  x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128(-1)); /* the initial inversion */
  size_t i = 64;
  for (; i + 64 <= size; i += 64) {
    x0 = _mm_xor_si128(crc_fold(x0, k4),
                       _mm_loadu_si128((const __m128i *)(data + i)));
    x1 = _mm_xor_si128(crc_fold(x1, k4),
                       _mm_loadu_si128((const __m128i *)(data + i + 16)));
    x2 = _mm_xor_si128(crc_fold(x2, k4),
                       _mm_loadu_si128((const __m128i *)(data + i + 32)));
    x3 = _mm_xor_si128(crc_fold(x3, k4),
                       _mm_loadu_si128((const __m128i *)(data + i + 48)));
  }
  x1 = _mm_xor_si128(crc_fold(x0, k1), x1);
  x2 = _mm_xor_si128(crc_fold(x1, k1), x2);
  x3 = _mm_xor_si128(crc_fold(x2, k1), x3);
  for (; i + 16 <= size; i += 16)
    x3 = _mm_xor_si128(crc_fold(x3, k1),
                       _mm_loadu_si128((const __m128i *)(data + i)));
  uint8_t last[16];
  _mm_storeu_si128((__m128i *)last, x3);
  uint32_t crc = crc_sliced(0, last, 16);
  return crc_sliced(crc, data + i, size - i) ^ 0xffffffffu;
}
#endif

uint32_t hali_crc32(const uint8_t *data, size_t size) {
#ifdef HALI_CRC_CLMUL
  if (size >= 64) {
    pthread_once(&crc_k_once, crc_k_init);
    if (crc_have_clmul) return crc_clmul(data, size);
  }
#endif
  return hali_crc32_sliced(data, size);
}
