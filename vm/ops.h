/* hali — opcodes and their descriptions, derived from vm/ops.def. */
#ifndef HALI_VM_OPS_H
#define HALI_VM_OPS_H

#include <stdint.h>

#include "base/types.h"

typedef enum hali_opcode_e {
#define OP(e, name, flags, sig, syn) HALI_OP_##e,
#include "vm/ops.def"
#undef OP
  HALI_OP_COUNT
} hali_opcode_t;

enum {
  HALI_OPF_TERM = 1u << 0,
  HALI_OPF_FAILS = 1u << 1,
  HALI_OPF_SIDE = 1u << 2,
  HALI_OPF_VARIADIC = 1u << 3,
  HALI_OPF_SUSPEND = 1u << 4,
  /* Tensor level (vm/ops_tensor.def): consumed by the passes; the verifier
   * rejects any that remain, so the interpreter never sees one. */
  HALI_OPF_TENSOR = 1u << 5,
};

/* Operand roles (first letter of a signature operand). */
typedef enum hali_role_e {
  HALI_ROLE_WRITE = 'w',
  HALI_ROLE_READ = 'r',
  HALI_ROLE_IMM = 'k',
  HALI_ROLE_BLOCK = 'b',
  HALI_ROLE_STRING = 's',
  HALI_ROLE_FUNC = 'f',
  HALI_ROLE_RODATA = 'd',
  HALI_ROLE_EXECUTABLE = 'e',
  /* A module global (type letter: the global's type; 'R' any ref global,
   * whose type must then equal the register's). */
  HALI_ROLE_GLOBAL = 'g',
  HALI_ROLE_VARIADIC = 'v',
  /* A register read whose storage the op writes in place (the target of
   * tensor.overwrite): not a write of the register, not a read of its
   * value. */
  HALI_ROLE_IN_PLACE = 'm',
  /* Only in a counted list: a register read or an immediate. */
  HALI_ROLE_READ_OR_IMM = 'a',
} hali_role_t;

#define HALI_OP_MAX_OPERANDS 16
#define HALI_OP_MAX_LISTS 5

/* A counted list's length: the immediate at fixed operand |count|, or
 * HALI_LIST_REST (the operands left after the other lists). */
enum { HALI_LIST_REST = 0xff };

typedef struct hali_operand_desc_s {
  uint8_t role;       /* hali_role_t */
  hali_type_t type;   /* HALI_TYPE_NONE for blocks, strings, functions */
} hali_operand_desc_t;

/* A counted list (signature token `[rt#4]` or `[rl*]`, vm/ops.def). */
typedef struct hali_list_desc_s {
  uint8_t role;      /* hali_role_t of every element */
  hali_type_t type;  /* HALI_TYPE_NONE for '_' (any register) */
  uint8_t count;     /* fixed operand holding the length, or HALI_LIST_REST */
} hali_list_desc_t;

typedef struct hali_op_info_s {
  const char *name;
  uint32_t flags;
  const char *signature;
  const char *synopsis;
  uint8_t operand_count;     /* fixed operands, excluding a variadic tail */
  uint8_t reg_count;         /* how many of them are registers */
  /* The variadic tail: 0 (none), 'b' (blocks), '_' (call/return), or a
   * type letter (registers read of that type; |tail_type| is the type). */
  char tail;
  hali_type_t tail_type;
  hali_operand_desc_t operands[HALI_OP_MAX_OPERANDS];
  /* Counted lists after the fixed operands, in order (tensor ops). */
  uint8_t list_count;
  hali_list_desc_t lists[HALI_OP_MAX_LISTS];
} hali_op_info_t;

/* The description of |op|, or NULL when |op| is not a valid opcode. */
const hali_op_info_t *hali_op_info(unsigned op);
/* The opcode named |name| (length |len|), or -1. */
int hali_op_lookup(const char *name, size_t len);

#endif /* HALI_VM_OPS_H */
