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

void hali_asm_lex(parser_t *p) {
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
      tok_t *t = hali_realloc(p->toks, cap * sizeof(tok_t));
      if (!t) {
        p->error = hali_status_annotate(
            hali_status_oom(), "assembling %s", p->file);
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
        hali_asm_error(p, t, "expected a name after '%c'", c);
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
          hali_asm_error(p, t, "unterminated tensor type (expected '>')");
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
        hali_asm_error(p, t, "unterminated string");
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
      hali_asm_error(p, t, "unexpected character");
      return;
    }
    t->len = (uint32_t)(s - start);
    p->ntoks++;
  }
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
