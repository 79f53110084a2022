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
  /* T_REG and T_SYM: hali_strmap_hash of the name (after '%' or '@') */
  uint32_t hash;
} tok_t;

/* Tokens per chunk of the token window. */
#define TOK_CHUNK 256

typedef struct {
  const char *file;
  const char *src;
  size_t src_len;
  /* Tokens are lexed on demand (loader/asm_lex.c) into a window of chunks
   * of TOK_CHUNK tokens.  Chunks never move, so a token pointer stays
   * valid until hali_asm_release drops its chunk, which the grammar asks
   * for only between top-level items, between instructions and while
   * skipping a body: memory holds the tokens of one instruction or so, not
   * of the whole file.  Token numbers (|pos|, peek_at) count from the last
   * hali_asm_seek. */
  tok_t **chunks;       /* [0, nchunks) in use (chunks[0] holds token
                           |tbase|), then spare ones up to |nalloc| */
  size_t nchunks, nalloc, chunks_cap;
  size_t tbase, tend;   /* tokens [tbase, tend) are in the window */
  size_t pos;           /* the next token */
  /* The lexer: where the next token starts, its line and that line's
   * first character; |lex_eof| once end of file (or an error) is lexed. */
  const char *lex_s, *lex_line_start;
  uint32_t lex_line;
  bool lex_eof;
  bool lex_batch;  /* lex a chunk at a time (in bodies) */
  tok_t eof; /* returned once a token chunk could not be allocated */
  /* Every `^label :` of every body, in order, found while pass 1 skips the
   * bodies (func_header_t says which are whose), so that pass 2 knows a
   * body's blocks before reading it without lexing it twice. */
  tok_t *labels;
  size_t nlabels, labels_cap;
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
  /* f$async placeholders (HALI_FUNC_ASYNC_STUB) called by bodies, made
   * outside the module while bodies are parsed (m->funcs must not move)
   * and appended after pass 2: stub k becomes function func_count + k. */
  hali_strmap_t stub_names; /* "f$async" -> k; keys owned by the stubs */
  hali_ir_func_t **stubs;
  uint32_t nstubs;
  /* Room the assembler made (geometric growth, so that a function of N
   * blocks and a module of N functions cost O(log N) reallocations, not
   * N): entries of m->funcs, and of the blocks array of function
   * |cap_func| (UINT32_MAX: none; other code sizes its arrays exactly, so
   * room is only known for the function the assembler is filling).
   * Register arrays keep their own room (vm/ir.h reg_capacity). */
  uint32_t funcs_cap;
  uint32_t cap_func, blocks_cap;
} parser_t;

typedef struct {
  const char *name;
  uint32_t len;
  bool has_body;
  tok_t body; /* its '{' (where hali_asm_seek resumes) */
  size_t label0, nlabels; /* its labels in p->labels */
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
/* Starts lexing p->src from its beginning. */
void hali_asm_lex_init(parser_t *p);
/* Lexes on from token |at| (a copy of a token lexed before): the window is
 * emptied and |at| becomes token 0 (p->pos). */
void hali_asm_seek(parser_t *p, const tok_t *at);
/* Drops the window's chunks wholly before p->pos: pointers to tokens
 * before p->pos become invalid. */
void hali_asm_release(parser_t *p);
/* After the parse failed: lexes the whole file, and the first lexical
 * error found there replaces the parse's error (as when the whole file was
 * lexed before parsing). */
void hali_asm_lex_rest(parser_t *p);
/* Skips a body from p->pos, its '{' (the last token lexed), past its
 * matching '}', appending its `^label :` labels to p->labels (from
 * |*out_label0|, |*out_nlabels| of them).  The window is emptied and
 * lexing goes on after the '}'.  False when end of file comes first
 * (|*out_end| is that token) or on OOM (recorded). */
bool hali_asm_skip_body(parser_t *p, size_t *out_label0, size_t *out_nlabels,
                        tok_t *out_end);
/* Frees the window (and p->labels). */
void hali_asm_lex_free(parser_t *p);
/* Token |i| (>= p->tbase), lexing up to it if need be; past end of file,
 * the T_EOF token. */
tok_t *hali_asm_tok_slow(parser_t *p, size_t i);
static inline tok_t *peek_at(parser_t *p, size_t i) {
  if (i < p->tend) {
    size_t k = i - p->tbase;
    return &p->chunks[k / TOK_CHUNK][k % TOK_CHUNK];
  }
  return hali_asm_tok_slow(p, i);
}

static inline tok_t *peek(parser_t *p) { return peek_at(p, p->pos); }
static inline tok_t *next(parser_t *p) {
  tok_t *t = peek(p);
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

/* hali_asm_parse, also telling how many token chunks (TOK_CHUNK tokens
 * each) the window ever held: the tests prove it does not grow with the
 * file. */
hali_status_t hali_asm_parse_measured(const char *text, size_t len,
                                      const char *filename,
                                      hali_ir_module_t **out_module,
                                      size_t *out_token_chunks);

/* ---- Literals (loader/asm_lex.c). */

/* A type name token (i32 or !hal.buffer ...); HALI_TYPE_NONE on error. */
hali_type_t hali_asm_parse_type(parser_t *p);
/* A string literal's escapes decoded into a malloc'ed buffer (one byte to
 * spare); NULL on error or OOM. */
char *hali_asm_decode_string(parser_t *p, const tok_t *t, size_t *out_len);
uint32_t hali_asm_intern(parser_t *p, char *str, size_t len);
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
