/* hali — the IR: the one in-memory form of a module.
 *
 * The assembler, the binary reader and writer, the passes, the verifier, the
 * disassembler and the encoder all speak it.  A module owns everything
 * reachable from it; hali_ir_module_free releases it all.
 *
 * Registers are not SSA: a function has |reg_count| typed registers,
 * numbered from 0, and its parameters are registers 0..param_count-1.  A
 * register may be written any number of times, always with its one type.
 */
#ifndef HALI_VM_IR_H
#define HALI_VM_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/number.h"
#include "base/strbuf.h"
#include "base/types.h"
#include "hali/base.h"
#include "vm/ops.h"

typedef enum hali_ir_operand_kind_e {
  HALI_IR_REG = 1,    /* v = register number */
  HALI_IR_IMM = 2,    /* hali_ir_imm = constant; its type comes from the op */
  HALI_IR_BLOCK = 3,  /* v = block index in the function */
  HALI_IR_STRING = 4, /* v = string index in the module */
  HALI_IR_FUNC = 5,   /* v = function index in the module */
  HALI_IR_RODATA = 6, /* v = rodata index in the module */
  HALI_IR_EXECUTABLE = 7, /* v = executable index in the module */
  HALI_IR_GLOBAL = 8,     /* v = global index in the module */
} hali_ir_operand_kind_t;

/* An operand is 8 bytes: the loader's checks and the encoder stream a
 * large module's operands from memory, so their size is much of what
 * loading costs once the IR no longer fits in the caches
 * (doc/design-notes.md, "Loading, fourth round").  An immediate whose value
 * fits in 32 bits is held in |v| (|imm_form| says how to widen it); a wider
 * one is in its module's |imm_pool| at index |v|.  So immediates are read
 * and written only through hali_ir_imm and hali_ir_set_imm (below, after
 * the module), and made with hali_ir_imm_operand; an operand may be copied
 * anywhere within its module. */
typedef struct hali_ir_operand_s {
  uint8_t kind;
  uint8_t imm_form; /* HALI_IR_IMM only: HALI_IR_IMM_S32 ... */
  uint16_t reserved;
  uint32_t v;
} hali_ir_operand_t;
_Static_assert(sizeof(hali_ir_operand_t) == 8, "an operand is 8 bytes");

/* Where an immediate's 64 bits are.  Zero (a zeroed operand) is S32. */
enum {
  HALI_IR_IMM_S32 = 0,  /* |v| sign-extended */
  HALI_IR_IMM_U32 = 1,  /* |v| zero-extended (f32 bits, large u32) */
  HALI_IR_IMM_POOL = 2, /* the module's imm_pool[v] */
};

/* Operands are in signature order.  Variadic tails:
 *   switch: [index, default, target...]
 *   call:   [callee, arg..., result...]   (|aux| = number of args)
 *   return: [value...]                                                   */
typedef struct hali_ir_insn_s {
  uint16_t op;
  uint16_t aux;
  uint32_t operand_count;
  uint32_t line; /* source line, 0 when unknown */
  hali_ir_operand_t *operands;
} hali_ir_insn_t;

/* The operands of a block's instructions live in chunks the block owns
 * (vm/ir.c): an instruction costs one slot in |insns| and no allocation of
 * its own, and operand pointers stay valid while the block holds them
 * (chunks never move).  So operands are never freed one by one: a block's
 * instructions go with hali_ir_block_clear, move with hali_ir_block_take /
 * hali_ir_block_append, and grow with hali_ir_insn_resize. */
struct hali_ir_operand_chunk_s;

typedef struct hali_ir_block_s {
  char *name; /* may be NULL (stripped); printed as ^bbN */
  uint32_t insn_count;
  uint32_t insn_capacity;
  hali_ir_insn_t *insns;
  struct hali_ir_operand_chunk_s *operand_chunks; /* newest first */
} hali_ir_block_t;

enum {
  /* A host import: no body; calls go to what the host binds at link time
   * (vm/vm.h hali_vm_module_bind_import). */
  HALI_FUNC_IMPORT = 1u << 0,
  /* An import the host may leave unbound (calling it then fails). */
  HALI_FUNC_OPTIONAL = 1u << 1,
  /* A placeholder for f$async of a tensor-level function f, made by the
   * assembler when module code calls f$async before func-conversion has
   * made it (the seed audit's p08): the ABI signature
   * (hali_ir_abi_type of f's parameters, then the wait and signal fences;
   * the ABI results) and no body.  func-conversion builds f$async in its
   * place; it never survives the passes nor reaches a binary. */
  HALI_FUNC_ASYNC_STUB = 1u << 2,
};

/* The type a value of |t| has at the coarse-fences ABI of a converted
 * tensor-level function (func-conversion): i32 and index widen to i64,
 * f32 to f64, tensors travel as buffer views; others are unchanged. */
hali_type_t hali_ir_abi_type(hali_type_t t);

/* A value in an executable export's signature, or the element type and
 * shape of a tensor register: a scalar (|type| is i32, i64, f32 or f64) or
 * a tensor (|type| is HALI_TYPE_NONE) with an element type (HAL code, e.g.
 * 0x21000020 for f32) and a shape whose dynamic dimensions are -1. */
typedef struct hali_ir_xtype_s {
  hali_type_t type;
  uint32_t element_type;
  uint32_t rank;
  int64_t *dims;
} hali_ir_xtype_t;

/* Parameter attributes (tensor level). */
enum {
  /* The argument's storage is written in place (tensor.overwrite). */
  HALI_PARAM_MUTABLE = 1u << 0,
};

typedef struct hali_ir_func_s {
  char *name;
  uint32_t flags; /* HALI_FUNC_* */
  uint32_t line;
  uint32_t param_count;
  uint32_t result_count;
  hali_type_t *results;
  uint32_t reg_count;
  /* Room in the register arrays: reg_types, and reg_names and reg_xtypes
   * when they are not NULL, each hold max(reg_capacity, reg_count)
   * entries.  hali_ir_func_add_reg grows them geometrically (and creates
   * reg_names and reg_xtypes with that room); code that allocates the
   * arrays itself sets it (0: exactly reg_count). */
  uint32_t reg_capacity;
  hali_type_t *reg_types; /* params first */
  /* NULL when stripped; entries may be NULL.  A name may live in
   * |name_block| (below), so names are changed through
   * hali_ir_func_set_reg_name / hali_ir_func_strip_names, never freed
   * one by one. */
  char **reg_names;
  uint32_t block_count;
  hali_ir_block_t *blocks;
  /* ---- Tensor level and attributes (all NULL/0 in a plain module). */
  /* Per register (reg_count entries, or NULL): element type and shape of
   * the HALI_TYPE_TENSOR registers; other entries are zero. */
  hali_ir_xtype_t *reg_xtypes;
  /* Per result (result_count entries, or NULL): tensor results' shapes. */
  hali_ir_xtype_t *result_xtypes;
  /* Per result (or NULL): the parameter a result is tied to (its storage
   * is that argument's), -1 for none. */
  int32_t *result_ties;
  /* Per parameter (or NULL): HALI_PARAM_* bits. */
  uint8_t *param_flags;
  /* Metadata attributes: free-form strings that every pass carries over
   * to the functions it derives from this one. */
  uint32_t attr_count;
  char **attrs;
  /* The names of registers 0 .. reg_index_count-1, for hali_pass_reg's
   * check that a new name is unused (passes/pass_util.c; NULL until its
   * first use).  Keys are reg_names' strings. */
  struct hali_strmap_s *reg_index;
  uint32_t reg_index_count;
  /* Blocks the function owns that hold several of its arrays and names
   * at once (the binary reader's: |array_block| the blocks, reg_types
   * and results arrays; |name_block| the reg_names array and every
   * register and block name).  An array or name that points into one of
   * them is not allocated apart: hali_ir_func_free frees each block once
   * instead, and vm/ir.c copies such an array out when it grows.  So
   * these arrays are grown and freed only through vm/ir.h
   * (hali_ir_func_add_reg, hali_ir_func_add_block, hali_ir_func_clear,
   * ...), and names changed through hali_ir_func_set_reg_name and the
   * like.  NULL when everything is its own allocation. */
  char *name_block;
  size_t name_block_size;
  char *array_block;
  size_t array_block_size;
} hali_ir_func_t;

/* Does |p| (an array or name of |f|) live in one of f's blocks? */
static inline bool hali_ir_func_in_block(const hali_ir_func_t *f,
                                         const void *p) {
  uintptr_t a = (uintptr_t)p;
  return (f->name_block && a - (uintptr_t)f->name_block < f->name_block_size) ||
         (f->array_block &&
          a - (uintptr_t)f->array_block < f->array_block_size);
}
/* The same for a register or block name. */
static inline bool hali_ir_func_name_in_block(const hali_ir_func_t *f,
                                              const char *name) {
  return hali_ir_func_in_block(f, name);
}
/* Frees |name|, a register or block name of |f| taken out of it, unless
 * it lives in f->name_block. */
void hali_ir_func_free_name(const hali_ir_func_t *f, char *name);
/* Names register |r| (< reg_count) of |f| with a copy of |len| bytes of
 * |name|, or takes its name away (|name| NULL); the old name is released.
 * Creates reg_names (other entries NULL) when |f| has none.  False on OOM
 * (the register keeps its old name). */
bool hali_ir_func_set_reg_name(hali_ir_func_t *f, uint32_t r,
                               const char *name, size_t len);
/* The same for block |b| (< block_count). */
bool hali_ir_func_set_block_name(hali_ir_func_t *f, uint32_t b,
                                 const char *name, size_t len);
/* Drops every register and block name of |f| (a stripped function:
 * reg_names NULL, block names NULL) and its name block. */
void hali_ir_func_strip_names(hali_ir_func_t *f);

/* Is |f| written at the tensor level (tensor types or tensor ops)? */
bool hali_ir_func_is_tensor_level(const hali_ir_func_t *f);

/* Tensor-op operand layouts: each op's signature in vm/ops_tensor.def
 * (fixed operands, then counted lists).  hali_ir_op_lists computes where
 * the lists of an instruction lie; the names below are positions in those
 * signatures (tests/check_ops.c proves they agree with the table). */
typedef struct hali_ir_lists_s {
  uint32_t start[HALI_OP_MAX_LISTS]; /* first operand of each list */
  uint32_t count[HALI_OP_MAX_LISTS]; /* its length */
  uint32_t count_total;              /* how many lists (info->list_count) */
} hali_ir_lists_t;
typedef enum hali_ir_lists_result_e {
  /* The fixed operands are missing, or a length operand is not an
   * immediate in [0, operand count]: |*out| is untouched. */
  HALI_IR_LISTS_BAD = 0,
  /* The lists run past the operands: |*out| is filled (start[] says where
   * each would begin; a HALI_LIST_REST list has length 0). */
  HALI_IR_LISTS_SHORT = 1,
  HALI_IR_LISTS_FIT = 2,
} hali_ir_lists_result_t;
/* The counted lists of |insn| (of an op whose signature has any). */
hali_ir_lists_result_t hali_ir_op_lists(const hali_ir_insn_t *insn,
                                        hali_ir_lists_t *out);
/* tensor.dispatch: its fixed operands (HALI_TD_HEADER of them). */
enum {
  HALI_TD_EXE = 0,
  HALI_TD_EXPORT = 1,
  HALI_TD_NWORKLOAD = 2,
  HALI_TD_NOPERANDS = 3,
  HALI_TD_NRESULTS = 4,
  HALI_TD_BINDINGS = 5,
  HALI_TD_CONSTANTS = 6,
  HALI_TD_HEADER = 7,
};
/* tensor.splat and tensor.import: the i64 registers of the result's
 * dynamic dimensions start at this operand (after the result and the
 * scalar or buffer view). */
enum { HALI_TS_DIMS = 2 };
/* The lists of a tensor.dispatch, as operand indices, by name: its
 * hali_ir_op_lists (the assembler, the structural check, the printer and
 * the passes all read them through it). */
typedef struct hali_ir_dispatch_s {
  uint32_t workload, nworkload; /* registers or immediates */
  uint32_t operands, noperands; /* registers read */
  uint32_t results, nresults;   /* registers written */
  uint32_t ties;                /* one imm per result: operand index or -1 */
  uint32_t dims; /* the results' dynamic dimensions (i64 registers), in
                    order, up to the end of the operands */
} hali_ir_dispatch_t;
/* Reads the lists of tensor.dispatch |insn| into |*out|.  False when the
 * counts are not immediates in [0, operand count] (|*out| untouched) or
 * the lists run past the operands (|*out| filled: out->dims says how many
 * operands they need).  hali_ir_verify_structure rejects both, naming the
 * count. */
bool hali_ir_dispatch_lists(const hali_ir_insn_t *insn,
                            hali_ir_dispatch_t *out);
/* The lists of a dispatch the structural check accepted (the passes; the
 * printer, which runs after it), where they always fit. */
static inline hali_ir_dispatch_t hali_ir_dispatch(const hali_ir_insn_t *insn) {
  hali_ir_dispatch_t d = {0};
  (void)hali_ir_dispatch_lists(insn, &d);
  return d;
}
/* The role (hali_role_t) of operand |k| of |insn|: from its signature's
 * fixed operands or counted lists (vm/ops.def), or call's and return's
 * shapes; 0 when |k| is past the operands or the lists do not fit. */
uint8_t hali_ir_operand_role(const hali_ir_insn_t *insn, uint32_t k);
/* Does operand |k| of |insn| name a register the instruction writes?
 * (A register operand of role HALI_ROLE_WRITE.) */
bool hali_ir_operand_is_write(const hali_ir_insn_t *insn, uint32_t k);
/* Number of dynamic (-1) dimensions of |x|. */
uint32_t hali_ir_xtype_dynamic_dims(const hali_ir_xtype_t *x);
/* The bytes a tensor of type |x| holds, counting its static dimensions
 * only (a dynamic one counts as 1) times the element size: the smallest
 * size any value of the type can have.  False when that product does not
 * fit in 64 bits; |*out_dim| is then the dimension at which it first
 * overflows (|x->rank| when only the element size tips it over).  The
 * assembler and the binary reader reject such types by name. */
bool hali_ir_xtype_static_bytes(const hali_ir_xtype_t *x, uint64_t *out_bytes,
                                uint32_t *out_dim);
/* Deep copy of |src| into |dst|; false on OOM. */
bool hali_ir_xtype_copy(hali_ir_xtype_t *dst, const hali_ir_xtype_t *src);
bool hali_ir_xtype_equal(const hali_ir_xtype_t *a, const hali_ir_xtype_t *b);
/* Appends `tensor<4x?xf32>` (or the scalar type name). */
struct hali_strbuf_s;
void hali_ir_xtype_print(struct hali_strbuf_s *sb, const hali_ir_xtype_t *x);
/* Gives register |r| of |f| the shape |x| (copied); false on OOM. */
bool hali_ir_func_set_reg_xtype(hali_ir_func_t *f, uint32_t r,
                                const hali_ir_xtype_t *x);
/* Adds a metadata attribute; false on OOM. */
bool hali_ir_func_add_attr(hali_ir_func_t *f, const char *s, size_t len);

/* Read-only data: bytes the module carries (weights, tables, messages),
 * 64-byte aligned when loaded.  |kind| only records how the text form
 * writes the values, so that dis reproduces the source. */
typedef enum hali_ir_rodata_kind_e {
  HALI_RODATA_BYTES = 0,
  HALI_RODATA_I8 = 1,
  HALI_RODATA_I16 = 2,
  HALI_RODATA_I32 = 3,
  HALI_RODATA_I64 = 4,
  HALI_RODATA_F32 = 5,
  HALI_RODATA_F64 = 6,
  HALI_RODATA_KIND_COUNT
} hali_ir_rodata_kind_t;

typedef struct hali_ir_rodata_s {
  char *name;
  uint8_t kind;
  uint64_t size;
  uint8_t *data; /* 64-byte aligned, |size| bytes (may be NULL when 0) */
} hali_ir_rodata_t;

/* Element size in bytes of a rodata kind (1 for bytes). */
uint32_t hali_rodata_kind_size(uint8_t kind);
const char *hali_rodata_kind_name(uint8_t kind);


enum {
  /* ffi: pass workgroup id x, y, z and count x, y, z as trailing uint32_t
   * parameters. */
  HALI_EXPORT_WORKGROUP_INFO = 1u << 0,
  /* ffi: the function returns int (0 = success) rather than void. */
  HALI_EXPORT_RETURNS_STATUS = 1u << 1,
  /* The export names a workgroup-count function (`workgroups @f`; format
   * 1.5: the binary stores its index after the workgroup size). */
  HALI_EXPORT_COUNT_FUNCTION = 1u << 2,
  HALI_EXPORT_FLAGS_ALL = (1u << 3) - 1,
};

typedef struct hali_ir_export_s {
  char *name;
  char *symbol;       /* ffi/native/static: the kernel's name; NULL = name */
  uint32_t function;  /* bytecode: the kernel function; UINT32_MAX = none */
  /* `workgroups @f`: a host function of the workload's dimensions (i64
   * each) returning the workgroup counts x, y, z (three i64), called by
   * the lowering at each dispatch instead of ceil(workload / size);
   * UINT32_MAX = none (HALI_EXPORT_COUNT_FUNCTION set iff not). */
  uint32_t count_function;
  uint32_t flags;     /* HALI_EXPORT_* */
  uint32_t workgroup_size[3];
  uint32_t param_count, result_count;
  hali_ir_xtype_t *params, *results;
  /* The interface (materialize-interfaces records it; the text may declare
   * it with `layout(constants N, bindings M)`, and the pass rejects a
   * declaration that disagrees with the signature). */
  bool layout_declared, layout_materialized;
  uint32_t layout_bindings, layout_constants;
} hali_ir_export_t;

/* One way of loading an executable (doc/asm.md, "Executable variants"):
 * a format, its library, and conditions that must all hold for the variant
 * to be tried at link time. */
typedef struct hali_ir_variant_s {
  char *format;    /* "native", "ffi", "static", "bytecode", or a host's */
  char *library;   /* path or registered name; NULL for bytecode */
  char *if_device; /* `if device "K"`: only on that device kind; NULL = any */
  char *if_loader; /* `if loader "F"`: only when a loader supports format F */
} hali_ir_variant_t;

typedef struct hali_ir_executable_s {
  char *name;
  char *format;  /* variant 0: "native", "ffi", "static", "bytecode", ... */
  char *library; /* variant 0: path or registered name; NULL for bytecode */
  uint32_t export_count;
  hali_ir_export_t *exports;
  /* Variant 0's conditions (NULL = none). */
  char *if_device, *if_loader;
  /* The fallbacks after variant 0 (`or format ...`), tried in order; the
   * exports are shared by every variant. */
  uint32_t variant_count;
  hali_ir_variant_t *variants;
} hali_ir_executable_t;

/* Variant |i| of |e| (0 = format/library/if_* of |e| itself), as a value
 * whose strings are borrowed; i < 1 + e->variant_count. */
hali_ir_variant_t hali_ir_executable_variant(const hali_ir_executable_t *e,
                                             uint32_t i);
/* Appends a zeroed fallback variant; NULL on OOM. */
hali_ir_variant_t *hali_ir_executable_add_variant(hali_ir_executable_t *e);

/* The interface an export's signature implies (materialize-interfaces):
 * tensor arguments then tensor results are bindings 0.., scalars are push
 * constants in order (i32/f32 one word, i64/f64 two). */
void hali_ir_export_interface(const hali_ir_export_t *e,
                              uint32_t *out_bindings, uint32_t *out_constants);

/* Module globals (doc/asm.md, "Globals"): state that lives as long as a
 * context, one copy per context.  A global holds a register type (i32, i64,
 * f32, f64 or a !hal ref) or, at the tensor level, a tensor.  Scalars start
 * at |init| (immediate bits, as hali_ir_imm) when
 * HALI_GLOBAL_INIT is set, else at 0; refs start null. */
enum {
  /* Stores are allowed everywhere; without it only an initializer (a
   * function with the attribute "initializer") may store it. */
  HALI_GLOBAL_MUTABLE = 1u << 0,
  /* |init| holds the initial value (scalars only). */
  HALI_GLOBAL_INIT = 1u << 1,
  /* A tensor global whose value comes from a parameter archive:
   * |param_scope|::|param_key| (immutable). */
  HALI_GLOBAL_PARAMETER = 1u << 2,
  HALI_GLOBAL_FLAGS_ALL = (1u << 3) - 1,
};

typedef struct hali_ir_global_s {
  char *name;
  hali_type_t type; /* a register type, or HALI_TYPE_TENSOR */
  uint32_t flags;   /* HALI_GLOBAL_* */
  int64_t init;     /* with HALI_GLOBAL_INIT */
  hali_ir_xtype_t xtype; /* a tensor global's element type and shape */
  char *param_scope, *param_key; /* with HALI_GLOBAL_PARAMETER */
  uint32_t line;    /* declaration line, 0 when unknown */
} hali_ir_global_t;

/* The function attribute that makes a function an initializer: run once
 * per context, in module order, when the context is created. */
#define HALI_ATTR_INITIALIZER "initializer"
/* Does |f| carry the attribute |attr|? */
bool hali_ir_func_has_attr(const hali_ir_func_t *f, const char *attr);

typedef struct hali_ir_module_s {
  char *name;
  char *source; /* source file name for debug locations; may be NULL */
  bool has_debug;
  uint32_t string_count;
  char **strings;
  uint32_t *string_lengths;
  uint32_t func_count;
  hali_ir_func_t *funcs;
  uint32_t rodata_count;
  hali_ir_rodata_t *rodata;
  uint32_t executable_count;
  hali_ir_executable_t *executables;
  uint32_t global_count;
  hali_ir_global_t *globals;
  /* One block holding many of the strings (the binary reader's: its
   * file's string table while it reads, then the strings the module
   * keeps; NULL in a module the assembler made): the |strings| that point
   * into these |string_arena_size| bytes are not allocated apart, and
   * hali_ir_module_free frees only the others (then the arena).  So a
   * string is replaced by pointing its entry at a new allocation, never
   * by freeing the old one. */
  char *string_arena;
  size_t string_arena_size;
  /* The immediates that do not fit in 32 bits (hali_ir_operand_t): one
   * entry for each operand hali_ir_set_imm gave such a value, never shared
   * or removed (an entry a pass dropped stays until the module is freed). */
  int64_t *imm_pool;
  uint32_t imm_pool_count, imm_pool_capacity;
} hali_ir_module_t;

/* Immediate bits of |o| (an operand of |m|): i32 sign-extended, i64 as is,
 * f32 in the low 32 bits, f64 as its 64 bits (so nan payloads survive
 * every round trip). */
static inline int64_t hali_ir_imm(const hali_ir_module_t *m,
                                  const hali_ir_operand_t *o) {
  if (o->imm_form == HALI_IR_IMM_S32) return (int32_t)o->v;
  if (o->imm_form == HALI_IR_IMM_U32) return (int64_t)o->v;
  /* An operand whose pool entry could not be made reads as 0 (its maker
   * failed with OOM). */
  return o->v < m->imm_pool_count ? m->imm_pool[o->v] : 0;
}
/* The same without the module, for what must fit in 32 bits to be valid
 * (counts, indices, ties, enum values): INT64_MIN for a pooled one, which
 * is out of every such range. */
static inline int64_t hali_ir_imm_small(const hali_ir_operand_t *o) {
  if (o->imm_form == HALI_IR_IMM_S32) return (int32_t)o->v;
  if (o->imm_form == HALI_IR_IMM_U32) return (int64_t)o->v;
  return INT64_MIN;
}
/* Makes |o| the immediate |x| of |m| (kind HALI_IR_IMM).  False on OOM
 * (a value that needed the pool): |o| then reads as 0 and names index
 * UINT32_MAX, which the passes' emit treats as OOM. */
bool hali_ir_set_imm(hali_ir_module_t *m, hali_ir_operand_t *o, int64_t x);
/* Makes |o| the immediate |x|, which never needs the pool (a count, an
 * index or a layout size). */
static inline void hali_ir_set_imm_u32(hali_ir_operand_t *o, uint32_t x) {
  o->kind = HALI_IR_IMM;
  o->imm_form = x <= INT32_MAX ? HALI_IR_IMM_S32 : HALI_IR_IMM_U32;
  o->reserved = 0;
  o->v = x;
}
/* An immediate operand of |m| holding |x| (OOM as hali_ir_set_imm). */
static inline hali_ir_operand_t hali_ir_imm_operand(hali_ir_module_t *m,
                                                   int64_t x) {
  hali_ir_operand_t o = {HALI_IR_IMM, HALI_IR_IMM_S32, 0, 0};
  (void)hali_ir_set_imm(m, &o, x);
  return o;
}

/* Is |m| (any function) written at the tensor level? */
bool hali_ir_module_is_tensor_level(const hali_ir_module_t *m);

hali_ir_module_t *hali_ir_module_create(void);
void hali_ir_module_free(hali_ir_module_t *m);

/* Adds (or finds) a string; returns its index, or UINT32_MAX on OOM. */
uint32_t hali_ir_module_intern(hali_ir_module_t *m, const char *s, size_t len);
/* Appends a function (zeroed, name copied); NULL on OOM. Invalidates
 * pointers to other functions. */
hali_ir_func_t *hali_ir_module_add_func(hali_ir_module_t *m, const char *name,
                                        size_t len);
int32_t hali_ir_module_find_func(const hali_ir_module_t *m, const char *name);
/* Appends a rodata entry owning a zeroed, aligned copy of |size| bytes
 * (|data| may be NULL); NULL on OOM. */
hali_ir_rodata_t *hali_ir_module_add_rodata(hali_ir_module_t *m,
                                           const char *name, size_t len,
                                           uint8_t kind, const void *data,
                                           uint64_t size);

/* Appends a zeroed global (name copied); NULL on OOM. */
hali_ir_global_t *hali_ir_module_add_global(hali_ir_module_t *m,
                                           const char *name, size_t len);
int32_t hali_ir_module_find_global(const hali_ir_module_t *m,
                                   const char *name);

/* Appends a zeroed executable (name copied); NULL on OOM. */
hali_ir_executable_t *hali_ir_module_add_executable(hali_ir_module_t *m,
                                                   const char *name,
                                                   size_t len);
/* Appends a zeroed export (function = UINT32_MAX); NULL on OOM. */
hali_ir_export_t *hali_ir_executable_add_export(hali_ir_executable_t *e,
                                               const char *name, size_t len);
/* Appends a zeroed value to |*values| (count |*count|); NULL on OOM. */
hali_ir_xtype_t *hali_ir_xtype_append(hali_ir_xtype_t **values,
                                      uint32_t *count);

/* Frees everything |f| holds but its name and empties it (the passes
 * rebuild a function in place). */
void hali_ir_func_clear(hali_ir_func_t *f);
/* Frees everything |f| holds, its name included (not |f| itself). */
void hali_ir_func_free(hali_ir_func_t *f);

/* Adds a register of |type| (named with a copy of |len| bytes of |name|,
 * or unnamed when |name| is NULL) and returns its number, UINT32_MAX on
 * OOM.  The register arrays grow geometrically (reg_capacity), so adding N
 * registers costs O(N) however they are added. */
uint32_t hali_ir_func_add_reg(hali_ir_func_t *f, hali_type_t type,
                              const char *name, size_t len);
hali_ir_block_t *hali_ir_func_add_block(hali_ir_func_t *f, const char *name,
                                        size_t len);
/* Appends an instruction with |operand_count| zeroed operands (from the
 * block's operand chunks). */
hali_ir_insn_t *hali_ir_block_add_insn(hali_ir_block_t *b, uint16_t op,
                                       uint32_t operand_count);
/* Frees the instructions of |b| and their operands (not its name) and
 * empties it. */
void hali_ir_block_clear(hali_ir_block_t *b);
/* Replaces the instructions of |dst| with those of |src| (moved, operands
 * included: no copy); |src| is left without instructions.  Names are not
 * touched. */
void hali_ir_block_take(hali_ir_block_t *dst, hali_ir_block_t *src);
/* Moves the instructions of |src| to the end of |dst| (operands adopted,
 * not copied) and leaves |src| without instructions; false on OOM, with
 * both unchanged. */
bool hali_ir_block_append(hali_ir_block_t *dst, hali_ir_block_t *src);
/* Gives |insn|, an instruction of |b|, |n| operands: the first ones kept,
 * any new ones zeroed; false on OOM (|insn| unchanged). */
bool hali_ir_insn_resize(hali_ir_block_t *b, hali_ir_insn_t *insn, uint32_t n);
/* How many operand chunks |b| holds (the tests bound the allocations). */
uint32_t hali_ir_block_chunk_count(const hali_ir_block_t *b);

/* Hints for a walk over the module (the loader's checks, the encoder):
 * the memory of block |b| (its instructions and newest operands), and of
 * function |i| of |m| (its registers, blocks and first block) and the
 * blocks array of the one after it, are about to be read.  A module of
 * many small functions is scattered over the heap; asking for the next
 * function while checking this one overlaps the cache misses.  Nothing
 * is read through them, so any index is fine. */
static inline void hali_ir_prefetch_block(const hali_ir_block_t *b) {
  __builtin_prefetch(b->insns);
  if (b->operand_chunks) __builtin_prefetch(b->operand_chunks);
}
static inline void hali_ir_prefetch_func(const hali_ir_module_t *m,
                                         uint32_t i) {
  if (i + 1 < m->func_count) __builtin_prefetch(m->funcs[i + 1].blocks);
  if (i >= m->func_count) return;
  const hali_ir_func_t *f = &m->funcs[i];
  __builtin_prefetch(f->reg_types);
  if (f->reg_names) __builtin_prefetch(f->reg_names);
  if (f->block_count) hali_ir_prefetch_block(&f->blocks[0]);
}

/* Finding repeated names in a large set without a hash table (whose
 * probes each miss the cache once the set is large): |n| keys, each a
 * name's bytes, its hash (hali_strmap_hash) and its index, sorted so that
 * keys of equal names are adjacent, in index order; |tmp| has room for
 * |n| keys.  The hash orders them first (a byte at a time, four passes
 * over arrays read in order), then each run of equal hashes by name and
 * index (so colliding names cannot make it quadratic). */
typedef struct hali_ir_name_key_s {
  uint32_t hash, index;
  const char *name;
  size_t len;
} hali_ir_name_key_t;
void hali_ir_sort_name_keys(hali_ir_name_key_t *keys, hali_ir_name_key_t *tmp,
                            uint32_t n);
/* Do keys |a| and |b| name the same bytes? */
static inline bool hali_ir_name_keys_equal(const hali_ir_name_key_t *a,
                                           const hali_ir_name_key_t *b) {
  return a->hash == b->hash && a->len == b->len &&
         (a->len == 0 || memcmp(a->name, b->name, a->len) == 0);
}

/* The parameter types of |f| (its first param_count registers). */
static inline hali_type_t hali_ir_func_param(const hali_ir_func_t *f,
                                             uint32_t i) {
  return f->reg_types[i];
}

/* call and fiber.spawn share one shape: [callee, args..., results...] with
 * |aux| = number of arguments.  A call's results are the callee's; a
 * spawn's is one !hal.fence.  Returns the result count and types. */
static inline bool hali_op_is_call(uint16_t op) {
  return op == HALI_OP_CALL || op == HALI_OP_FIBER_SPAWN ||
         op == HALI_OP_FIBER_JOIN;
}
/* The argument count and types of a call-shaped op: the callee's
 * parameters, except fiber.join's one !hal.fence (the spawned fiber's)
 * whose results are the callee's. */
uint32_t hali_ir_call_params(uint16_t op, const hali_ir_func_t *callee,
                             const hali_type_t **out_types);
uint32_t hali_ir_call_results(uint16_t op, const hali_ir_func_t *callee,
                              const hali_type_t **out_types);

/* Verifies |m|: see vm/verify.c for everything it proves. */
HALI_MUST_USE hali_status_t hali_ir_verify(const hali_ir_module_t *m);
/* The structural check the loader runs before the load-time passes
 * (vm/verify_structure.c): accepts tensor types and ops, and proves every
 * index, count, operand kind and tensor-op layout (above) that the passes
 * rely on, so that no input reaches them malformed.  Errors read
 * "verify structure: @f, block ^b, instruction N (op), file:line: ...".
 * Everything it rejects hali_ir_verify rejects too. */
HALI_MUST_USE hali_status_t hali_ir_verify_structure(const hali_ir_module_t *m);
/* The loader's fast path: true when |m| passes both hali_ir_verify_structure
 * and hali_ir_verify and holds no tensor-level function (so the passes
 * leave its functions as they are), checked in one walk, a block at a time
 * while it is in cache.  False says nothing about why: the caller runs the
 * two checks (and the passes between them) as usual, which then give the
 * message.  Read-only, like both checks. */
bool hali_ir_verify_fused(const hali_ir_module_t *m);

/* Prints |m| as .hasm text that reassembles to the same module.  With
 * |with_locs|, each instruction carries its line as `loc(N)`. Returns a
 * malloc'ed string. */
char *hali_ir_print(const hali_ir_module_t *m, bool with_locs);
/* Same, optionally showing the interfaces materialize-interfaces recorded
 * on exports (hali dis --after). */
char *hali_ir_print_ex(const hali_ir_module_t *m, bool with_locs,
                       bool show_layouts);

/* Writes the ISA reference (markdown) generated from the op table. */
char *hali_isa_markdown(void);

/* Names (@function, %register, ^block, @module ...) are non-empty runs of
 * these characters: letters, digits, '_', '.', '$'. */
static inline bool hali_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '$';
}
bool hali_name_valid(const char *s);
/* The length of |s| when it is a valid name, else 0 (one pass). */
size_t hali_name_length(const char *s);

/* Appends the text of one instruction (as hali dis prints it, without
 * loc) to |sb|. */
void hali_ir_print_insn(hali_strbuf_t *sb, const hali_ir_module_t *m,
                        const hali_ir_func_t *f, const hali_ir_insn_t *insn);

/* ---- Naming places and registers (vm/ir_print.c).  Every message that
 * points into a module -- the verifier's, the passes', the printer's and
 * the tracer's -- names registers, blocks and places through these, so
 * that they read the same everywhere. */

/* Register |r| of |f| as .hasm writes it: "%name", or "%rN" when it has no
 * name (a stripped module) or is out of range. */
void hali_ir_print_reg(hali_strbuf_t *sb, const hali_ir_func_t *f, uint32_t r);
/* The same into |buf| (|n| bytes, truncated if need be), for messages;
 * returns |buf|. */
const char *hali_ir_reg_name(const hali_ir_func_t *f, uint32_t r, char *buf,
                             size_t n);
/* Block |b| of |f|: "^name", or "^bbN" when it has no name or is out of
 * range. */
void hali_ir_print_block(hali_strbuf_t *sb, const hali_ir_func_t *f,
                         uint32_t b);

/* No block to name (hali_ir_print_place). */
#define HALI_IR_NO_BLOCK UINT32_MAX

/* Where a diagnostic points: "module @m" when |f| is NULL; otherwise
 * "@f", then ", block ^b" unless |block| is HALI_IR_NO_BLOCK, then
 * ", instruction N (op)" when |insn| is given (N = |index|, its position
 * in the block), then ", file:line" when |line| is not 0 (|m|'s source
 * name, or "line" when it has none).  For example
 * "@f, block ^entry, instruction 3 (add.i32), m.hasm:7". */
void hali_ir_print_place(hali_strbuf_t *sb, const hali_ir_module_t *m,
                         const hali_ir_func_t *f, uint32_t block,
                         const hali_ir_insn_t *insn, uint32_t index,
                         uint32_t line);


#endif /* HALI_VM_IR_H */
