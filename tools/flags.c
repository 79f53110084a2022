/* hali — command-line flags (tools/flags.h): getopt_long over tables. */
#include "tools/flags.h"

#include "tools/tools.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Everything parsing allocates, freed by tool_flags_free. */
static void **owned;
static size_t nowned, capowned;

static bool own(void *p) {
  if (!p) return false;
  if (nowned == capowned) {
    size_t cap = capowned ? 2 * capowned : 16;
    void **n = realloc(owned, cap * sizeof(*n));
    if (!n) {
      free(p);
      return false;
    }
    owned = n;
    capowned = cap;
  }
  owned[nowned++] = p;
  return true;
}

void tool_flags_free(void) {
  for (size_t i = 0; i < nowned; ++i) free(owned[i]);
  free(owned);
  owned = NULL;
  nowned = capowned = 0;
}

const char tool_flag_oom[] = "out of memory";

/* Out of memory is a failure (exit 1, "hali: error: RESOURCE_EXHAUSTED"),
 * not a usage error. */
static int report_oom(void) {
  return tool_report(hali_status_oom());
}

const char *tool_flag_error(const char *fmt, ...) {
  static char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

/* ---- Argument vectors and flag files ----------------------------------- */

typedef struct {
  char **v;
  size_t n, cap;
} argvec_t;

static bool argvec_push(argvec_t *a, char *s) {
  if (a->n + 1 >= a->cap) {
    size_t cap = a->cap ? 2 * a->cap : 32;
    char **n = realloc(a->v, cap * sizeof(*n));
    if (!n) return false;
    a->v = n;
    a->cap = cap;
  }
  a->v[a->n++] = s;
  a->v[a->n] = NULL;
  return true;
}

#define MAX_FLAGFILE_DEPTH 8

static int expand(const char *cmd, argvec_t *out, char **args, size_t n,
                  int depth);

/* Appends the lines of flag file |path| (one argument per line; blank
 * lines and lines starting with '#' skipped; surrounding blanks trimmed). */
static int expand_file(const char *cmd, argvec_t *out, const char *path,
                       int depth) {
  if (depth >= MAX_FLAGFILE_DEPTH) {
    fprintf(stderr,
            "hali %s: --flagfile=%s: flag files nest deeper than %d "
            "(does one include itself?)\n",
            cmd, path, MAX_FLAGFILE_DEPTH);
    return TOOL_EXIT_USAGE;
  }
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "hali %s: --flagfile=%s: cannot open: %s\n", cmd, path,
            strerror(errno));
    return TOOL_EXIT_USAGE;
  }
  argvec_t lines = {0};
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  int rc = -1;
  while ((len = getline(&line, &cap, f)) >= 0) {
    char *s = line, *e = line + len;
    while (s < e && (*s == ' ' || *s == '\t')) ++s;
    while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' ||
                     e[-1] == '\t'))
      --e;
    if (s == e || *s == '#') continue;
    char *arg = strndup(s, (size_t)(e - s));
    if (!own(arg) || !argvec_push(&lines, arg)) {
      rc = report_oom();
      break;
    }
  }
  if (rc < 0 && ferror(f)) {
    fprintf(stderr, "hali %s: --flagfile=%s: read error\n", cmd, path);
    rc = TOOL_EXIT_USAGE;
  }
  free(line);
  fclose(f);
  if (rc < 0) rc = expand(cmd, out, lines.v, lines.n, depth + 1);
  free(lines.v);
  return rc;
}

static int expand(const char *cmd, argvec_t *out, char **args, size_t n,
                  int depth) {
  for (size_t i = 0; i < n; ++i) {
    const char *a = args[i];
    if (strcmp(a, "--") == 0) {
      for (; i < n; ++i)
        if (!argvec_push(out, args[i])) goto oom;
      return -1;
    }
    const char *path = NULL;
    if (strncmp(a, "--flagfile=", 11) == 0) {
      path = a + 11;
    } else if (strcmp(a, "--flagfile") == 0) {
      if (i + 1 == n) {
        fprintf(stderr, "hali %s: --flagfile requires a value "
                        "(--flagfile=FILE)\n", cmd);
        return TOOL_EXIT_USAGE;
      }
      path = args[++i];
    }
    if (path) {
      int rc = expand_file(cmd, out, path, depth);
      if (rc >= 0) return rc;
    } else if (!argvec_push(out, args[i])) {
      goto oom;
    }
  }
  return -1;
oom:
  (void)cmd;
  return report_oom();
}

/* ---- Suggestions -------------------------------------------------------- */

unsigned tool_edit_distance(const char *a, size_t na, const char *b) {
  size_t nb = strlen(b);
  if (na > 64 || nb > 64) return 255;
  unsigned row[65];
  for (size_t j = 0; j <= nb; ++j) row[j] = (unsigned)j;
  for (size_t i = 1; i <= na; ++i) {
    unsigned diag = row[0];
    row[0] = (unsigned)i;
    for (size_t j = 1; j <= nb; ++j) {
      unsigned up = row[j];
      unsigned sub = diag + (a[i - 1] != b[j - 1]);
      unsigned del = up + 1, ins = row[j - 1] + 1;
      unsigned m = sub < del ? sub : del;
      row[j] = m < ins ? m : ins;
      diag = up;
    }
  }
  return row[nb];
}

/* Calls |fn| for every spelling ("--x" with the dashes) of every flag. */
typedef struct {
  const tool_flag_t *flag;
  char spelling[64];
} spelling_t;

static size_t spellings(const tool_command_t *cmd, spelling_t *out,
                        size_t cap) {
  size_t n = 0;
  for (const tool_flag_t *const *t = cmd->tables; *t; ++t)
    for (const tool_flag_t *f = *t; f->name; ++f) {
      if (n < cap) {
        out[n].flag = f;
        snprintf(out[n].spelling, sizeof(out[n].spelling), "%s", f->name);
        ++n;
      }
      for (const char *a = f->aliases; a && *a;) {
        size_t len = strcspn(a, " ");
        if (n < cap && len < sizeof(out[0].spelling)) {
          out[n].flag = f;
          memcpy(out[n].spelling, a, len);
          out[n].spelling[len] = 0;
          ++n;
        }
        a += len;
        while (*a == ' ') ++a;
      }
    }
  return n;
}

#define MAX_SPELLINGS 256

static void unknown_flag(const tool_command_t *cmd, const char *arg) {
  size_t len = strcspn(arg, "=");
  spelling_t *sp = malloc(MAX_SPELLINGS * sizeof(*sp));
  size_t n = sp ? spellings(cmd, sp, MAX_SPELLINGS) : 0;
  /* A prefix of several flags (getopt_long refuses ambiguous ones). */
  const tool_flag_t *first = NULL;
  size_t matches = 0;
  for (size_t i = 0; i < n; ++i)
    if (len > 2 && strncmp(sp[i].spelling, arg, len) == 0 &&
        sp[i].flag != first) {
      if (!first) first = sp[i].flag;
      ++matches;
    }
  if (matches > 1) {
    fprintf(stderr, "hali %s: '%.*s' is ambiguous; it could be", cmd->name,
            (int)len, arg);
    const tool_flag_t *last = NULL;
    for (size_t i = 0; i < n; ++i)
      if (strncmp(sp[i].spelling, arg, len) == 0 && sp[i].flag != last &&
          strcmp(sp[i].spelling, sp[i].flag->name) == 0) {
        fprintf(stderr, " %s", sp[i].spelling);
        last = sp[i].flag;
      }
    fprintf(stderr, "\n");
    free(sp);
    return;
  }
  const char *best = NULL;
  unsigned best_d = 255;
  for (size_t i = 0; i < n; ++i) {
    unsigned d = tool_edit_distance(arg, len, sp[i].spelling);
    if (d < best_d) {
      best_d = d;
      best = sp[i].flag->name;
    }
  }
  /* Near enough to be a typo: a third of the name, at least 2 edits. */
  unsigned limit = (unsigned)(len / 3 > 2 ? len / 3 : 2);
  if (arg[0] == '-' && arg[1] != '-' && len == 2)
    fprintf(stderr, "hali %s: unknown flag '%s'", cmd->name, arg);
  else
    fprintf(stderr, "hali %s: unknown flag '%.*s'", cmd->name, (int)len, arg);
  if (best && best_d <= limit) fprintf(stderr, "; did you mean %s?", best);
  fprintf(stderr, " (hali %s --help lists the flags)\n", cmd->name);
  free(sp);
}

/* ---- Parsing ------------------------------------------------------------ */

#define FLAG_BASE 256

int tool_flags_parse(const tool_command_t *cmd, int argc, char **argv,
                     void *options, char ***out_args, size_t *out_nargs) {
  *out_args = NULL;
  *out_nargs = 0;
  argvec_t av = {0};
  if (!argvec_push(&av, argv[0])) goto oom;
  int rc = expand(cmd->name, &av, argv + 1, (size_t)(argc - 1), 0);
  if (rc >= 0) {
    free(av.v);
    return rc;
  }
  if (!own(av.v)) goto oom;

  /* The getopt_long tables: every spelling, the value FLAG_BASE + the
   * flag's index. */
  size_t nflags = 0, nlong = 0;
  for (const tool_flag_t *const *t = cmd->tables; *t; ++t)
    for (const tool_flag_t *f = *t; f->name; ++f) {
      ++nflags;
      ++nlong;
      for (const char *a = f->aliases; a && *a; ++a)
        if (*a == '-' && a[1] == '-') ++nlong;
    }
  const tool_flag_t **flags = calloc(nflags + 1, sizeof(*flags));
  struct option *lo = calloc(nlong + 2, sizeof(*lo));
  char *shorts = calloc(2 * nflags + 5, 1);
  char **positional = calloc(av.n + 1, sizeof(*positional));
  char *names = calloc(nlong + 1, 64);
  if (!own(flags) || !own(lo) || !own(shorts) || !own(names) ||
      !own(positional))
    goto oom;
  size_t npositional = 0;
  size_t fi = 0, li = 0;
  /* '-': words that are not flags come back in order as 1 (so that flags
   * may follow them even with POSIXLY_CORRECT set); ':': a missing value
   * is told apart from an unknown flag. */
  char *sp = shorts;
  *sp++ = '-';
  *sp++ = ':';
  *sp++ = 'h';
  for (const tool_flag_t *const *t = cmd->tables; *t; ++t)
    for (const tool_flag_t *f = *t; f->name; ++f, ++fi) {
      flags[fi] = f;
      /* A metavar in brackets ("[MODE]") makes the value optional: only
       * --flag=VALUE gives one. */
      int has_arg = !f->metavar          ? no_argument
                    : f->metavar[0] == '[' ? optional_argument
                                           : required_argument;
      lo[li++] = (struct option){f->name + 2, has_arg, NULL,
                                 FLAG_BASE + (int)fi};
      for (const char *a = f->aliases; a && *a;) {
        size_t len = strcspn(a, " ");
        char *name = names + 64 * li;
        if (len > 2 && len < 64) {
          memcpy(name, a + 2, len - 2);
          lo[li++] = (struct option){name, has_arg, NULL, FLAG_BASE + (int)fi};
        }
        a += len;
        while (*a == ' ') ++a;
      }
      if (f->short_name) {
        *sp++ = f->short_name;
        if (f->metavar) *sp++ = ':';
      }
    }
  lo[li++] = (struct option){"help", no_argument, NULL, 'h'};

  opterr = 0;
  optind = 0; /* a full re-initialisation (glibc) */
  int ac = (int)av.n;
  char **v = av.v;
  for (;;) {
    int idx = -1;
    int c = getopt_long(ac, v, shorts, lo, &idx);
    if (c == -1) break;
    if (c == 1) {
      positional[npositional++] = optarg;
      continue;
    }
    if (c == 'h') {
      tool_flags_help(cmd);
      return TOOL_EXIT_OK;
    }
    const tool_flag_t *f = NULL;
    if (c >= FLAG_BASE) f = flags[c - FLAG_BASE];
    else if (c != '?' && c != ':')
      for (size_t i = 0; i < nflags; ++i)
        if (flags[i]->short_name == c) f = flags[i];
    if (f) {
      const char *msg = f->handle(options, f->metavar ? optarg : NULL);
      if (msg == tool_flag_oom) return report_oom();
      if (msg) {
        /* The flag as it was spelt (an alias, say). */
        const char *spelt = idx >= 0 ? lo[idx].name : f->name + 2;
        if (f->metavar)
          fprintf(stderr, "hali %s: --%s=%s: %s\n", cmd->name, spelt,
                  optarg ? optarg : "", msg);
        else
          fprintf(stderr, "hali %s: --%s: %s\n", cmd->name, spelt, msg);
        return TOOL_EXIT_USAGE;
      }
      continue;
    }
    const char *arg = optind > 0 && optind <= ac ? v[optind - 1] : "?";
    const tool_flag_t *named =
        optopt >= FLAG_BASE ? flags[optopt - FLAG_BASE] : NULL;
    for (size_t i = 0; !named && optopt > 0 && i < nflags; ++i)
      if (flags[i] && flags[i]->short_name == optopt) named = flags[i];
    const char *nname = named && named->name ? named->name : "?";
    const char *nmeta = named && named->metavar ? named->metavar : NULL;
    if (c == ':' && named) {
      fprintf(stderr, "hali %s: %s requires a value (%s=%s)\n", cmd->name,
              nname, nname, nmeta ? nmeta : "VALUE");
    } else if (named && !nmeta) {
      fprintf(stderr, "hali %s: %s takes no value ('%s')\n", cmd->name,
              nname, arg);
    } else if (optopt > 0 && optopt < FLAG_BASE) {
      char s[3] = {'-', (char)optopt, 0};
      unknown_flag(cmd, s);
    } else {
      unknown_flag(cmd, arg);
    }
    return TOOL_EXIT_USAGE;
  }
  /* What follows "--". */
  for (int i = optind; i < ac; ++i) positional[npositional++] = v[i];
  *out_args = positional;
  *out_nargs = npositional;
  return -1;
oom:
  return report_oom();
}

void tool_flags_help(const tool_command_t *cmd) {
  printf("usage: hali %s %s\n  %s\n\nflags (a value follows = or comes as the next argument):\n",
         cmd->name, cmd->synopsis, cmd->summary);
  for (const tool_flag_t *const *t = cmd->tables; *t; ++t)
    for (const tool_flag_t *f = *t; f->name; ++f) {
      char head[96];
      int n = snprintf(head, sizeof(head), "  %s%s%s%s%s",
                       f->short_name ? (char[]){'-', f->short_name, ',', ' ', 0}
                                     : "",
                       f->name,
                       f->metavar && f->metavar[0] != '[' ? "=" : "",
                       f->metavar ? f->metavar : "", "");
      printf("%s", head);
      /* The help text, wrapped after column 30. */
      const char *h = f->help;
      bool first = true;
      while (*h) {
        if (!first || n >= 30) {
          printf("\n%30s", "");
        } else {
          printf("%*s", 30 - n, "");
        }
        first = false;
        size_t len = strlen(h);
        if (len > 48) {
          size_t cut = 48;
          while (cut > 0 && h[cut] != ' ') --cut;
          if (cut == 0) cut = 48;
          len = cut;
        }
        printf("%.*s", (int)len, h);
        h += len;
        while (*h == ' ') ++h;
      }
      if (f->aliases) printf("\n%30s(alias: %s)", "", f->aliases);
      printf("\n");
    }
  printf("  -h, --help                  this list\n"
         "  --flagfile=FILE             read more flags from FILE, one per "
         "line\n"
         "\nexit status: 0 success, 1 a failed run or mismatch, 2 a usage "
         "error\n");
}

/* ---- Values ------------------------------------------------------------- */

const char *tool_parse_u64(const char *v, uint64_t min, uint64_t max,
                           uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (!*v || *end || *v == '-' || *v == '+' || errno == ERANGE || n < min ||
      n > max) {
    if (max >= UINT32_MAX && min <= 1)
      return min ? "is not a count above 0" : "is not a count";
    return tool_flag_error("expected an integer in %llu..%llu",
                           (unsigned long long)min, (unsigned long long)max);
  }
  *out = n;
  return NULL;
}

const char *tool_parse_bytes(const char *v, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (!*v || end == v || *v == '-' || *v == '+' || errno == ERANGE)
    goto bad;
  unsigned shift = 0;
  switch (*end) {
  case 'k': case 'K': shift = 10; ++end; break;
  case 'm': case 'M': shift = 20; ++end; break;
  case 'g': case 'G': shift = 30; ++end; break;
  case 't': case 'T': shift = 40; ++end; break;
  default: break;
  }
  if (shift && *end == 'i') ++end;
  if (*end == 'B' || *end == 'b') ++end;
  if (*end) goto bad;
  if (shift && n > (UINT64_MAX >> shift))
    return "the size overflows 64 bits";
  *out = (uint64_t)n << shift;
  if (*out == 0) return "expected a size above 0";
  return NULL;
bad:
  return "expected a size in bytes, optionally with K, M, G or T (1024-based)";
}

const char *tool_parse_duration(const char *v, int64_t *out_ns) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (!*v || end == v || errno == ERANGE || !(x >= 0) || isinf(x)) goto bad;
  double scale;
  if (!*end || strcmp(end, "s") == 0) scale = 1e9;
  else if (strcmp(end, "ms") == 0) scale = 1e6;
  else if (strcmp(end, "us") == 0) scale = 1e3;
  else if (strcmp(end, "ns") == 0) scale = 1;
  else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0) scale = 60e9;
  else if (strcmp(end, "h") == 0) scale = 3600e9;
  else goto bad;
  double ns = x * scale;
  if (ns >= 9.2e18) return "the duration overflows (at most about 292 years)";
  *out_ns = (int64_t)ns;
  return NULL;
bad:
  return "expected a duration such as 500ms, 2s, 1.5m (units ns, us, ms, s, "
         "m, h; a bare number is seconds)";
}
