/* hali — what the assembler's files share (private to loader/asm*.c): the
 * tokens, the parser state, and the helpers the lexer (loader/asm_lex.c),
 * the HAL-level grammar (loader/asm.c) and the tensor-level syntax
 * (loader/asm_tensor.c) call across.  Each helper reports through
 * hali_asm_error and returns false / -1 / UINT32_MAX / NULL on failure;
 * the first error is kept (p->error) and stops the parse.
 */
#ifndef HALI_LOADER_ASM_INT_H
#define HALI_LOADER_ASM_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hal/buffer_view.h"
#include "loader/loader.h"
#include "vm/strmap.h"

typedef enum {
  T_EOF,
  T_IDENT,   /* op names, keywords, scalar type names */
  T_TYPE,    /* !hal.buffer ... */
  T_REG,     /* %name */
  T_SYM,     /* @name */
  T_LABEL,   /* ^name */
  T_NUMBER,  /* integer or float literal, sign included */
  T_STRING,  /* "..." (text points at the opening quote) */
  T_PUNCT,   /* ( ) { } [ ] , = : and -> */
} tok_kind_t;

typedef struct {
  tok_kind_t kind;
  const char *text; /* into the source */
  uint32_t len;
  uint32_t line, col;
} tok_t;

typedef struct {
  const char *file;
  const char *src;
  size_t src_len;
  tok_t *toks;
  size_t ntoks, cap;
  size_t pos;
  hali_ir_module_t *m;
  hali_status_t error; /* first error; parsing stops at it */
  /* Scratch for one instruction: operands and written registers. */
  hali_ir_operand_t *ops;
  size_t ops_cap;
  tok_t **defs;
  size_t defs_cap;
  /* Name indexes (vm/strmap.h), so that every lookup is O(1) and assembly
   * linear in the text.  Keys point into the source or at names the module
   * owns. */
  hali_strmap_t funcs;      /* function name -> index (pass 1) */
  hali_strmap_t rodata;     /* rodata name -> index */
  hali_strmap_t exes;       /* executable name -> index */
  hali_strmap_t globals;    /* global name -> index */
  hali_strmap_t *exports;   /* per executable: export name -> index */
  hali_strmap_t strings;    /* string constant -> module string index */
  uint32_t strings_cap;     /* allocated entries of m->strings */
  hali_strmap_t regs;       /* the current function's register names */
  hali_strmap_t blocks;     /* the current function's block labels */
} parser_t;

typedef struct {
  const char *name;
  uint32_t len;
  size_t body; /* token index of '{' */
} func_header_t;

typedef struct {
  parser_t *p;
  hali_ir_func_t *f;
  uint32_t fidx;
  const func_header_t *headers;
} body_t;

/* `@name` naming a global of type |want| (HALI_TYPE_ANY_REF: any ref
 * global; HALI_TYPE_TENSOR: a tensor global) for an operand of |info|. */
bool hali_asm_parse_global_ref(parser_t *p, const hali_op_info_t *info,
                               hali_type_t want, hali_ir_operand_t *o);

/* Operand counts are stored in 16 bits. */
#define MAX_OPERANDS 0xffffu

/* ---- Tokens (loader/asm_lex.c). */

/* Records the first error, at token |t|: "file:line:col: message, found
 * 'text'". */
/* Records that an allocation failed while reading |t| (the first error
 * wins, so an earlier syntax error is kept); returns false. */
bool hali_asm_oom(parser_t *p, const tok_t *t);
void hali_asm_error(parser_t *p, const tok_t *t, const char *fmt, ...)
    HALI_PRINTF(3, 4);
/* Tokenises p->src into p->toks (ending with T_EOF). */
void hali_asm_lex(parser_t *p);

static inline tok_t *peek(parser_t *p) { return &p->toks[p->pos]; }
static inline tok_t *next(parser_t *p) {
  tok_t *t = &p->toks[p->pos];
  if (t->kind != T_EOF) p->pos++;
  return t;
}
static inline bool tok_is(const tok_t *t, tok_kind_t k, const char *s) {
  return t->kind == k && strlen(s) == t->len && memcmp(t->text, s, t->len) == 0;
}
static inline bool accept(parser_t *p, const char *punct) {
  if (tok_is(peek(p), T_PUNCT, punct)) {
    p->pos++;
    return true;
  }
  return false;
}
bool hali_asm_expect(parser_t *p, const char *punct, const char *what);
bool hali_asm_expect_kind(parser_t *p, tok_kind_t k, const char *what,
                          tok_t **out);

/* ---- Literals (loader/asm_lex.c). */

/* A type name token (i32 or !hal.buffer ...); HALI_TYPE_NONE on error. */
hali_type_t hali_asm_parse_type(parser_t *p);
/* A string literal's escapes decoded into a malloc'ed buffer (one byte to
 * spare); NULL on error or OOM. */
char *hali_asm_decode_string(parser_t *p, const tok_t *t, size_t *out_len);
/* An integer literal that fits |bits|, sign-extended into |*out|. */
bool hali_asm_parse_int(parser_t *p, const tok_t *t, int bits, int64_t *out);
/* A float literal (decimal, hex, inf, nan, bits(0x...)) as raw bits. */
bool hali_asm_parse_float(parser_t *p, int bits, int64_t *out);

/* ---- Names and operands (loader/asm.c). */

/* tensor<...> into |x|. */
bool hali_asm_parse_xtype(parser_t *p, hali_ir_xtype_t *x);
/* The register `%name` token |t| names (p->regs), or -1. */
int32_t hali_asm_find_reg(parser_t *p, const tok_t *t);
/* The executable named |s| (|len| bytes), or -1. */
int32_t hali_asm_find_exe(parser_t *p, const char *s, size_t len);
/* `@name` naming a rodata blob declared earlier in the module. */
bool hali_asm_parse_rodata_ref(parser_t *p, hali_ir_operand_t *o);
/* A register operand of |type|; a write may define it. */
bool hali_asm_parse_reg(body_t *b, const tok_t *t, hali_type_t type,
                        bool write, hali_ir_operand_t *out);
/* The next operand slot of the instruction being parsed, or NULL. */
hali_ir_operand_t *hali_asm_push_op(parser_t *p, uint32_t *n);

/* ---- The tensor level (loader/asm_tensor.c). */

/* Defines (or redefines, with the same shape) tensor register |t|. */
bool hali_asm_def_tensor(body_t *b, const tok_t *t, const hali_ir_xtype_t *x,
                         hali_ir_operand_t *o);
/* The operands of tensor op |op| (token |opt|) after its name, with the
 * |ndefs| written registers |defs|, into p->ops (|*nops| of them). */
bool hali_asm_parse_tensor_op(body_t *b, int op, tok_t *opt, tok_t **defs,
                              size_t ndefs, uint32_t *nops);

#endif /* HALI_LOADER_ASM_INT_H */
