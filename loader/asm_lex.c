/* hali — the .hasm lexer and literals: the text becomes an array of
 * tokens (file:line:column each), and the helpers the grammar reads them
 * with; the error builder every part of the assembler reports through;
 * string, integer and float literals.  The grammar is loader/asm.c (HAL
 * level) and loader/asm_tensor.c (tensor level); loader/asm_int.h holds
 * what they share.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/asm_int.h"
#include "base/alloc.h"

bool hali_asm_oom(parser_t *p, const tok_t *t) {
  if (!p->error)
    p->error = hali_status_annotate(hali_status_oom(), "assembling %s:%u:%u",
                                    p->file, t ? t->line : 0, t ? t->col : 0);
  return false;
}

void hali_asm_error(parser_t *p, const tok_t *t, const char *fmt, ...) {
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

/* Character classes, so that the lexer does not call ctype per character
 * (and does not depend on the locale): the C locale's isspace, isdigit,
 * isalpha and isalnum, name characters (hali_name_char), what continues
 * an identifier, and single-character punctuation. */
enum {
  CL_SPACE = 1,  /* ' ' \t \n \v \f \r */
  CL_NAME = 2,   /* letters, digits, '_', '.', '$' */
  CL_ALNUM = 4,  /* letters and digits */
  CL_START = 8,  /* starts an identifier: letters and '_' */
  CL_DIGIT = 16, /* 0-9 */
  CL_PUNCT = 32, /* ( ) { } [ ] , = : | and NUL (strchr's terminator matched
                    it once: a NUL byte is a token, as before) */
  CL_IDENT = 64, /* continues an identifier: letters, digits, '_', '.' */
  CL_SKIP = 128, /* what hali_asm_skip_body stops at: \n { } " # / ^ < */
};
#define CL_LOWER(c) ((c) >= 'a' && (c) <= 'z')
#define CL_UPPER(c) ((c) >= 'A' && (c) <= 'Z')
#define CL_ISDIGIT(c) ((c) >= '0' && (c) <= '9')
#define CL_ISALPHA(c) (CL_LOWER(c) || CL_UPPER(c))
#define CL(c)                                                                \
  (((c) == ' ' || ((c) >= '\t' && (c) <= '\r') ? CL_SPACE : 0) |              \
   (CL_ISALPHA(c) || CL_ISDIGIT(c) || (c) == '_' || (c) == '.' ||           \
            (c) == '$'                                                       \
        ? CL_NAME                                                            \
        : 0) |                                                               \
   (CL_ISALPHA(c) || CL_ISDIGIT(c) ? CL_ALNUM : 0) |                         \
   (CL_ISALPHA(c) || (c) == '_' ? CL_START : 0) |                            \
   (CL_ISDIGIT(c) ? CL_DIGIT : 0) |                                          \
   ((c) == '(' || (c) == ')' || (c) == '{' || (c) == '}' || (c) == '[' ||    \
            (c) == ']' || (c) == ',' || (c) == '=' || (c) == ':' || (c) == '|' || \
            (c) == 0                                                         \
        ? CL_PUNCT                                                           \
        : 0) |                                                               \
   (CL_ISALPHA(c) || CL_ISDIGIT(c) || (c) == '_' || (c) == '.' ? CL_IDENT    \
                                                                : 0) |       \
   ((c) == '\n' || (c) == '{' || (c) == '}' || (c) == '"' || (c) == '#' ||   \
            (c) == '/' || (c) == '^' || (c) == '<'                           \
        ? CL_SKIP                                                            \
        : 0))
#define CL4(n) CL(n), CL((n) + 1), CL((n) + 2), CL((n) + 3)
#define CL16(n) CL4(n), CL4((n) + 4), CL4((n) + 8), CL4((n) + 12)
#define CL64(n) CL16(n), CL16((n) + 16), CL16((n) + 32), CL16((n) + 48)
static const uint8_t char_class[256] = {CL64(0), CL64(64), CL64(128),
                                        CL64(192)};
#define IS(c, k) ((char_class[(unsigned char)(c)] & (k)) != 0)

/* Lexes the token at the lexer's position into |t| and moves past it.
 * At end of file |t| is T_EOF and p->lex_eof is set; on a lexical error
 * too, with the error recorded (at the offending text, as a T_PUNCT) and
 * |t| then turned into T_EOF, so that the grammar stops there. */
static void lex_token(parser_t *p, tok_t *t) {
  const char *s = p->lex_s, *end = p->src + p->src_len;
  uint32_t line = p->lex_line;
  const char *line_start = p->lex_line_start;
  while (s < end) {
    if (*s == '\n') {
      ++line;
      line_start = ++s;
    } else if (IS(*s, CL_SPACE)) {
      ++s;
    } else if (*s == '#' || (*s == '/' && s + 1 < end && s[1] == '/')) {
      while (s < end && *s != '\n') ++s;
    } else {
      break;
    }
  }
  t->text = s;
  t->line = line;
  t->col = (uint32_t)(s - line_start) + 1;
  p->lex_line = line;
  p->lex_line_start = line_start;
  bool bad = false;
  if (s >= end) {
    t->kind = T_EOF;
    t->len = 0;
    p->lex_s = s;
    p->lex_eof = true;
    return;
  }
  const char *start = s;
  char c = *s;
  if (c == '%' || c == '@' || c == '^' || c == '!') {
    ++s;
    while (s < end && (IS(*s, CL_NAME) || (c == '@' && *s == ':'))) ++s;
    t->kind = c == '%' ? T_REG : c == '@' ? T_SYM : c == '^' ? T_LABEL
                                                             : T_TYPE;
    if (s == start + 1) {
      t->len = 1;
      t->kind = T_PUNCT;
      hali_asm_error(p, t, "expected a name after '%c'", c);
      bad = true;
    }
  } else if (IS(c, CL_DIGIT) ||
             ((c == '-' || c == '+') && s + 1 < end &&
              (IS(s[1], CL_DIGIT) || s[1] == 'i' || s[1] == 'n'))) {
    ++s;
    while (s < end && (IS(*s, CL_ALNUM) || *s == '.' ||
                       ((*s == '-' || *s == '+') &&
                        (s[-1] == 'e' || s[-1] == 'E' || s[-1] == 'p' ||
                         s[-1] == 'P'))))
      ++s;
    t->kind = T_NUMBER;
  } else if (IS(c, CL_START)) {
    while (s < end && IS(*s, CL_IDENT))
      ++s;
    t->kind = T_IDENT;
    /* tensor<4x?xf32> is one type token. */
    if (s - start == 6 && memcmp(start, "tensor", 6) == 0 && s < end &&
        *s == '<') {
      while (s < end && *s != '>' && *s != '\n') ++s;
      if (s >= end || *s != '>') {
        t->len = (uint32_t)(s - start);
        hali_asm_error(p, t, "unterminated tensor type (expected '>')");
        bad = true;
      } else {
        ++s;
        t->kind = T_TYPE;
      }
    }
  } else if (c == '"') {
    ++s;
    while (s < end && *s != '"' && *s != '\n') s += (*s == '\\') ? 2 : 1;
    if (s >= end || *s != '"') {
      t->len = 1;
      t->kind = T_PUNCT;
      hali_asm_error(p, t, "unterminated string");
      bad = true;
    } else {
      ++s;
      t->kind = T_STRING;
    }
  } else if (c == '-' && s + 1 < end && s[1] == '>') {
    s += 2;
    t->kind = T_PUNCT;
  } else if (IS(c, CL_PUNCT)) {
    ++s;
    t->kind = T_PUNCT;
  } else {
    t->len = 1;
    t->kind = T_PUNCT;
    hali_asm_error(p, t, "unexpected character");
    bad = true;
  }
  if (bad) {
    /* The grammar sees end of file here; the error is already kept. */
    t->kind = T_EOF;
    t->len = 0;
    p->lex_s = end;
    p->lex_eof = true;
    return;
  }
  t->len = (uint32_t)(s - start);
  p->lex_s = s;
  if (t->kind == T_REG) {
    /* Hashed now and its slot prefetched: by the time the grammar looks
     * the register up (up to a chunk of tokens later), the slot is in
     * cache, and the misses of many lookups overlap. */
    t->hash = hali_strmap_hash(start + 1, t->len - 1);
    hali_strmap_prefetch(&p->regs, t->hash);
  } else if (t->kind == T_SYM) {
    /* Likewise a callee's name: in a module of many functions their map
     * is large, and a call's lookup would otherwise miss. */
    t->hash = hali_strmap_hash(start + 1, t->len - 1);
    hali_strmap_prefetch(&p->funcs, t->hash);
  }
}

void hali_asm_lex_init(parser_t *p) {
  p->lex_s = p->lex_line_start = p->src;
  p->lex_line = 1;
  p->lex_eof = false;
}

tok_t *hali_asm_tok_slow(parser_t *p, size_t i) {
  if (i < p->tbase) /* a released token: a grammar bug */
    return &p->eof;
  while (p->tend <= i) {
    if (p->lex_eof) return p->tend > p->tbase ? peek_at(p, p->tend - 1) : &p->eof;
    size_t k = p->tend - p->tbase;
    if (k / TOK_CHUNK >= p->nchunks) {
      if (p->nchunks == p->nalloc) {
        tok_t *c = hali_malloc(TOK_CHUNK * sizeof(tok_t));
        if (c && p->nalloc == p->chunks_cap) {
          size_t cap = p->chunks_cap ? 2 * p->chunks_cap : 8;
          tok_t **grown = hali_realloc(p->chunks, cap * sizeof(*grown));
          if (grown) {
            p->chunks = grown;
            p->chunks_cap = cap;
          } else {
            hali_free(c);
            c = NULL;
          }
        }
        if (!c) {
          p->eof.kind = T_EOF;
          p->eof.text = p->lex_s;
          p->eof.len = 0;
          p->eof.line = p->lex_line;
          p->eof.col = (uint32_t)(p->lex_s - p->lex_line_start) + 1;
          hali_asm_oom(p, &p->eof);
          p->lex_eof = true;
          return &p->eof;
        }
        p->chunks[p->nalloc++] = c;
      }
      p->nchunks++;
    }
    /* In a body, fill the rest of the chunk (up to a '}'): one call
     * lexes many tokens.  Elsewhere one at a time, so that hali_asm_skip_body, which
     * scans a body's text itself, does not follow tokens lexed ahead. */
    tok_t *c = p->chunks[k / TOK_CHUNK];
    size_t stop = p->lex_batch ? TOK_CHUNK : k % TOK_CHUNK + 1;
    for (size_t j = k % TOK_CHUNK; j < stop && !p->lex_eof; ++j) {
      lex_token(p, &c[j]);
      p->tend++;
      /* A '}' may end the body: what follows is read after a seek. */
      if (c[j].kind == T_PUNCT && c[j].text[0] == '}') break;
    }
  }
  return peek_at(p, i);
}

/* Skips spaces and comments from |s| as lex_token does, counting lines. */
static const char *skip_space(const char *s, const char *end, uint32_t *line,
                              const char **line_start) {
  while (s < end) {
    if (*s == '\n') {
      ++*line;
      *line_start = ++s;
    } else if (IS(*s, CL_SPACE)) {
      ++s;
    } else if (*s == '#' || (*s == '/' && s + 1 < end && s[1] == '/')) {
      while (s < end && *s != '\n') ++s;
    } else {
      break;
    }
  }
  return s;
}

/* A body is skipped by scanning its characters, not lexing its tokens:
 * only what can hide a brace or a label matters (strings, comments,
 * tensor<...> types) and is scanned exactly as lex_token scans it, so that
 * in any lexically valid text the braces and `^label :` found are the
 * lexer's.  Lexical errors are not looked for here: pass 2 lexes every
 * body it reads, and hali_asm_lex_rest lexes the whole file when the parse
 * fails otherwise, so the error reported is the one lexing the whole file
 * first would give. */
bool hali_asm_skip_body(parser_t *p, size_t *out_label0, size_t *out_nlabels,
                        tok_t *out_end) {
  const tok_t *open = peek(p); /* '{' */
  const char *s = open->text, *end = p->src + p->src_len;
  uint32_t line = open->line;
  const char *line_start = open->text - (open->col - 1);
  size_t depth = 0;
  *out_label0 = p->nlabels;
  *out_nlabels = 0;
  for (;;) {
    while (s < end && !IS(*s, CL_SKIP)) ++s;
    if (s >= end) break;
    const char *t0 = s++;
    switch (*t0) {
    case '\n':
      ++line;
      line_start = s;
      break;
    case '{':
      ++depth;
      break;
    case '}':
      if (--depth == 0) {
        p->lex_s = s;
        p->lex_line = line;
        p->lex_line_start = line_start;
        p->lex_eof = false;
        p->nchunks = 0;
        p->tbase = p->tend = p->pos = 0;
        return true;
      }
      break;
    case '"':
      while (s < end && *s != '"' && *s != '\n') s += (*s == '\\') ? 2 : 1;
      if (s > end) s = end;
      if (s < end && *s == '"') ++s;
      break;
    case '#':
      while (s < end && *s != '\n') ++s;
      break;
    case '/':
      if (s < end && *s == '/')
        while (s < end && *s != '\n') ++s;
      break;
    case '<': /* only after `tensor` in valid text: a tensor type */
      while (s < end && *s != '>' && *s != '\n') ++s;
      if (s < end) ++s;
      break;
    case '^': {
      while (s < end && IS(*s, CL_NAME)) ++s;
      if (s == t0 + 1) break;
      tok_t label = {T_LABEL, t0, (uint32_t)(s - t0), line,
                     (uint32_t)(t0 - line_start) + 1, 0};
      s = skip_space(s, end, &line, &line_start);
      if (s < end && *s == ':') {
        if (p->nlabels == p->labels_cap) {
          size_t cap = p->labels_cap ? 2 * p->labels_cap : 16;
          tok_t *l = hali_realloc(p->labels, cap * sizeof(*l));
          if (!l) return hali_asm_oom(p, &label);
          p->labels = l;
          p->labels_cap = cap;
        }
        p->labels[p->nlabels++] = label;
        ++*out_nlabels;
      }
      break;
    }
    }
  }
  *out_end =
      (tok_t){T_EOF, end, 0, line, (uint32_t)(end - line_start) + 1, 0};
  return false;
}

void hali_asm_seek(parser_t *p, const tok_t *at) {
  tok_t t = *at; /* |at| may be in the window */
  p->nchunks = 0;
  p->tbase = p->tend = p->pos = 0;
  p->lex_s = t.text;
  p->lex_line = t.line;
  p->lex_line_start = t.text - (t.col - 1);
  p->lex_eof = false;
}

void hali_asm_release(parser_t *p) {
  while (p->nchunks > 1 && p->pos - p->tbase >= TOK_CHUNK) {
    /* The chunk becomes the last spare one. */
    tok_t *c = p->chunks[0];
    memmove(p->chunks, p->chunks + 1, (p->nalloc - 1) * sizeof(*p->chunks));
    p->chunks[p->nalloc - 1] = c;
    p->nchunks--;
    p->tbase += TOK_CHUNK;
  }
}

void hali_asm_lex_rest(parser_t *p) {
  /* Even a lexical error may not be the first: pass 1 scans bodies
   * without lexing them. */
  if (!p->error) return;
  hali_status_t first = p->error;
  p->error = NULL;
  hali_asm_lex_init(p);
  tok_t t;
  while (!p->lex_eof) lex_token(p, &t);
  if (p->error) {
    hali_status_free(first);
  } else {
    p->error = first;
  }
}

void hali_asm_lex_free(parser_t *p) {
  for (size_t i = 0; i < p->nalloc; ++i) hali_free(p->chunks[i]);
  hali_free(p->chunks);
  p->chunks = NULL;
  p->nchunks = p->nalloc = p->chunks_cap = 0;
  hali_free(p->labels);
  p->labels = NULL;
  p->nlabels = p->labels_cap = 0;
}

/* ------------------------------------------------------------------------ */
/* Token helpers (peek, next, tok_is and accept are inline in
 * loader/asm_int.h). */

bool hali_asm_expect(parser_t *p, const char *punct, const char *what) {
  if (accept(p, punct)) return true;
  hali_asm_error(p, peek(p), "expected '%s' %s", punct, what);
  return false;
}
bool hali_asm_expect_kind(parser_t *p, tok_kind_t k, const char *what,
                          tok_t **out) {
  tok_t *t = peek(p);
  if (t->kind != k) {
    hali_asm_error(p, t, "expected %s", what);
    return false;
  }
  *out = next(p);
  return true;
}

/* Parses a type name token (i32 or !hal.buffer ...). */
hali_type_t hali_asm_parse_type(parser_t *p) {
  tok_t *t = peek(p);
  hali_type_t type = HALI_TYPE_NONE;
  if (t->kind == T_IDENT || t->kind == T_TYPE)
    type = hali_type_parse(t->text, t->len);
  if (type == HALI_TYPE_NONE) {
    hali_asm_error(
        p, t, "expected a type (i32, i64, f32, f64, index or a !hal type)");
    return HALI_TYPE_NONE;
  }
  next(p);
  return type;
}

/* Decodes a string literal's escapes into a malloc'ed buffer. */
char *hali_asm_decode_string(parser_t *p, const tok_t *t, size_t *out_len) {
  char *out = hali_malloc(t->len);
  if (!out) {
    hali_asm_oom(p, t);
    return NULL;
  }
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
        hali_asm_error(p, t, "expected two hex digits after \\x in string");
        hali_free(out);
        return NULL;
      }
      char hex[3] = {t->text[i + 1], t->text[i + 2], 0};
      out[n++] = (char)strtol(hex, NULL, 16);
      i += 2;
      break;
    }
    default:
      hali_asm_error(p, t, "unknown escape '\\%c' in string", e);
      hali_free(out);
      return NULL;
    }
  }
  *out_len = n;
  return out;
}

/* Integer literal: decimal or 0x hex, optional sign; must fit in |bits|
 * either as a signed or as an unsigned value.  Result sign-extended. */
bool hali_asm_parse_int(parser_t *p, const tok_t *t, int bits, int64_t *out) {
  char buf[80];
  if (t->kind != T_NUMBER || t->len >= sizeof(buf)) {
    hali_asm_error(p, t, "expected an i%d literal", bits);
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
    hali_asm_error(p, t, "expected an i%d literal", bits);
    return false;
  }
  if (bits < 64) {
    unsigned long long umax = (1ull << bits) - 1, smin = 1ull << (bits - 1);
    if ((!neg && mag > umax) || (neg && mag > smin)) {
      hali_asm_error(p, t, "i%d literal out of range", bits);
      return false;
    }
    /* Keep the low |bits| and sign-extend them. */
    unsigned long long v = (neg ? 0ull - mag : mag) & umax;
    *out = (v & smin) ? (int64_t)(v | ~umax) : (int64_t)v;
  } else {
    if (neg && mag > 0x8000000000000000ull) {
      hali_asm_error(p, t, "i64 literal out of range");
      return false;
    }
    *out = (int64_t)(neg ? 0ull - mag : mag);
  }
  return true;
}

/* Float literal: decimal, hex float, inf, -inf, nan, or bits(0x...) for an
 * exact bit pattern.  Stored as raw bits of the given width. */
bool hali_asm_parse_float(parser_t *p, int bits, int64_t *out) {
  tok_t *t = peek(p);
  if (tok_is(t, T_IDENT, "bits")) {
    next(p);
    if (!hali_asm_expect(p, "(", "after bits")) return false;
    tok_t *n = next(p);
    int64_t v;
    if (!hali_asm_parse_int(p, n, bits, &v)) return false;
    if (!hali_asm_expect(p, ")", "after the bit pattern")) return false;
    *out = bits == 32 ? (int64_t)(uint32_t)v : v;
    return true;
  }
  char buf[80];
  if ((t->kind != T_NUMBER && t->kind != T_IDENT) || t->len >= sizeof(buf)) {
    hali_asm_error(p, t, "expected an f%d literal", bits);
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
      hali_asm_error(p, t, "expected an f%d literal", bits);
      return false;
    }
    /* f32 literals round once, straight from the decimal text. */
    if (bits == 32) d = strtof(buf, &end);
    else d = strtod(buf, &end);
    if (*end) {
      hali_asm_error(p, t, "expected an f%d literal", bits);
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
