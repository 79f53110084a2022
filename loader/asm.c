/* hali — the .hasm assembler (grammar in doc/asm.md).
 *
 * The text is tokenised once into an array.  A first pass reads every
 * function header (so calls may name functions defined later); a second
 * pass reads each body, after pre-scanning its labels (so branches may name
 * blocks defined later).  The first error stops the parse and is reported
 * as file:line:column with what was expected and what was found.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

static void perr_at(parser_t *p, const tok_t *t, const char *fmt, ...)
    HALI_PRINTF(3, 4);
static void perr_at(parser_t *p, const tok_t *t, const char *fmt, ...) {
  if (p->error) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (t->kind == T_EOF)
    p->error = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                                "%s:%u:%u: %s, found end of file", p->file,
                                t->line, t->col, msg);
  else
    p->error = hali_status_make(HALI_STATUS_INVALID_ARGUMENT,
                                "%s:%u:%u: %s, found '%.*s'", p->file, t->line,
                                t->col, msg, (int)(t->len > 40 ? 40 : t->len),
                                t->text);
}

/* ------------------------------------------------------------------------ */
/* Lexer. */

static void lex(parser_t *p) {
  const char *s = p->src, *end = p->src + p->src_len;
  uint32_t line = 1;
  const char *line_start = s;
  while (!p->error) {
    while (s < end) {
      if (*s == '\n') {
        ++line;
        line_start = ++s;
      } else if (isspace((unsigned char)*s)) {
        ++s;
      } else if (*s == '#' || (*s == '/' && s + 1 < end && s[1] == '/')) {
        while (s < end && *s != '\n') ++s;
      } else {
        break;
      }
    }
    if (p->ntoks == p->cap) {
      size_t cap = p->cap ? p->cap * 2 : 256;
      tok_t *t = realloc(p->toks, cap * sizeof(tok_t));
      if (!t) {
        p->error = hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                                    "%s: out of memory", p->file);
        return;
      }
      p->toks = t;
      p->cap = cap;
    }
    tok_t *t = &p->toks[p->ntoks];
    t->text = s;
    t->line = line;
    t->col = (uint32_t)(s - line_start) + 1;
    if (s >= end) {
      t->kind = T_EOF;
      t->len = 0;
      p->ntoks++;
      return;
    }
    const char *start = s;
    char c = *s;
    if (c == '%' || c == '@' || c == '^' || c == '!') {
      ++s;
      while (s < end && (hali_name_char(*s) || (c == '@' && *s == ':'))) ++s;
      t->kind = c == '%' ? T_REG : c == '@' ? T_SYM : c == '^' ? T_LABEL
                                                               : T_TYPE;
      if (s == start + 1) {
        t->len = 1;
        t->kind = T_PUNCT;
        perr_at(p, t, "expected a name after '%c'", c);
        return;
      }
    } else if (isdigit((unsigned char)c) ||
               ((c == '-' || c == '+') && s + 1 < end &&
                (isdigit((unsigned char)s[1]) || s[1] == 'i' || s[1] == 'n'))) {
      ++s;
      while (s < end && (isalnum((unsigned char)*s) || *s == '.' ||
                         ((*s == '-' || *s == '+') &&
                          (s[-1] == 'e' || s[-1] == 'E' || s[-1] == 'p' ||
                           s[-1] == 'P'))))
        ++s;
      t->kind = T_NUMBER;
    } else if (isalpha((unsigned char)c) || c == '_') {
      while (s < end && (isalnum((unsigned char)*s) || *s == '_' ||
                         *s == '.'))
        ++s;
      t->kind = T_IDENT;
      /* tensor<4x?xf32> is one type token. */
      if (s - start == 6 && memcmp(start, "tensor", 6) == 0 && s < end &&
          *s == '<') {
        while (s < end && *s != '>' && *s != '\n') ++s;
        if (s >= end || *s != '>') {
          t->len = (uint32_t)(s - start);
          perr_at(p, t, "unterminated tensor type (expected '>')");
          return;
        }
        ++s;
        t->kind = T_TYPE;
      }
    } else if (c == '"') {
      ++s;
      while (s < end && *s != '"' && *s != '\n') s += (*s == '\\') ? 2 : 1;
      if (s >= end || *s != '"') {
        t->len = 1;
        t->kind = T_PUNCT;
        perr_at(p, t, "unterminated string");
        return;
      }
      ++s;
      t->kind = T_STRING;
    } else if (c == '-' && s + 1 < end && s[1] == '>') {
      s += 2;
      t->kind = T_PUNCT;
    } else if (strchr("(){}[],=:", c)) {
      ++s;
      t->kind = T_PUNCT;
    } else {
      t->len = 1;
      t->kind = T_PUNCT;
      perr_at(p, t, "unexpected character");
      return;
    }
    t->len = (uint32_t)(s - start);
    p->ntoks++;
  }
}

/* ------------------------------------------------------------------------ */
/* Token helpers. */

static tok_t *peek(parser_t *p) { return &p->toks[p->pos]; }
static tok_t *next(parser_t *p) {
  tok_t *t = &p->toks[p->pos];
  if (t->kind != T_EOF) p->pos++;
  return t;
}
static bool tok_is(const tok_t *t, tok_kind_t k, const char *s) {
  return t->kind == k && strlen(s) == t->len && memcmp(t->text, s, t->len) == 0;
}
static bool accept(parser_t *p, const char *punct) {
  if (tok_is(peek(p), T_PUNCT, punct)) {
    p->pos++;
    return true;
  }
  return false;
}
static bool expect(parser_t *p, const char *punct, const char *what) {
  if (accept(p, punct)) return true;
  perr_at(p, peek(p), "expected '%s' %s", punct, what);
  return false;
}
static bool expect_kind(parser_t *p, tok_kind_t k, const char *what,
                        tok_t **out) {
  tok_t *t = peek(p);
  if (t->kind != k) {
    perr_at(p, t, "expected %s", what);
    return false;
  }
  *out = next(p);
  return true;
}

/* Parses a type name token (i32 or !hal.buffer ...). */
static hali_type_t parse_type(parser_t *p) {
  tok_t *t = peek(p);
  hali_type_t type = HALI_TYPE_NONE;
  if (t->kind == T_IDENT || t->kind == T_TYPE)
    type = hali_type_parse(t->text, t->len);
  if (type == HALI_TYPE_NONE) {
    perr_at(p, t, "expected a type (i32, i64, f32, f64, index or a !hal type)");
    return HALI_TYPE_NONE;
  }
  next(p);
  return type;
}

/* Decodes a string literal's escapes into a malloc'ed buffer. */
static char *decode_string(parser_t *p, const tok_t *t, size_t *out_len) {
  char *out = malloc(t->len);
  if (!out) return NULL;
  size_t n = 0;
  for (uint32_t i = 1; i + 1 < t->len; ++i) {
    char c = t->text[i];
    if (c != '\\') {
      out[n++] = c;
      continue;
    }
    char e = t->text[++i];
    switch (e) {
    case 'n': out[n++] = '\n'; break;
    case 't': out[n++] = '\t'; break;
    case 'r': out[n++] = '\r'; break;
    case '0': out[n++] = '\0'; break;
    case '\\': out[n++] = '\\'; break;
    case '"': out[n++] = '"'; break;
    case 'x': {
      if (i + 2 >= t->len - 1 || !isxdigit((unsigned char)t->text[i + 1]) ||
          !isxdigit((unsigned char)t->text[i + 2])) {
        perr_at(p, t, "expected two hex digits after \\x in string");
        free(out);
        return NULL;
      }
      char hex[3] = {t->text[i + 1], t->text[i + 2], 0};
      out[n++] = (char)strtol(hex, NULL, 16);
      i += 2;
      break;
    }
    default:
      perr_at(p, t, "unknown escape '\\%c' in string", e);
      free(out);
      return NULL;
    }
  }
  *out_len = n;
  return out;
}

/* Integer literal: decimal or 0x hex, optional sign; must fit in |bits|
 * either as a signed or as an unsigned value.  Result sign-extended. */
static bool parse_int(parser_t *p, const tok_t *t, int bits, int64_t *out) {
  char buf[80];
  if (t->kind != T_NUMBER || t->len >= sizeof(buf)) {
    perr_at(p, t, "expected an i%d literal", bits);
    return false;
  }
  memcpy(buf, t->text, t->len);
  buf[t->len] = 0;
  bool neg = buf[0] == '-';
  const char *digits = (buf[0] == '-' || buf[0] == '+') ? buf + 1 : buf;
  char *end;
  errno = 0;
  unsigned long long mag = hali_parse_digits(digits, &end);
  if (*end || errno || digits[0] == '-' || digits[0] == '+' || !digits[0]) {
    perr_at(p, t, "expected an i%d literal", bits);
    return false;
  }
  if (bits < 64) {
    unsigned long long umax = (1ull << bits) - 1, smin = 1ull << (bits - 1);
    if ((!neg && mag > umax) || (neg && mag > smin)) {
      perr_at(p, t, "i%d literal out of range", bits);
      return false;
    }
    /* Keep the low |bits| and sign-extend them. */
    unsigned long long v = (neg ? 0ull - mag : mag) & umax;
    *out = (v & smin) ? (int64_t)(v | ~umax) : (int64_t)v;
  } else {
    if (neg && mag > 0x8000000000000000ull) {
      perr_at(p, t, "i64 literal out of range");
      return false;
    }
    *out = (int64_t)(neg ? 0ull - mag : mag);
  }
  return true;
}

/* Float literal: decimal, hex float, inf, -inf, nan, or bits(0x...) for an
 * exact bit pattern.  Stored as raw bits of the given width. */
static bool parse_float(parser_t *p, int bits, int64_t *out) {
  tok_t *t = peek(p);
  if (tok_is(t, T_IDENT, "bits")) {
    next(p);
    if (!expect(p, "(", "after bits")) return false;
    tok_t *n = next(p);
    int64_t v;
    if (!parse_int(p, n, bits, &v)) return false;
    if (!expect(p, ")", "after the bit pattern")) return false;
    *out = bits == 32 ? (int64_t)(uint32_t)v : v;
    return true;
  }
  char buf[80];
  if ((t->kind != T_NUMBER && t->kind != T_IDENT) || t->len >= sizeof(buf)) {
    perr_at(p, t, "expected an f%d literal", bits);
    return false;
  }
  memcpy(buf, t->text, t->len);
  buf[t->len] = 0;
  double d;
  const char *name = (buf[0] == '-' || buf[0] == '+') ? buf + 1 : buf;
  if (strcmp(name, "inf") == 0) {
    d = buf[0] == '-' ? -INFINITY : INFINITY;
  } else if (strcmp(name, "nan") == 0) {
    d = buf[0] == '-' ? -NAN : NAN;
  } else {
    char *end;
    if (t->kind != T_NUMBER || !isdigit((unsigned char)name[0])) {
      perr_at(p, t, "expected an f%d literal", bits);
      return false;
    }
    /* f32 literals round once, straight from the decimal text. */
    if (bits == 32) d = strtof(buf, &end);
    else d = strtod(buf, &end);
    if (*end) {
      perr_at(p, t, "expected an f%d literal", bits);
      return false;
    }
  }
  next(p);
  if (bits == 32) {
    float f = (float)d; /* exact: d came from strtof (or is inf/nan) */
    uint32_t u;
    memcpy(&u, &f, 4);
    *out = (int64_t)u;
  } else {
    memcpy(out, &d, 8);
  }
  return true;
}

static bool parse_xtype(parser_t *p, hali_ir_xtype_t *x);

/* A register type in a function header or locals: a scalar, a !hal type,
 * or (tensor level) tensor<...>, whose shape goes to |x|. */
static hali_type_t parse_value_type(parser_t *p, hali_ir_xtype_t *x) {
  tok_t *t = peek(p);
  memset(x, 0, sizeof(*x));
  if (t->kind == T_TYPE && t->len > 8 && memcmp(t->text, "tensor<", 7) == 0)
    return parse_xtype(p, x) ? HALI_TYPE_TENSOR : HALI_TYPE_NONE;
  return parse_type(p);
}

/* ------------------------------------------------------------------------ */
/* Function bodies. */

typedef struct {
  parser_t *p;
  hali_ir_func_t *f;
  uint32_t fidx;
  const func_header_t *headers;
} body_t;

/* The register the `%name` token |t| names in the function being read
 * (p->regs), or -1. */
static int32_t find_reg(parser_t *p, const tok_t *t) {
  uint32_t r = hali_strmap_find(&p->regs, t->text + 1, t->len - 1);
  return r == HALI_STRMAP_NONE ? -1 : (int32_t)r;
}

/* Adds register `%name` (token |t|) of |type| to |f| and to p->regs;
 * UINT32_MAX (with an error) on OOM. */
static uint32_t add_reg(parser_t *p, hali_ir_func_t *f, hali_type_t type,
                        const tok_t *t) {
  uint32_t r = hali_ir_func_add_reg(f, type, t->text + 1, t->len - 1);
  if (r == UINT32_MAX ||
      hali_strmap_insert(&p->regs, f->reg_names[r], t->len - 1, r) != r) {
    perr_at(p, t, "out of memory");
    return UINT32_MAX;
  }
  return r;
}

/* Makes p->regs index the named registers |f| has so far. */
static bool index_regs(parser_t *p, const hali_ir_func_t *f) {
  hali_strmap_clear(&p->regs);
  if (!f->reg_names) return true;
  for (uint32_t r = 0; r < f->reg_count; ++r)
    if (f->reg_names[r] &&
        hali_strmap_insert(&p->regs, f->reg_names[r],
                           strlen(f->reg_names[r]), r) == HALI_STRMAP_NONE)
      return false;
  return true;
}

/* A register operand of |type|.  Writes define new registers; reads must
 * name a register already defined (parameters or an earlier write). */
static bool parse_reg(body_t *b, const tok_t *t, hali_type_t type, bool write,
                      hali_ir_operand_t *out) {
  parser_t *p = b->p;
  if (t->kind != T_REG) {
    perr_at(p, t, "expected a register (%s)", hali_type_name(type));
    return false;
  }
  int32_t r = find_reg(p, t);
  if (r < 0) {
    if (!write) {
      perr_at(p, t, "use of undefined register");
      return false;
    }
    uint32_t nr = add_reg(p, b->f, type, t);
    if (nr == UINT32_MAX) return false;
    r = (int32_t)nr;
  } else if (type == HALI_TYPE_I64 && b->f->reg_types[r] == HALI_TYPE_INDEX) {
    /* Tensor level: an index is a 64-bit integer on the host. */
  } else if (type != HALI_TYPE_ANY_REF && b->f->reg_types[r] != type) {
    perr_at(p, t, "register is %s but this operand must be %s",
            hali_type_name(b->f->reg_types[r]), hali_type_name(type));
    return false;
  } else if (type == HALI_TYPE_ANY_REF && !hali_type_is_ref(b->f->reg_types[r])) {
    perr_at(p, t, "register is %s but this operand must be a ref",
            hali_type_name(b->f->reg_types[r]));
    return false;
  }
  out->kind = HALI_IR_REG;
  out->v = (uint32_t)r;
  return true;
}

static bool parse_block_ref(body_t *b, hali_ir_operand_t *out) {
  tok_t *t = peek(b->p);
  if (t->kind != T_LABEL) {
    perr_at(b->p, t, "expected a block label (^name)");
    return false;
  }
  uint32_t i = hali_strmap_find(&b->p->blocks, t->text + 1, t->len - 1);
  if (i == HALI_STRMAP_NONE) {
    perr_at(b->p, t, "undefined block label");
    return false;
  }
  next(b->p);
  out->kind = HALI_IR_BLOCK;
  out->v = i;
  return true;
}

/* The function the `@name` token |t| names, or -1. */
static int32_t find_func(parser_t *p, const tok_t *t) {
  uint32_t i = hali_strmap_find(&p->funcs, t->text + 1, t->len - 1);
  return i == HALI_STRMAP_NONE ? -1 : (int32_t)i;
}

/* The executable the name |s| (|len| bytes) names, or -1. */
static int32_t find_exe(parser_t *p, const char *s, size_t len) {
  uint32_t i = hali_strmap_find(&p->exes, s, len);
  return i == HALI_STRMAP_NONE ? -1 : (int32_t)i;
}

/* The index of string constant |str| (|len| bytes, malloc'ed, taken) in
 * the module, added if new; UINT32_MAX on OOM.  Like
 * hali_ir_module_intern, but through p->strings, and the string array
 * grows geometrically. */
static uint32_t intern(parser_t *p, char *str, size_t len) {
  hali_ir_module_t *m = p->m;
  uint32_t i = hali_strmap_find(&p->strings, str, len);
  if (i != HALI_STRMAP_NONE || len > UINT32_MAX / 2) {
    free(str);
    return i;
  }
  if (m->string_count == p->strings_cap) {
    uint32_t cap = p->strings_cap ? p->strings_cap * 2 : 16;
    char **strings = cap > UINT32_MAX / 2 ? NULL
                                          : realloc(m->strings, (size_t)cap *
                                                                    sizeof(char *));
    if (strings) m->strings = strings;
    uint32_t *lengths =
        strings ? realloc(m->string_lengths, (size_t)cap * sizeof(uint32_t))
                : NULL;
    if (lengths) m->string_lengths = lengths;
    if (!strings || !lengths) {
      free(str);
      return UINT32_MAX;
    }
    p->strings_cap = cap;
  }
  str[len] = 0; /* decode_string leaves room: the token has 2 quotes */
  i = m->string_count;
  if (hali_strmap_insert(&p->strings, str, len, i) != i) {
    free(str);
    return UINT32_MAX;
  }
  m->strings[i] = str;
  m->string_lengths[i] = (uint32_t)len;
  m->string_count++;
  return i;
}

static bool same_line(const tok_t *a, const tok_t *b) {
  return a->kind != T_EOF && a->line == b->line;
}

/* Operand counts are stored in 16 bits. */
#define MAX_OPERANDS 0xffffu

/* The next operand slot of the instruction being parsed, or NULL (with an
 * error) when there are too many or memory runs out. */
static hali_ir_operand_t *push_op(parser_t *p, uint32_t *n) {
  if (*n >= MAX_OPERANDS) {
    perr_at(p, peek(p), "too many operands (at most %u)", MAX_OPERANDS);
    return NULL;
  }
  if (*n == p->ops_cap) {
    size_t cap = p->ops_cap ? p->ops_cap * 2 : 16;
    hali_ir_operand_t *o = realloc(p->ops, cap * sizeof(*o));
    if (!o) {
      perr_at(p, peek(p), "out of memory");
      return NULL;
    }
    p->ops = o;
    p->ops_cap = cap;
  }
  memset(&p->ops[*n], 0, sizeof(p->ops[0]));
  return &p->ops[(*n)++];
}

/* Reads `%a, %b, ... =` (the written registers) if present, into p->defs. */
static size_t parse_defs(body_t *b) {
  parser_t *p = b->p;
  size_t n = 0;
  size_t save = p->pos;
  while (peek(p)->kind == T_REG && n < MAX_OPERANDS) {
    if (n == p->defs_cap) {
      size_t cap = p->defs_cap ? p->defs_cap * 2 : 16;
      tok_t **d = realloc(p->defs, cap * sizeof(*d));
      if (!d) break;
      p->defs = d;
      p->defs_cap = cap;
    }
    p->defs[n++] = next(p);
    if (accept(p, "=")) return n;
    if (!accept(p, ",")) break;
  }
  p->pos = save;
  return 0;
}

/* ---- The tensor level (doc/asm.md, "Tensor level"). */

static int32_t find_reg_tok(body_t *b, const tok_t *t) {
  if (t->kind != T_REG) {
    perr_at(b->p, t, "expected a register");
    return -1;
  }
  int32_t r = find_reg(b->p, t);
  if (r < 0) perr_at(b->p, t, "use of undefined register");
  return r;
}

/* Defines (or redefines, with the same shape) tensor register |t|. */
static bool def_tensor(body_t *b, const tok_t *t, const hali_ir_xtype_t *x,
                       hali_ir_operand_t *o) {
  uint32_t before = b->f->reg_count;
  if (!parse_reg(b, t, HALI_TYPE_TENSOR, true, o)) return false;
  if (o->v >= before) {
    if (!hali_ir_func_set_reg_xtype(b->f, o->v, x)) {
      perr_at(b->p, t, "out of memory");
      return false;
    }
    return true;
  }
  if (!hali_ir_xtype_equal(&b->f->reg_xtypes[o->v], x)) {
    perr_at(b->p, t, "tensor register written again with another shape or "
                     "element type");
    return false;
  }
  return true;
}

/* A tensor type token (no scalars here). */
/* The index of the rodata blob the `@name` token |s| names, or -1. */
static int32_t find_rodata(parser_t *p, const tok_t *s) {
  uint32_t k = hali_strmap_find(&p->rodata, s->text + 1, s->len - 1);
  return k == HALI_STRMAP_NONE ? -1 : (int32_t)k;
}

/* `@name` naming a rodata blob declared earlier in the module. */
static bool parse_rodata_ref(parser_t *p, hali_ir_operand_t *o) {
  tok_t *s;
  if (!expect_kind(p, T_SYM, "a rodata name (@name)", &s)) return false;
  int32_t k = find_rodata(p, s);
  if (k < 0) {
    perr_at(p, s, "undefined rodata");
    return false;
  }
  o->kind = HALI_IR_RODATA;
  o->v = (uint32_t)k;
  return true;
}

static bool parse_tensor_type(parser_t *p, hali_ir_xtype_t *x) {
  tok_t *t = peek(p);
  memset(x, 0, sizeof(*x));
  if (!(t->kind == T_TYPE && t->len > 8 && memcmp(t->text, "tensor<", 7) == 0)) {
    perr_at(p, t, "expected a tensor type (tensor<4x?xf32>)");
    return false;
  }
  return parse_xtype(p, x);
}

/* `{%d0, %d1}`: the i64 registers giving |x|'s dynamic dimensions. */
static bool parse_dyn_dims(body_t *b, const hali_ir_xtype_t *x,
                           uint32_t *nops) {
  parser_t *p = b->p;
  uint32_t want = hali_ir_xtype_dynamic_dims(x), got = 0;
  tok_t *at = peek(p);
  if (accept(p, "{") && !accept(p, "}")) {
    do {
      hali_ir_operand_t *o = push_op(p, nops);
      if (!o || !parse_reg(b, next(p), HALI_TYPE_I64, false, o)) return false;
      got++;
    } while (accept(p, ","));
    if (!expect(p, "}", "to close the dynamic dimensions")) return false;
  }
  if (got != want) {
    perr_at(p, at, "the tensor type has %u dynamic dimension(s) but %u "
                   "value(s) are given in {...}",
            want, got);
    return false;
  }
  return true;
}

static bool expect_tensor_reg(body_t *b, const tok_t *t, hali_ir_operand_t *o) {
  return parse_reg(b, t, HALI_TYPE_TENSOR, false, o);
}

typedef struct {
  int32_t tie;
  hali_ir_xtype_t x;
  uint32_t dims_at, ndims; /* in the scratch operand list */
} dresult_t;

static bool parse_tensor_op(body_t *b, int op, tok_t *opt, tok_t **defs,
                            size_t ndefs, uint32_t *nops) {
  parser_t *p = b->p;
  hali_ir_operand_t *o;
  hali_ir_xtype_t x = {0};
  bool ok = false;
#define NEED_DEFS(n)                                                        \
  if (ndefs != (n)) {                                                       \
    perr_at(p, opt, "'%.*s' defines %d register(s), %zu given",             \
            (int)opt->len, opt->text, (n), ndefs);                          \
    return false;                                                           \
  }
  switch (op) {
  case HALI_OP_TENSOR_DISPATCH: {
    tok_t *sym;
    if (!expect_kind(p, T_SYM, "@executable::@export", &sym)) return false;
    /* The lexer reads `@exe::` and `@export` as two tokens. */
    if (!(sym->len > 3 && sym->text[sym->len - 1] == ':' &&
          sym->text[sym->len - 2] == ':') ||
        peek(p)->kind != T_SYM) {
      perr_at(p, sym, "expected @executable::@export");
      return false;
    }
    tok_t *xsym = next(p);
    size_t elen = sym->len - 3;
    const char *xname = xsym->text + 1;
    size_t xlen = xsym->len - 1;
    int32_t ei = find_exe(p, sym->text + 1, elen);
    if (ei < 0) {
      perr_at(p, sym, "undefined executable");
      return false;
    }
    hali_ir_executable_t *e = &p->m->executables[ei];
    uint32_t xk = hali_strmap_find(&p->exports[ei], xname, xlen);
    int32_t xi = xk == HALI_STRMAP_NONE ? -1 : (int32_t)xk;
    if (xi < 0) {
      perr_at(p, sym, "@%s has no such export", e->name);
      return false;
    }
    for (int k = 0; k < HALI_TD_HEADER; ++k) {
      if (!(o = push_op(p, nops))) return false;
      o->kind = HALI_IR_IMM;
      o->imm = -1;
    }
    p->ops[HALI_TD_EXE].kind = HALI_IR_EXECUTABLE;
    p->ops[HALI_TD_EXE].v = (uint32_t)ei;
    p->ops[HALI_TD_EXPORT].imm = xi;
    /* Workload: registers (i64) or literals. */
    uint32_t nw = 0;
    if (!expect(p, "[", "to open the workload")) return false;
    if (!accept(p, "]")) {
      do {
        if (!(o = push_op(p, nops))) return false;
        tok_t *t = next(p);
        if (t->kind == T_NUMBER) {
          o->kind = HALI_IR_IMM;
          if (!parse_int(p, t, 64, &o->imm)) return false;
        } else if (!parse_reg(b, t, HALI_TYPE_I64, false, o)) {
          return false;
        }
        nw++;
      } while (accept(p, ","));
      if (!expect(p, "]", "to close the workload")) return false;
    }
    if (nw > 3) {
      perr_at(p, sym, "a workload has at most 3 dimensions, %u given", nw);
      return false;
    }
    uint32_t first_operand = *nops, nargs = 0;
    if (!expect(p, "(", "to open the operands")) return false;
    if (!accept(p, ")")) {
      do {
        tok_t *t = next(p);
        int32_t r = find_reg_tok(b, t);
        if (r < 0) return false;
        if (hali_type_is_ref(b->f->reg_types[r])) {
          perr_at(p, t, "dispatch operands are tensors and scalars, not refs");
          return false;
        }
        if (!(o = push_op(p, nops))) return false;
        o->kind = HALI_IR_REG;
        o->v = (uint32_t)r;
        nargs++;
      } while (accept(p, ","));
      if (!expect(p, ")", "to close the operands")) return false;
    }
    /* Results: [%operand as] tensor<...>[{dims}] */
    dresult_t res[16];
    uint32_t nres = 0;
    if (accept(p, "->")) {
      bool paren = accept(p, "(");
      do {
        if (nres == 16) {
          perr_at(p, peek(p), "too many results");
          goto fail;
        }
        dresult_t *d = &res[nres];
        d->tie = -1;
        if (peek(p)->kind == T_REG) {
          tok_t *t = next(p);
          int32_t r = find_reg_tok(b, t);
          if (r < 0) goto fail;
          for (uint32_t k = 0; k < nargs; ++k)
            if (p->ops[first_operand + k].v == (uint32_t)r) d->tie = (int32_t)k;
          if (d->tie < 0) {
            perr_at(p, t, "a tied result names one of the dispatch's operands");
            goto fail;
          }
          if (!tok_is(peek(p), T_IDENT, "as")) {
            perr_at(p, peek(p), "expected 'as' after the tied operand");
            goto fail;
          }
          next(p);
        }
        if (!parse_tensor_type(p, &d->x)) goto fail;
        nres++;
        d->dims_at = *nops;
        if (!parse_dyn_dims(b, &d->x, nops)) goto fail;
        d->ndims = *nops - d->dims_at;
      } while (paren && accept(p, ","));
      if (paren && !expect(p, ")", "to close the results")) goto fail;
    }
    if (nres != ndefs) {
      perr_at(p, opt, "the dispatch has %u result type(s) but %zu register(s) "
                      "are assigned",
              nres, ndefs);
      goto fail;
    }
    /* Move the dims (parsed inline) behind the results and ties. */
    uint32_t dims_start = nres ? res[0].dims_at : *nops;
    uint32_t ndim_total = *nops - dims_start;
    hali_ir_operand_t dimbuf[64];
    if (ndim_total > 64) {
      perr_at(p, opt, "too many dynamic dimensions");
      goto fail;
    }
    memcpy(dimbuf, p->ops + dims_start, ndim_total * sizeof(dimbuf[0]));
    *nops = dims_start;
    for (uint32_t k = 0; k < nres; ++k) {
      if (!(o = push_op(p, nops)) || !def_tensor(b, defs[k], &res[k].x, o))
        goto fail;
    }
    for (uint32_t k = 0; k < nres; ++k) {
      if (!(o = push_op(p, nops))) goto fail;
      o->kind = HALI_IR_IMM;
      o->imm = res[k].tie;
    }
    for (uint32_t k = 0; k < ndim_total; ++k) {
      if (!(o = push_op(p, nops))) goto fail;
      *o = dimbuf[k];
    }
    p->ops[HALI_TD_NWORKLOAD].imm = nw;
    p->ops[HALI_TD_NOPERANDS].imm = nargs;
    p->ops[HALI_TD_NRESULTS].imm = nres;
    if (tok_is(peek(p), T_IDENT, "interface")) {
      next(p);
      int64_t nb, nc;
      if (!expect(p, "(", "after interface") ||
          !tok_is(peek(p), T_IDENT, "bindings")) {
        perr_at(p, peek(p), "expected interface(bindings N, constants M)");
        goto fail;
      }
      next(p);
      if (!parse_int(p, next(p), 32, &nb) || !expect(p, ",", "") ||
          !tok_is(peek(p), T_IDENT, "constants")) {
        perr_at(p, peek(p), "expected interface(bindings N, constants M)");
        goto fail;
      }
      next(p);
      if (!parse_int(p, next(p), 32, &nc) || !expect(p, ")", "")) goto fail;
      p->ops[HALI_TD_BINDINGS].imm = nb;
      p->ops[HALI_TD_CONSTANTS].imm = nc;
    }
    for (uint32_t k = 0; k < nres; ++k) free(res[k].x.dims);
    return true;
  fail:
    for (uint32_t k = 0; k < nres; ++k) free(res[k].x.dims);
    return false;
  }
  case HALI_OP_TENSOR_SPLAT:
  case HALI_OP_TENSOR_IMPORT: {
    NEED_DEFS(1);
    hali_ir_operand_t *r0 = push_op(p, nops);
    if (!r0) return false;
    uint32_t vi = *nops;
    if (!(o = push_op(p, nops))) return false;
    tok_t *src = next(p);
    if (op == HALI_OP_TENSOR_IMPORT) {
      if (!parse_reg(b, src, HALI_TYPE_BUFFER_VIEW, false, o)) return false;
    } else {
      int32_t r = find_reg_tok(b, src);
      if (r < 0) return false;
      hali_type_t t = b->f->reg_types[r];
      if (t != HALI_TYPE_I32 && t != HALI_TYPE_I64 && t != HALI_TYPE_F32 &&
          t != HALI_TYPE_F64) {
        perr_at(p, src, "tensor.splat takes a scalar register (i32, i64, f32 "
                        "or f64; not %s)",
                hali_type_name(t));
        return false;
      }
      o->kind = HALI_IR_REG;
      o->v = (uint32_t)r;
    }
    (void)vi;
    if (!expect(p, ":", "before the tensor type") || !parse_tensor_type(p, &x))
      return false;
    ok = parse_dyn_dims(b, &x, nops) && def_tensor(b, defs[0], &x, &p->ops[0]);
    free(x.dims);
    return ok;
  }
  case HALI_OP_TENSOR_CONSTANT: {
    NEED_DEFS(1);
    if (!push_op(p, nops) || !(o = push_op(p, nops))) return false;
    if (!parse_rodata_ref(p, o)) return false;
    if (!expect(p, ":", "before the tensor type") || !parse_tensor_type(p, &x))
      return false;
    if (hali_ir_xtype_dynamic_dims(&x)) {
      perr_at(p, &p->toks[p->pos - 1], "a constant has a static shape");
      free(x.dims);
      return false;
    }
    ok = def_tensor(b, defs[0], &x, &p->ops[0]);
    free(x.dims);
    return ok;
  }
  case HALI_OP_TENSOR_CLONE: {
    NEED_DEFS(1);
    if (!push_op(p, nops) || !(o = push_op(p, nops))) return false;
    if (!expect_tensor_reg(b, next(p), o)) return false;
    hali_ir_xtype_t src;
    if (!hali_ir_xtype_copy(&src, &b->f->reg_xtypes[p->ops[1].v])) return false;
    ok = def_tensor(b, defs[0], &src, &p->ops[0]);
    free(src.dims);
    return ok;
  }
  case HALI_OP_TENSOR_OVERWRITE: {
    NEED_DEFS(0);
    if (!(o = push_op(p, nops)) || !expect_tensor_reg(b, next(p), o) ||
        !expect(p, ",", "between the value and the mutable argument") ||
        !(o = push_op(p, nops)))
      return false;
    tok_t *t = next(p);
    if (!expect_tensor_reg(b, t, o)) return false;
    if (o->v >= b->f->param_count) {
      perr_at(p, t, "tensor.overwrite writes into a parameter");
      return false;
    }
    return true;
  }
  case HALI_OP_TENSOR_EXPORT: {
    NEED_DEFS(1);
    if (!(o = push_op(p, nops)) ||
        !parse_reg(b, defs[0], HALI_TYPE_BUFFER_VIEW, true, o) ||
        !(o = push_op(p, nops)))
      return false;
    return expect_tensor_reg(b, next(p), o);
  }
  case HALI_OP_TENSOR_WAIT:
  case HALI_OP_TENSOR_BARRIER:
    NEED_DEFS(0);
    if (!(o = push_op(p, nops))) return false;
    return parse_reg(b, next(p), HALI_TYPE_FENCE, false, o);
  default:
    perr_at(p, opt, "write groups as `execute {`, `concurrent {` and `}`");
    return false;
  }
#undef NEED_DEFS
}

static bool parse_insn(body_t *b, hali_ir_block_t *blk) {
  parser_t *p = b->p;
  tok_t *first = peek(p);
  size_t ndefs = parse_defs(b);
  tok_t **defs = p->defs;
  tok_t *opt = peek(p);
  if (opt->kind != T_IDENT) {
    perr_at(p, opt, "expected an instruction");
    return false;
  }
  int op = hali_op_lookup(opt->text, opt->len);
  if (op < 0) {
    perr_at(p, opt, "unknown op");
    return false;
  }
  next(p);
  const hali_op_info_t *info = hali_op_info((unsigned)op);
  hali_ir_operand_t *o;
  uint32_t nops = 0;
  uint16_t aux = 0;

  if (hali_op_is_call((uint16_t)op)) {
    tok_t *callee;
    if (!expect_kind(p, T_SYM, "a function (@name) to call", &callee))
      return false;
    int32_t fi = find_func(p, callee);
    if (fi < 0) {
      perr_at(p, callee, "call to undefined function");
      return false;
    }
    hali_ir_func_t *cf = &p->m->funcs[fi];
    if (!(o = push_op(p, &nops))) return false;
    o->kind = HALI_IR_FUNC;
    o->v = (uint32_t)fi;
    if (!expect(p, "(", "before call arguments")) return false;
    uint32_t nargs = 0;
    if (!accept(p, ")")) {
      do {
        tok_t *a = next(p);
        if (nargs >= cf->param_count) {
          perr_at(p, a, "too many arguments: @%s takes %u", cf->name,
                  cf->param_count);
          return false;
        }
        if (!(o = push_op(p, &nops)) ||
            !parse_reg(b, a, cf->reg_types[nargs], false, o))
          return false;
        nargs++;
      } while (accept(p, ","));
      if (!expect(p, ")", "after call arguments")) return false;
    }
    if (nargs != cf->param_count) {
      perr_at(p, callee, "@%s takes %u argument(s), %u given", cf->name,
              cf->param_count, nargs);
      return false;
    }
    const hali_type_t *rtypes;
    uint32_t nres = hali_ir_call_results((uint16_t)op, cf, &rtypes);
    if (ndefs != nres) {
      if (op == HALI_OP_CALL)
        perr_at(p, callee, "@%s returns %u value(s), %zu assigned", cf->name,
                nres, ndefs);
      else
        perr_at(p, callee, "fiber.spawn gives one !hal.fence, %zu assigned",
                ndefs);
      return false;
    }
    for (size_t i = 0; i < ndefs; ++i) {
      if (!(o = push_op(p, &nops))) return false;
      /* A tensor result takes the callee's declared shape. */
      if (rtypes[i] == HALI_TYPE_TENSOR && op == HALI_OP_CALL &&
          cf->result_xtypes) {
        if (!def_tensor(b, defs[i], &cf->result_xtypes[i], o)) return false;
      } else if (!parse_reg(b, defs[i], rtypes[i], true, o)) {
        return false;
      }
    }
    aux = (uint16_t)nargs;
  } else if (info->flags & HALI_OPF_TENSOR) {
    if (!parse_tensor_op(b, op, opt, defs, ndefs, &nops)) return false;
  } else if (op == HALI_OP_RETURN) {
    if (ndefs) {
      perr_at(p, first, "return does not define registers");
      return false;
    }
    while (peek(p)->kind == T_REG && same_line(peek(p), opt)) {
      tok_t *r = next(p);
      if (nops >= b->f->result_count) {
        perr_at(p, r, "too many return values: @%s returns %u", b->f->name,
                b->f->result_count);
        return false;
      }
      uint32_t k = nops;
      if (!(o = push_op(p, &nops)) ||
          !parse_reg(b, r, b->f->results[k], false, o))
        return false;
      if (!(tok_is(peek(p), T_PUNCT, ",") && same_line(peek(p), opt))) break;
      next(p);
    }
    if (nops != b->f->result_count) {
      perr_at(p, opt, "@%s returns %u value(s), return gives %u", b->f->name,
              b->f->result_count, nops);
      return false;
    }
  } else {
    size_t ndef_used = 0;
    bool first_use = true;
    for (uint32_t i = 0; i < info->operand_count; ++i) {
      const hali_operand_desc_t *d = &info->operands[i];
      if (!(o = push_op(p, &nops))) return false;
      if (d->role == HALI_ROLE_WRITE) {
        if (ndef_used >= ndefs) {
          perr_at(p, opt, "'%s' defines a register: expected '%%name = %s'",
                  info->name, info->name);
          return false;
        }
        if (!parse_reg(b, defs[ndef_used++], d->type, true, o)) return false;
        continue;
      }
      if (!first_use && !expect(p, ",", "between operands")) return false;
      first_use = false;
      switch (d->role) {
      case HALI_ROLE_READ:
        if (!parse_reg(b, next(p), d->type, false, o)) return false;
        break;
      case HALI_ROLE_IMM:
        o->kind = HALI_IR_IMM;
        if (d->type == HALI_TYPE_I32 || d->type == HALI_TYPE_I64) {
          if (!parse_int(p, next(p), d->type == HALI_TYPE_I32 ? 32 : 64,
                         &o->imm))
            return false;
        } else if (!parse_float(p, d->type == HALI_TYPE_F32 ? 32 : 64,
                                &o->imm)) {
          return false;
        }
        break;
      case HALI_ROLE_BLOCK:
        if (!parse_block_ref(b, o)) return false;
        break;
      case HALI_ROLE_STRING: {
        tok_t *s;
        if (!expect_kind(p, T_STRING, "a string", &s)) return false;
        size_t len;
        char *str = decode_string(p, s, &len);
        if (!str) {
          perr_at(p, s, "bad string");
          return false;
        }
        o->kind = HALI_IR_STRING;
        if ((o->v = intern(p, str, len)) == UINT32_MAX) {
          perr_at(p, s, "out of memory");
          return false;
        }
        break;
      }
      case HALI_ROLE_EXECUTABLE: {
        tok_t *s;
        if (!expect_kind(p, T_SYM, "an executable name (@name)", &s))
          return false;
        int32_t xi = find_exe(p, s->text + 1, s->len - 1);
        if (xi < 0) {
          perr_at(p, s, "undefined executable");
          return false;
        }
        o->kind = HALI_IR_EXECUTABLE;
        o->v = (uint32_t)xi;
        break;
      }
      case HALI_ROLE_RODATA: {
        if (!parse_rodata_ref(p, o)) return false;
        break;
      }
      default:
        perr_at(p, opt, "internal: unsupported operand role");
        return false;
      }
    }
    if (ndef_used != ndefs) {
      perr_at(p, first, "'%s' defines %zu register(s), %zu given", info->name,
              ndef_used, ndefs);
      return false;
    }
    if (info->tail) {
      /* The variadic tail: `, [x, y, ...]` of blocks or registers. */
      if ((info->operand_count > ndef_used &&
           !expect(p, ",", "before the bracketed list")) ||
          !expect(p, "[", "to open the bracketed list"))
        return false;
      if (!accept(p, "]")) {
        do {
          if (!(o = push_op(p, &nops))) return false;
          if (info->tail == 'b') {
            if (!parse_block_ref(b, o)) return false;
          } else if (!parse_reg(b, next(p), info->tail_type, false, o)) {
            return false;
          }
        } while (accept(p, ","));
        if (!expect(p, "]", "to close the bracketed list")) return false;
      }
    }
  }

  uint32_t line = first->line;
  if (tok_is(peek(p), T_IDENT, "loc") && same_line(peek(p), opt)) {
    next(p);
    int64_t l;
    if (!expect(p, "(", "after loc") || !parse_int(p, next(p), 32, &l) ||
        !expect(p, ")", "after the line number"))
      return false;
    line = (uint32_t)l;
  }
  hali_ir_insn_t *insn = hali_ir_block_add_insn(blk, (uint16_t)op, nops);
  if (!insn) {
    perr_at(p, opt, "out of memory");
    return false;
  }
  if (nops) memcpy(insn->operands, p->ops, nops * sizeof(p->ops[0]));
  insn->aux = aux;
  insn->line = line;
  return true;
}

/* `execute { loc(N)` and `} loc(N)`: the line of a group marker. */
static bool parse_group_loc(parser_t *p, const tok_t *at, hali_ir_insn_t *g) {
  if (!(tok_is(peek(p), T_IDENT, "loc") && same_line(peek(p), at))) return true;
  next(p);
  int64_t l;
  if (!expect(p, "(", "after loc") || !parse_int(p, next(p), 32, &l) ||
      !expect(p, ")", "after the line number"))
    return false;
  g->line = (uint32_t)l;
  return true;
}

static bool parse_body(parser_t *p, hali_ir_func_t *f,
                       const func_header_t *headers, uint32_t fidx) {
  body_t b = {p, f, fidx, headers};
  p->pos = headers[fidx].body;
  next(p); /* '{' */
  /* Pre-scan labels so that branches may refer forward. */
  size_t depth = 1, i = p->pos;
  bool implicit_entry = !(p->toks[i].kind == T_LABEL &&
                          tok_is(&p->toks[i + 1], T_PUNCT, ":"));
  hali_strmap_clear(&p->blocks);
  if (!index_regs(p, f) ||
      (implicit_entry &&
       (!hali_ir_func_add_block(f, "entry", 5) ||
        hali_strmap_insert(&p->blocks, f->blocks[0].name, 5, 0) != 0)))
    return false;
  for (; p->toks[i].kind != T_EOF; ++i) {
    tok_t *t = &p->toks[i];
    if (tok_is(t, T_PUNCT, "{")) depth++;
    if (tok_is(t, T_PUNCT, "}") && --depth == 0) break;
    if (t->kind == T_LABEL && tok_is(&p->toks[i + 1], T_PUNCT, ":")) {
      uint32_t k = f->block_count;
      /* The key is the label in the source: the block's name is a copy. */
      uint32_t got = hali_strmap_insert(&p->blocks, t->text + 1, t->len - 1, k);
      if (got == HALI_STRMAP_NONE) return false;
      if (got != k) {
        perr_at(p, t, "block label defined twice");
        return false;
      }
      if (!hali_ir_func_add_block(f, t->text + 1, t->len - 1)) return false;
    }
  }
  int32_t cur = implicit_entry ? 0 : -1;
  uint32_t groups = 0; /* open execute / concurrent groups */
  while (!p->error) {
    tok_t *t = peek(p);
    if ((tok_is(t, T_IDENT, "execute") || tok_is(t, T_IDENT, "concurrent")) &&
        tok_is(&p->toks[p->pos + 1], T_PUNCT, "{") && cur >= 0) {
      hali_ir_insn_t *g = hali_ir_block_add_insn(
          &f->blocks[cur],
          tok_is(t, T_IDENT, "execute") ? HALI_OP_TENSOR_EXECUTE
                                        : HALI_OP_TENSOR_CONCURRENT,
          0);
      if (!g) return false;
      g->line = t->line;
      p->pos += 2;
      if (!parse_group_loc(p, t, g)) return false;
      groups++;
      continue;
    }
    if (groups && tok_is(t, T_PUNCT, "}")) {
      hali_ir_insn_t *g =
          hali_ir_block_add_insn(&f->blocks[cur], HALI_OP_TENSOR_END, 0);
      if (!g) return false;
      g->line = t->line;
      p->pos++;
      if (!parse_group_loc(p, t, g)) return false;
      groups--;
      continue;
    }
    if (accept(p, "}")) return true;
    if (t->kind == T_EOF) {
      perr_at(p, t, "expected '}' to close @%s", f->name);
      return false;
    }
    if (t->kind == T_LABEL && tok_is(&p->toks[p->pos + 1], T_PUNCT, ":")) {
      p->pos += 2;
      cur++;
      continue;
    }
    if (!parse_insn(&b, &f->blocks[cur])) return false;
  }
  return false;
}

/* rodata @name = bytes "..."  |  rodata @name = KIND[v, v, ...] */
static bool parse_rodata(parser_t *p) {
  tok_t *name;
  if (!expect_kind(p, T_SYM, "a rodata name (@name)", &name)) return false;
  if (find_rodata(p, name) >= 0) {
    perr_at(p, name, "rodata defined twice");
    return false;
  }
  if (!expect(p, "=", "after the rodata name")) return false;
  tok_t *kt = peek(p);
  uint8_t kind = HALI_RODATA_KIND_COUNT;
  for (uint8_t k = 0; k < HALI_RODATA_KIND_COUNT; ++k)
    if (tok_is(kt, T_IDENT, hali_rodata_kind_name(k))) kind = k;
  if (kind == HALI_RODATA_KIND_COUNT) {
    perr_at(p, kt, "expected bytes, i8, i16, i32, i64, f32 or f64");
    return false;
  }
  next(p);
  if (kind == HALI_RODATA_BYTES) {
    tok_t *s;
    if (!expect_kind(p, T_STRING, "a string of bytes", &s)) return false;
    size_t len;
    char *bytes = decode_string(p, s, &len);
    if (!bytes) return false;
    bool ok = hali_ir_module_add_rodata(p->m, name->text + 1, name->len - 1,
                                        kind, bytes, len) != NULL;
    free(bytes);
    if (!ok) perr_at(p, s, "out of memory");
    return ok;
  }
  if (!expect(p, "[", "to open the values")) return false;
  uint32_t esize = hali_rodata_kind_size(kind);
  size_t cap = 64, n = 0;
  uint8_t *buf = malloc(cap * esize);
  bool ok = buf != NULL;
  if (ok && !accept(p, "]")) {
    do {
      int64_t v;
      if (kind == HALI_RODATA_F32 || kind == HALI_RODATA_F64)
        ok = parse_float(p, kind == HALI_RODATA_F32 ? 32 : 64, &v);
      else
        ok = parse_int(p, next(p), (int)esize * 8, &v);
      if (!ok) break;
      if (n == cap) {
        uint8_t *g = realloc(buf, (cap *= 2) * esize);
        if (!g) {
          ok = false;
          break;
        }
        buf = g;
      }
      /* Little-endian, the low |esize| bytes of the value's bits. */
      for (uint32_t b = 0; b < esize; ++b)
        buf[n * esize + b] = (uint8_t)((uint64_t)v >> (8 * b));
      n++;
    } while (accept(p, ","));
    ok = ok && expect(p, "]", "to close the values");
  }
  if (ok && !hali_ir_module_add_rodata(p->m, name->text + 1, name->len - 1,
                                       kind, buf, (uint64_t)n * esize)) {
    perr_at(p, name, "out of memory");
    ok = false;
  }
  free(buf);
  return ok;
}

/* A signature value: i32 | i64 | f32 | f64 | tensor<4x?xf32>. */
static bool parse_xtype(parser_t *p, hali_ir_xtype_t *x) {
  tok_t *t = peek(p);
  if (t->kind == T_TYPE && t->len > 8 && memcmp(t->text, "tensor<", 7) == 0) {
    const char *s = t->text + 7, *end = t->text + t->len - 1;
    while (s < end) {
      const char *part = s;
      while (s < end && *s != 'x') ++s;
      size_t len = (size_t)(s - part);
      if (s == end) { /* the element type */
        hali_hal_element_type_t et;
        hali_status_t st = hali_hal_element_type_parse(part, len, &et);
        if (st) {
          hali_status_free(st);
          perr_at(p, t, "unknown element type '%.*s' in tensor type",
                  (int)len, part);
          return false;
        }
        x->type = HALI_TYPE_NONE;
        x->element_type = et;
        uint64_t bytes;
        uint32_t at;
        if (!hali_ir_xtype_static_bytes(x, &bytes, &at)) {
          if (at < x->rank)
            perr_at(p, t, "tensor type too large: the product of its "
                          "dimensions overflows 64 bits at dimension %u (%lld)",
                    at, (long long)x->dims[at]);
          else
            perr_at(p, t, "tensor type too large: its element count times "
                          "the %u-byte element size (%.*s) overflows 64 bits",
                    hali_hal_element_type_byte_size(et), (int)len, part);
          return false;
        }
        next(p);
        return true;
      }
      int64_t dim = -1;
      if (!(len == 1 && part[0] == '?')) {
        char buf[24];
        char *e;
        if (len == 0 || len >= sizeof(buf) || !isdigit((unsigned char)part[0])) {
          perr_at(p, t, "bad dimension '%.*s' in tensor type", (int)len, part);
          return false;
        }
        memcpy(buf, part, len);
        buf[len] = 0;
        errno = 0;
        dim = (int64_t)strtoll(buf, &e, 10);
        if (*e || errno || dim < 0) {
          perr_at(p, t, "bad dimension '%.*s' in tensor type", (int)len, part);
          return false;
        }
      }
      int64_t *dims = realloc(x->dims, (x->rank + 1) * sizeof(int64_t));
      if (!dims) return false;
      x->dims = dims;
      x->dims[x->rank++] = dim;
      ++s; /* 'x' */
    }
    perr_at(p, t, "tensor type without an element type");
    return false;
  }
  hali_type_t type = parse_type(p);
  if (type == HALI_TYPE_NONE) return false;
  /* Refs parse here so that materialize-interfaces can reject them with
   * the export and argument named (doc/passes.md). */
  x->type = type;
  return true;
}

static bool parse_xtypes(parser_t *p, hali_ir_xtype_t **v, uint32_t *n,
                         bool parens_required) {
  bool paren = accept(p, "(");
  if (parens_required && !paren) {
    perr_at(p, peek(p), "expected '(' to open the signature");
    return false;
  }
  if (paren && accept(p, ")")) return true;
  do {
    hali_ir_xtype_t *x = hali_ir_xtype_append(v, n);
    if (!x || !parse_xtype(p, x)) return false;
  } while (paren && accept(p, ","));
  return !paren || expect(p, ")", "to close the signature");
}

static bool parse_string_attr(parser_t *p, char **out) {
  tok_t *s;
  size_t len;
  if (!expect_kind(p, T_STRING, "a string", &s)) return false;
  char *str = decode_string(p, s, &len);
  if (!str) return false;
  if (memchr(str, 0, len)) {
    free(str);
    perr_at(p, s, "names may not contain NUL");
    return false;
  }
  str[len] = 0; /* decode_string leaves room: the token has 2 quotes */
  free(*out);
  *out = str;
  return true;
}

/* executable @name format "ffi" [library "path"] {
 *   export @k(SIG...) -> (SIG...) [symbol "s"] [function @f]
 *          [workgroup_size [x, y, z]] [workgroup_info] [returns_status]
 * } */
static bool parse_executable(parser_t *p) {
  tok_t *name;
  if (!expect_kind(p, T_SYM, "an executable name (@name)", &name)) return false;
  uint32_t ei = p->m->executable_count;
  uint32_t got = hali_strmap_insert(&p->exes, name->text + 1, name->len - 1, ei);
  if (got != ei) {
    if (got == HALI_STRMAP_NONE) perr_at(p, name, "out of memory");
    else perr_at(p, name, "executable defined twice");
    return false;
  }
  hali_strmap_t *maps = realloc(p->exports, (ei + 1) * sizeof(*maps));
  if (!maps) return false;
  p->exports = maps;
  memset(&maps[ei], 0, sizeof(maps[ei]));
  hali_ir_executable_t *e =
      hali_ir_module_add_executable(p->m, name->text + 1, name->len - 1);
  if (!e) return false;
  if (!tok_is(peek(p), T_IDENT, "format")) {
    perr_at(p, peek(p), "expected 'format \"NAME\"' after the executable name");
    return false;
  }
  next(p);
  if (!parse_string_attr(p, &e->format)) return false;
  if (tok_is(peek(p), T_IDENT, "library")) {
    next(p);
    if (!parse_string_attr(p, &e->library)) return false;
  }
  if (!expect(p, "{", "to open the executable")) return false;
  while (!accept(p, "}")) {
    if (!tok_is(peek(p), T_IDENT, "export")) {
      perr_at(p, peek(p), "expected 'export' or '}'");
      return false;
    }
    next(p);
    tok_t *xn;
    if (!expect_kind(p, T_SYM, "an export name (@name)", &xn)) return false;
    uint32_t xk = e->export_count;
    uint32_t had = hali_strmap_insert(&p->exports[ei], xn->text + 1,
                                      xn->len - 1, xk);
    if (had != xk) {
      if (had == HALI_STRMAP_NONE) perr_at(p, xn, "out of memory");
      else perr_at(p, xn, "export defined twice in @%s", e->name);
      return false;
    }
    hali_ir_export_t *x =
        hali_ir_executable_add_export(e, xn->text + 1, xn->len - 1);
    if (!x || !parse_xtypes(p, &x->params, &x->param_count, true)) return false;
    if (accept(p, "->") &&
        !parse_xtypes(p, &x->results, &x->result_count, false))
      return false;
    for (;;) {
      tok_t *a = peek(p);
      if (tok_is(a, T_IDENT, "symbol")) {
        next(p);
        if (!parse_string_attr(p, &x->symbol)) return false;
      } else if (tok_is(a, T_IDENT, "function")) {
        next(p);
        tok_t *f;
        if (!expect_kind(p, T_SYM, "a kernel function (@name)", &f))
          return false;
        int32_t fi = find_func(p, f);
        x->function = fi < 0 ? UINT32_MAX : (uint32_t)fi;
        if (x->function == UINT32_MAX) {
          perr_at(p, f, "undefined kernel function");
          return false;
        }
      } else if (tok_is(a, T_IDENT, "workgroup_size")) {
        next(p);
        if (!expect(p, "[", "to open the workgroup size")) return false;
        for (int k = 0; k < 3; ++k) {
          int64_t v;
          if ((k && !expect(p, ",", "between workgroup sizes")) ||
              !parse_int(p, next(p), 32, &v))
            return false;
          if (v <= 0) {
            perr_at(p, &p->toks[p->pos - 1], "workgroup sizes must be >= 1");
            return false;
          }
          x->workgroup_size[k] = (uint32_t)v;
        }
        if (!expect(p, "]", "to close the workgroup size")) return false;
      } else if (tok_is(a, T_IDENT, "layout")) {
        /* layout(constants N, bindings M): a declared interface, checked
         * against the signature by materialize-interfaces. */
        next(p);
        int64_t nc, nb;
        if (!expect(p, "(", "after layout") ||
            !tok_is(peek(p), T_IDENT, "constants")) {
          perr_at(p, peek(p), "expected layout(constants N, bindings M)");
          return false;
        }
        next(p);
        tok_t *nct = next(p);
        if (!parse_int(p, nct, 32, &nc) ||
            !expect(p, ",", "in layout(constants N, bindings M)") ||
            !tok_is(peek(p), T_IDENT, "bindings")) {
          perr_at(p, peek(p), "expected layout(constants N, bindings M)");
          return false;
        }
        next(p);
        tok_t *nbt = next(p);
        if (!parse_int(p, nbt, 32, &nb) ||
            !expect(p, ")", "to close the layout"))
          return false;
        /* parse_int sign-extends: 4294967295 reads as -1. */
        if (nc < 0 || nb < 0) {
          perr_at(p, nc < 0 ? nct : nbt,
                  "layout counts are between 0 and 2147483647");
          return false;
        }
        x->layout_declared = true;
        x->layout_constants = (uint32_t)nc;
        x->layout_bindings = (uint32_t)nb;
      } else if (tok_is(a, T_IDENT, "workgroup_info")) {
        next(p);
        x->flags |= HALI_EXPORT_WORKGROUP_INFO;
      } else if (tok_is(a, T_IDENT, "returns_status")) {
        next(p);
        x->flags |= HALI_EXPORT_RETURNS_STATUS;
      } else {
        break;
      }
    }
  }
  return true;
}

/* func @name(%a: T, ...) -> T | -> (T, ...) { */
static bool parse_header(parser_t *p, func_header_t *h) {
  tok_t *name;
  if (!expect_kind(p, T_SYM, "a function name (@name)", &name)) return false;
  uint32_t fi = p->m->func_count;
  uint32_t got = hali_strmap_insert(&p->funcs, name->text + 1, name->len - 1, fi);
  if (got != fi) {
    if (got == HALI_STRMAP_NONE) perr_at(p, name, "out of memory");
    else perr_at(p, name, "function defined twice");
    return false;
  }
  hali_strmap_clear(&p->regs);
  hali_ir_func_t *f = hali_ir_module_add_func(p->m, name->text + 1, name->len - 1);
  if (!f) {
    perr_at(p, name, "out of memory");
    return false;
  }
  f->line = name->line;
  h->name = name->text + 1;
  h->len = name->len - 1;
  if (!expect(p, "(", "to open the parameter list")) return false;
  if (!accept(p, ")")) {
    do {
      tok_t *r;
      if (!expect_kind(p, T_REG, "a parameter (%name: type)", &r)) return false;
      if (find_reg(p, r) >= 0) {
        perr_at(p, r, "parameter named twice");
        return false;
      }
      if (!expect(p, ":", "after the parameter name")) return false;
      bool mut = false;
      if (tok_is(peek(p), T_IDENT, "mutable")) {
        next(p);
        mut = true;
      }
      hali_ir_xtype_t x;
      hali_type_t type = parse_value_type(p, &x);
      if (type == HALI_TYPE_NONE) return false;
      if (mut && type != HALI_TYPE_TENSOR && type != HALI_TYPE_BUFFER_VIEW) {
        free(x.dims);
        perr_at(p, r, "only tensor (or buffer view) parameters may be mutable");
        return false;
      }
      uint32_t reg = add_reg(p, f, type, r);
      bool okx = reg != UINT32_MAX &&
                 (type != HALI_TYPE_TENSOR || hali_ir_func_set_reg_xtype(f, reg, &x));
      free(x.dims);
      if (!okx) return false;
      if (mut || f->param_flags) {
        uint8_t *pf = realloc(f->param_flags, f->param_count + 1);
        if (!pf) return false;
        if (!f->param_flags) memset(pf, 0, f->param_count + 1);
        f->param_flags = pf;
        pf[f->param_count] = mut ? HALI_PARAM_MUTABLE : 0;
      }
      f->param_count++;
    } while (accept(p, ","));
    if (!expect(p, ")", "to close the parameter list")) return false;
  }
  if (accept(p, "->")) {
    bool paren = accept(p, "(");
    if (!(paren && accept(p, ")"))) {
      do {
        int32_t tie = -1;
        if (peek(p)->kind == T_REG) {
          tok_t *r = next(p);
          int32_t reg = find_reg(p, r);
          if (reg < 0 || (uint32_t)reg >= f->param_count) {
            perr_at(p, r, "a tied result names a parameter");
            return false;
          }
          if (!tok_is(peek(p), T_IDENT, "as")) {
            perr_at(p, peek(p), "expected 'as' after the tied parameter");
            return false;
          }
          next(p);
          tie = reg;
        }
        hali_ir_xtype_t x;
        hali_type_t type = parse_value_type(p, &x);
        if (type == HALI_TYPE_NONE) return false;
        if (type != HALI_TYPE_TENSOR) x.type = type;
        hali_type_t *rs = realloc(f->results, f->result_count + 1);
        if (!rs) {
          free(x.dims);
          return false;
        }
        f->results = rs;
        if ((type == HALI_TYPE_TENSOR || tie >= 0) && !f->result_xtypes) {
          f->result_xtypes = calloc(f->result_count + 17, sizeof(hali_ir_xtype_t));
          f->result_ties = malloc((f->result_count + 17) * sizeof(int32_t));
          if (!f->result_xtypes || !f->result_ties) {
            free(x.dims);
            return false;
          }
          for (uint32_t k = 0; k < f->result_count + 17; ++k) f->result_ties[k] = -1;
          for (uint32_t k = 0; k < f->result_count; ++k)
            f->result_xtypes[k].type = f->results[k];
        }
        if (f->result_xtypes) {
          if (f->result_count >= 16) {
            free(x.dims);
            perr_at(p, peek(p), "at most 16 results at the tensor level");
            return false;
          }
          f->result_xtypes[f->result_count] = x;
          f->result_ties[f->result_count] = tie;
        } else {
          free(x.dims);
        }
        f->results[f->result_count++] = type;
      } while (paren && accept(p, ","));
      if (paren && !expect(p, ")", "to close the result list")) return false;
    }
  }
  /* attributes ["text", ...]: metadata carried over by the passes. */
  if (tok_is(peek(p), T_IDENT, "attributes")) {
    next(p);
    if (!expect(p, "[", "after attributes")) return false;
    if (!accept(p, "]")) {
      do {
        tok_t *s;
        size_t slen;
        if (!expect_kind(p, T_STRING, "an attribute string", &s)) return false;
        char *str = decode_string(p, s, &slen);
        if (!str) return false;
        bool ok = hali_ir_func_add_attr(f, str, slen);
        free(str);
        if (!ok) return false;
      } while (accept(p, ","));
      if (!expect(p, "]", "to close the attributes")) return false;
    }
  }
  /* locals(%x: T, ...) declares registers up front, in this order (hali dis
   * writes it when first writes in text order would number registers
   * differently, or a read comes textually before its write). */
  if (tok_is(peek(p), T_IDENT, "locals")) {
    next(p);
    if (!expect(p, "(", "after locals")) return false;
    if (!accept(p, ")")) {
      do {
        tok_t *r;
        if (!expect_kind(p, T_REG, "a register (%name: type)", &r))
          return false;
        if (find_reg(p, r) >= 0) {
          perr_at(p, r, "register declared twice");
          return false;
        }
        if (!expect(p, ":", "after the register name")) return false;
        hali_ir_xtype_t x;
        hali_type_t type = parse_value_type(p, &x);
        if (type == HALI_TYPE_NONE) return false;
        uint32_t reg = add_reg(p, f, type, r);
        bool okx = reg != UINT32_MAX &&
                   (type != HALI_TYPE_TENSOR ||
                    hali_ir_func_set_reg_xtype(f, reg, &x));
        free(x.dims);
        if (!okx) return false;
      } while (accept(p, ","));
      if (!expect(p, ")", "to close locals")) return false;
    }
  }
  /* func @host.f(...) -> T import [optional]: no body. */
  if (tok_is(peek(p), T_IDENT, "import")) {
    next(p);
    f->flags |= HALI_FUNC_IMPORT;
    if (tok_is(peek(p), T_IDENT, "optional")) {
      next(p);
      f->flags |= HALI_FUNC_OPTIONAL;
    }
    h->body = SIZE_MAX;
    return true;
  }
  if (!tok_is(peek(p), T_PUNCT, "{")) {
    perr_at(p, peek(p), "expected '{' to open the body of @%s (or 'import')",
            f->name);
    return false;
  }
  h->body = p->pos;
  /* Skip the body; it is parsed once every header is known. */
  size_t depth = 0;
  do {
    tok_t *t = next(p);
    if (t->kind == T_EOF) {
      perr_at(p, t, "expected '}' to close @%s", f->name);
      return false;
    }
    if (tok_is(t, T_PUNCT, "{")) depth++;
    if (tok_is(t, T_PUNCT, "}")) depth--;
  } while (depth);
  return true;
}

hali_status_t hali_asm_parse(const char *text, size_t len,
                             const char *filename,
                             hali_ir_module_t **out_module) {
  *out_module = NULL;
  parser_t p = {0};
  p.file = filename ? filename : "<input>";
  p.src = text;
  p.src_len = len;
  p.m = hali_ir_module_create();
  if (!p.m)
    return hali_status_oom();
  p.m->has_debug = true;
  func_header_t *headers = NULL;
  lex(&p);
  if (!p.error && tok_is(peek(&p), T_IDENT, "module")) {
    next(&p);
    tok_t *name;
    if (expect_kind(&p, T_SYM, "a module name (@name)", &name))
      p.m->name = strndup(name->text + 1, name->len - 1);
    if (tok_is(peek(&p), T_IDENT, "source")) {
      next(&p);
      tok_t *s;
      size_t slen;
      if (expect_kind(&p, T_STRING, "a source file name", &s))
        p.m->source = decode_string(&p, s, &slen);
      if (p.m->source) p.m->source[slen] = 0;
    }
  }
  if (!p.error && !p.m->name) {
    const char *base = strrchr(p.file, '/');
    base = base ? base + 1 : p.file;
    size_t n = strcspn(base, ".");
    p.m->name = strndup(base, n ? n : strlen(base));
    /* A file name may hold characters a name cannot: my-mod -> my_mod. */
    for (char *c = p.m->name; c && *c; ++c)
      if (!hali_name_char(*c)) *c = '_';
  }
  if (!p.error && !p.m->source) p.m->source = strdup(p.file);
  /* Pass 1: headers. */
  size_t nheaders = 0, headers_cap = 0, nexe = 0;
  size_t *exe_starts = NULL;
  while (!p.error && peek(&p)->kind != T_EOF) {
    tok_t *t = peek(&p);
    if (tok_is(t, T_IDENT, "rodata")) {
      next(&p);
      if (!parse_rodata(&p)) {
        perr_at(&p, peek(&p), "bad rodata");
        break;
      }
      /* Indexed under the name the module owns. */
      uint32_t k = p.m->rodata_count - 1;
      if (hali_strmap_insert(&p.rodata, p.m->rodata[k].name,
                             strlen(p.m->rodata[k].name), k) != k)
        perr_at(&p, t, "out of memory");
      continue;
    }
    if (tok_is(t, T_IDENT, "executable")) {
      /* Kernel functions may be defined after the executable: parsed in
       * pass 1b, once every header is known. */
      next(&p);
      size_t *ne = realloc(exe_starts, (nexe + 1) * sizeof(size_t));
      if (!ne) {
        perr_at(&p, t, "out of memory");
        break;
      }
      exe_starts = ne;
      exe_starts[nexe++] = p.pos;
      size_t depth = 0;
      while (peek(&p)->kind != T_EOF) {
        tok_t *u = next(&p);
        if (tok_is(u, T_PUNCT, "{")) depth++;
        if (tok_is(u, T_PUNCT, "}") && --depth == 0) break;
      }
      continue;
    }
    if (!tok_is(t, T_IDENT, "func")) {
      perr_at(&p, t, "expected 'func' or 'rodata' at top level");
      break;
    }
    next(&p);
    if (nheaders == headers_cap) {
      headers_cap = headers_cap ? 2 * headers_cap : 16;
      func_header_t *h = realloc(headers, headers_cap * sizeof(*h));
      if (!h) {
        perr_at(&p, t, "out of memory");
        break;
      }
      headers = h;
    }
    if (!parse_header(&p, &headers[nheaders])) {
      perr_at(&p, peek(&p), "bad function header");
      break;
    }
    nheaders++;
  }
  /* Pass 1b: executables (they name kernel functions). */
  for (size_t i = 0; !p.error && i < nexe; ++i) {
    p.pos = exe_starts[i];
    if (!parse_executable(&p))
      perr_at(&p, peek(&p), "bad executable");
  }
  free(exe_starts);
  /* Pass 2: bodies. */
  for (uint32_t i = 0; !p.error && i < p.m->func_count; ++i)
    if (headers[i].body != SIZE_MAX &&
        !parse_body(&p, &p.m->funcs[i], headers, i))
      perr_at(&p, peek(&p), "bad function body");
  free(headers);
  free(p.toks);
  free(p.ops);
  free(p.defs);
  hali_strmap_free(&p.funcs);
  hali_strmap_free(&p.rodata);
  hali_strmap_free(&p.exes);
  for (uint32_t i = 0; i < p.m->executable_count; ++i)
    hali_strmap_free(&p.exports[i]);
  free(p.exports);
  hali_strmap_free(&p.strings);
  hali_strmap_free(&p.regs);
  hali_strmap_free(&p.blocks);
  if (p.error) {
    hali_ir_module_free(p.m);
    return p.error;
  }
  *out_module = p.m;
  return HALI_OK;
}
