/* hali — the op descriptions, built once from vm/ops.def. */
#include <pthread.h>
#include <string.h>

#include "vm/ops.h"

static hali_op_info_t hali_ops[HALI_OP_COUNT] = {
#define OP(e, n, f, s, y) {n, f, s, y, 0, 0, {{0, 0}}},
#include "vm/ops.def"
#undef OP
};

static pthread_once_t hali_ops_once = PTHREAD_ONCE_INIT;

static const struct {
  char letter;
  hali_type_t type;
  const char *name;
} hali_type_table[] = {
    {'i', HALI_TYPE_I32, "i32"},
    {'l', HALI_TYPE_I64, "i64"},
    {'f', HALI_TYPE_F32, "f32"},
    {'d', HALI_TYPE_F64, "f64"},
    {'D', HALI_TYPE_DEVICE, "!hal.device"},
    {'A', HALI_TYPE_ALLOCATOR, "!hal.allocator"},
    {'B', HALI_TYPE_BUFFER, "!hal.buffer"},
    {'V', HALI_TYPE_BUFFER_VIEW, "!hal.buffer_view"},
    {'C', HALI_TYPE_COMMAND_BUFFER, "!hal.command_buffer"},
    {'E', HALI_TYPE_FENCE, "!hal.fence"},
    {'X', HALI_TYPE_EXECUTABLE, "!hal.executable"},
    {'R', HALI_TYPE_ANY_REF, "!ref"},
};
#define HALI_TYPE_TABLE_N (sizeof(hali_type_table) / sizeof(hali_type_table[0]))

const char *hali_type_name(hali_type_t t) {
  for (size_t i = 0; i < HALI_TYPE_TABLE_N; ++i)
    if (hali_type_table[i].type == t) return hali_type_table[i].name;
  return "?";
}

hali_type_t hali_type_parse(const char *s, size_t len) {
  for (size_t i = 0; i < HALI_TYPE_TABLE_N; ++i) {
    const char *n = hali_type_table[i].name;
    if (hali_type_table[i].type != HALI_TYPE_ANY_REF && strlen(n) == len &&
        memcmp(n, s, len) == 0)
      return hali_type_table[i].type;
  }
  return HALI_TYPE_NONE;
}

hali_type_t hali_type_from_letter(char c) {
  for (size_t i = 0; i < HALI_TYPE_TABLE_N; ++i)
    if (hali_type_table[i].letter == c) return hali_type_table[i].type;
  return HALI_TYPE_NONE;
}

/* Signatures are checked by tests/check_ops.c (every row parses, roles and
 * types are known); here a malformed one would only yield fewer operands. */
static void hali_ops_init(void) {
  for (unsigned op = 0; op < HALI_OP_COUNT; ++op) {
    hali_op_info_t *info = &hali_ops[op];
    const char *p = info->signature;
    while (*p) {
      while (*p == ' ') ++p;
      if (!p[0] || !p[1]) break;
      if (p[0] == HALI_ROLE_VARIADIC) break; /* always last */
      if (info->operand_count == HALI_OP_MAX_OPERANDS) break;
      hali_operand_desc_t *d = &info->operands[info->operand_count++];
      d->role = (uint8_t)p[0];
      d->type = p[1] == '_' ? HALI_TYPE_NONE : hali_type_from_letter(p[1]);
      if (d->role == HALI_ROLE_READ || d->role == HALI_ROLE_WRITE)
        info->reg_count++;
      p += 2;
    }
  }
}

const hali_op_info_t *hali_op_info(unsigned op) {
  if (op >= HALI_OP_COUNT) return NULL;
  pthread_once(&hali_ops_once, hali_ops_init);
  return &hali_ops[op];
}

int hali_op_lookup(const char *name, size_t len) {
  /* Linear: only the assembler calls this, once per instruction. */
  for (unsigned op = 0; op < HALI_OP_COUNT; ++op)
    if (strlen(hali_ops[op].name) == len &&
        memcmp(hali_ops[op].name, name, len) == 0)
      return (int)op;
  return -1;
}
