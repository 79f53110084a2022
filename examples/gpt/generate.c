/* examples/gpt/generate: greedy generation with the GPT example through
 * hali's C API (<hali/hali.h>): @prefill on the prompt, then one @decode
 * per token, each fed the previous step's argmax; prints the token ids and
 * the decode rate.
 *
 *   generate [--module=examples/gpt/gpt.hasm]
 *            [--weights=examples/gpt/gpt.safetensors]
 *            [--prompt=TEXT | --tokens=ID,ID,...] [--steps=N]
 *            [--device=local-sync|local-task] [--workers=N] [--rounds=N]
 *            [--dump=FILE] [--quiet]
 *
 * --steps: decode steps after the prefill (default 32), so steps + 1
 * tokens come out.  --rounds=R generates R times in one context (each
 * round starts again at position 0) and reports the best round's decode
 * time per token.  --dump writes every step's token and logits for
 * examples/gpt/reference.py --check (format in its docstring).  Output:
 *
 *   tokens: 45 15 45 ...
 *   decode: 32 tokens, 2.81 ms, 11385.2 tokens/s, 87.84 us/token, cpu 87.10 us/token (best of 1)
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hali/hali.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the whole process (every thread): on a loaded machine the
 * single-threaded runs' CPU time per token is steadier than wall time. */
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(hali_status_t s, const char *what) {
  char *t = hali_status_to_string(s);
  fprintf(stderr, "generate: %s: %s\n", what, t ? t : "?");
  free(t);
  hali_status_free(s);
  return 1;
}

static int usage(void) {
  fprintf(stderr,
          "usage: generate [--module=FILE] [--weights=FILE] [--prompt=TEXT | "
          "--tokens=ID,...] [--steps=N] [--device=local-sync|local-task] "
          "[--workers=N] [--rounds=N] [--dump=FILE] [--quiet]\n");
  return 2;
}

static int parse_count(const char *flag, const char *v, long lo, long hi,
                       long *out) {
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (errno || end == v || *end || n < lo || n > hi) {
    fprintf(stderr, "generate: %s takes an integer in [%ld, %ld], not '%s'\n",
            flag, lo, hi, v);
    return -1;
  }
  *out = n;
  return 0;
}

/* The token and logits of one step's results (logits, next). */
static hali_status_t read_step(hali_variant_t res[2], float *logits,
                               size_t vocab, int32_t *token) {
  hali_status_t s = HALI_OK;
  if (logits) s = hali_buffer_view_read(res[0].u.view, logits, vocab * 4);
  if (!s) s = hali_buffer_view_read(res[1].u.view, token, 4);
  return s;
}

int main(int argc, char **argv) {
  const char *module = "examples/gpt/gpt.hasm",
             *weights = "examples/gpt/gpt.safetensors", *prompt = "Hello",
             *tokens_arg = NULL, *device_name = "local-sync", *dump = NULL;
  long steps = 32, workers = 0, rounds = 1;
  int quiet = 0;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
#define VAL(flag) (strncmp(a, flag "=", sizeof(flag)) == 0 ? a + sizeof(flag) : NULL)
    const char *v;
    if ((v = VAL("--module"))) module = v;
    else if ((v = VAL("--weights"))) weights = v;
    else if ((v = VAL("--prompt"))) prompt = v, tokens_arg = NULL;
    else if ((v = VAL("--tokens"))) tokens_arg = v;
    else if ((v = VAL("--device"))) device_name = v;
    else if ((v = VAL("--dump"))) dump = v;
    else if ((v = VAL("--steps"))) {
      if (parse_count("--steps", v, 0, 1 << 20, &steps)) return 2;
    } else if ((v = VAL("--workers"))) {
      if (parse_count("--workers", v, 0, 1024, &workers)) return 2;
    } else if ((v = VAL("--rounds"))) {
      if (parse_count("--rounds", v, 1, 1 << 20, &rounds)) return 2;
    } else if (strcmp(a, "--quiet") == 0) quiet = 1;
    else return usage();
#undef VAL
  }

  /* The prompt: the bytes of the text, or the ids given. */
  size_t n_prompt = 0;
  int32_t *ids = malloc((strlen(tokens_arg ? tokens_arg : prompt) + 1) * 4);
  if (!ids) return 1;
  if (tokens_arg) {
    const char *p = tokens_arg;
    while (*p) {
      char *end;
      errno = 0;
      long t = strtol(p, &end, 10);
      if (errno || end == p || (*end && *end != ',') || t < INT32_MIN ||
          t > INT32_MAX) {
        fprintf(stderr, "generate: --tokens: '%s' is not a list of ids\n",
                tokens_arg);
        return 2;
      }
      ids[n_prompt++] = (int32_t)t;
      p = *end ? end + 1 : end;
    }
  } else {
    for (const unsigned char *p = (const unsigned char *)prompt; *p; ++p)
      ids[n_prompt++] = *p;
  }
  if (n_prompt == 0) {
    fprintf(stderr, "generate: the prompt is empty\n");
    return 2;
  }

  hali_instance_t *instance = NULL;
  hali_device_t *device = NULL;
  hali_module_t *mod = NULL;
  hali_parameters_t *params = NULL;
  hali_context_t *ctx = NULL;
  hali_function_t *prefill = NULL, *decode = NULL;
  hali_status_t s;
  int rc = 1;
  FILE *dump_file = NULL;
  float *logits = NULL;
  int32_t *out = malloc(((size_t)steps + 1) * 4);
  if (!out) return 1;

  hali_device_params_t dp;
  hali_device_params_initialize(&dp);
  if ((s = hali_device_kind_parse(device_name, &dp.kind))) {
    rc = fail(s, "--device");
    goto done;
  }
  dp.worker_count = (uint32_t)workers;
  if ((s = hali_instance_create(NULL, &instance))) {
    rc = fail(s, "instance");
    goto done;
  }
  if ((s = hali_device_create(instance, &dp, &device))) {
    rc = fail(s, "device");
    goto done;
  }
  if ((s = hali_module_load_file(instance, module, &mod))) {
    rc = fail(s, module);
    goto done;
  }
  if ((s = hali_parameters_create(&params)) ||
      (s = hali_parameters_add_file(params, "model", weights))) {
    rc = fail(s, weights);
    goto done;
  }
  hali_context_params_t cp;
  hali_context_params_initialize(&cp);
  cp.parameters = params;
  if ((s = hali_context_create(instance, device, &mod, 1, &cp, &ctx))) {
    rc = fail(s, "context");
    goto done;
  }
  if ((s = hali_context_lookup_function(ctx, "prefill", &prefill)) ||
      (s = hali_context_lookup_function(ctx, "decode", &decode))) {
    rc = fail(s, module);
    goto done;
  }
  /* The vocabulary is the logits' length (the module's, not assumed). */
  size_t vocab = 0;
  if (dump) {
    dump_file = fopen(dump, "wb");
    if (!dump_file) {
      perror(dump);
      goto done;
    }
  }

  double best = 1e30, best_cpu = 1e30;
  for (long r = 0; r < rounds; ++r) {
    int64_t shape = (int64_t)n_prompt;
    hali_buffer_view_t *pv = NULL;
    if ((s = hali_buffer_view_create(device, HALI_ELEMENT_TYPE_I32, 1, &shape,
                                     ids, n_prompt * 4, &pv))) {
      rc = fail(s, "prompt");
      goto done;
    }
    hali_variant_t arg = hali_variant_view(pv), res[2];
    s = hali_context_invoke(ctx, prefill, &arg, 1, res, 2);
    hali_buffer_view_release(pv);
    if (s) {
      rc = fail(s, "@prefill");
      goto done;
    }
    if (!vocab) {
      vocab = (size_t)hali_buffer_view_element_count(res[0].u.view);
      logits = malloc(vocab * 4);
      if (!logits) goto done;
      if (dump_file) {
        int32_t head[2] = {(int32_t)steps + 1, (int32_t)vocab};
        fwrite(head, 4, 2, dump_file);
      }
    }
    s = read_step(res, dump_file && r == 0 ? logits : NULL, vocab, &out[0]);
    hali_variant_release(&res[0]);
    hali_variant_release(&res[1]);
    if (s) {
      rc = fail(s, "@prefill results");
      goto done;
    }
    if (dump_file && r == 0) {
      fwrite(&out[0], 4, 1, dump_file);
      fwrite(logits, 4, vocab, dump_file);
    }
    double t0 = now_s(), c0 = cpu_s();
    for (long k = 1; k <= steps; ++k) {
      hali_variant_t a[2] = {hali_variant_i64(out[k - 1]),
                             hali_variant_i64((int64_t)n_prompt + k - 1)};
      if ((s = hali_context_invoke(ctx, decode, a, 2, res, 2))) {
        char what[96];
        snprintf(what, sizeof(what), "@decode (step %ld, position %ld)", k,
                 (long)n_prompt + k - 1);
        rc = fail(s, what);
        goto done;
      }
      s = read_step(res, dump_file && r == 0 ? logits : NULL, vocab, &out[k]);
      hali_variant_release(&res[0]);
      hali_variant_release(&res[1]);
      if (s) {
        rc = fail(s, "@decode results");
        goto done;
      }
      if (dump_file && r == 0) {
        fwrite(&out[k], 4, 1, dump_file);
        fwrite(logits, 4, vocab, dump_file);
      }
    }
    double t = now_s() - t0, c = cpu_s() - c0;
    if (t < best) best = t;
    if (c < best_cpu) best_cpu = c;
  }
  if (dump_file && fclose(dump_file) != 0) {
    dump_file = NULL;
    perror(dump);
    goto done;
  }
  dump_file = NULL;
  if (!quiet) {
    printf("tokens:");
    for (long k = 0; k <= steps; ++k) printf(" %d", out[k]);
    printf("\n");
  }
  if (steps > 0)
    printf("decode: %ld tokens, %.2f ms, %.1f tokens/s, %.2f us/token, cpu "
           "%.2f us/token (best of %ld)\n",
           steps, best * 1e3, (double)steps / best, best / (double)steps * 1e6,
           best_cpu / (double)steps * 1e6,
           rounds);
  rc = 0;
done:
  if (dump_file) fclose(dump_file);
  free(logits);
  free(out);
  free(ids);
  hali_context_release(ctx);
  hali_parameters_release(params);
  hali_module_release(mod);
  hali_device_release(device);
  hali_instance_release(instance);
  return rc;
}
