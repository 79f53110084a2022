/* Host memory, seen from a host program (include/hali/base.h,
 * hali_set_host_allocator): every allocation the library makes reaches the
 * host's function, and failing any one of them -- the k-th, for every k,
 * as SQLite's tests do -- ends in RESOURCE_EXHAUSTED or in success with the
 * right answer, and leaves nothing allocated behind.
 *
 * The host function here puts a header before each block: a magic word and
 * the block's size.  A block freed or resized without that header was not
 * allocated through the hook (or was freed twice), and the test aborts on
 * the spot.  The "right answer" of a run is that of the same run with no
 * failure (the numbers themselves are checked by check_api and check_mlp);
 * the leak check is the hook's own count of outstanding blocks and the
 * library's hali_host_allocations_live(), both back to zero. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hali/hali.h"

#include <dlfcn.h>
#include <pthread.h>

/* ---- Locks taken, counted while |count_locks| is set: this program's
 * pthread_mutex_lock comes before the C library's for the library too
 * (warm_invoke_allocates_nothing).  Not under ThreadSanitizer, whose own
 * pthread_mutex_lock this would replace (it would then see unlocks of
 * mutexes it never saw locked). */
#if defined(__SANITIZE_THREAD__)
#define COUNT_LOCKS 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define COUNT_LOCKS 0
#endif
#endif
#ifndef COUNT_LOCKS
#define COUNT_LOCKS 1
#endif
static long mutex_locks;
static int count_locks;

#if COUNT_LOCKS
__attribute__((visibility("default"))) int pthread_mutex_lock(
    pthread_mutex_t *m) {
  static int (*real)(pthread_mutex_t *);
  if (!real) {
    void *sym = dlsym(RTLD_NEXT, "pthread_mutex_lock");
    if (!sym) abort();
    memcpy(&real, &sym, sizeof(real));
  }
  if (__atomic_load_n(&count_locks, __ATOMIC_RELAXED))
    __atomic_add_fetch(&mutex_locks, 1, __ATOMIC_RELAXED);
  return real(m);
}
#endif

/* ---- The host allocator under test. */

#define MAGIC 0x68616c69u /* "hali" */

typedef struct {
  uint32_t magic;
  uint32_t pad;
  size_t size;
} header_t;

static long calls;        /* allocations and resizes so far */
static long fail_at = -1; /* fail this one (1-based) */
static long fail_from = -1; /* and, if >= 0, every one from here on */
static long outstanding;  /* blocks allocated and not yet freed */

static header_t *header_of(void *p) {
  header_t *h = (header_t *)p - 1;
  if (h->magic != MAGIC) {
    fprintf(stderr, "check_alloc: block %p was not allocated by the hook\n", p);
    abort();
  }
  return h;
}

static void *hook(void *user, void *ptr, size_t size) {
  (void)user;
  if (size == 0) {
    if (ptr) {
      header_t *h = header_of(ptr);
      h->magic = 0;
      free(h);
      __atomic_sub_fetch(&outstanding, 1, __ATOMIC_RELAXED);
    }
    return NULL;
  }
  long n = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
  if (n == fail_at || (fail_from >= 0 && n >= fail_from)) return NULL;
  header_t *old = ptr ? header_of(ptr) : NULL;
  header_t *h = realloc(old, sizeof(header_t) + size);
  if (!h) return NULL;
  h->magic = MAGIC;
  h->size = size;
  if (!old) __atomic_add_fetch(&outstanding, 1, __ATOMIC_RELAXED);
  return h + 1;
}

static void install(void) {
  calls = 0;
  fail_at = fail_from = -1;
  hali_status_t s = hali_set_host_allocator(hook, NULL);
  ck_assert_msg(s == NULL, "hali_set_host_allocator failed");
}

static void expect_nothing_live(const char *what, long k) {
  ck_assert_msg(hali_host_allocations_live() == 0,
                "%s, k=%ld: %zu block(s) still live in hali", what, k,
                hali_host_allocations_live());
  ck_assert_msg(outstanding == 0, "%s, k=%ld: %ld block(s) leaked", what, k,
                outstanding);
}

/* ---- The runs. */

typedef struct {
  const char *what;
  const char *path;   /* relative to the source tree */
  const char *function;
  int device;         /* 0 local-sync, 1 local-task */
  int nargs;
  int64_t args[2];    /* i64 then i32 (fill), or one i32 (fib) */
  const char *parameters; /* "scope=path" in the build tree, or NULL */
} run_t;

/* One whole run: instance, device, module, context, invoke, results as
 * text into |out| (|n| bytes), release.  Returns the first failure. */
static hali_status_t run_once(const run_t *r, char *out, size_t n) {
  hali_instance_t *in = NULL;
  hali_device_t *dev = NULL;
  hali_module_t *m = NULL;
  hali_context_t *ctx = NULL;
  hali_function_t *f = NULL;
  hali_parameters_t *params = NULL;
  hali_variant_t res[2];
  size_t nres = 0;
  out[0] = '\0';
  hali_status_t s = hali_instance_create(NULL, &in);
  if (!s && r->parameters) {
    char scope[64], path[1024];
    const char *eq = strchr(r->parameters, '=');
    snprintf(scope, sizeof(scope), "%.*s", (int)(eq - r->parameters),
             r->parameters);
    snprintf(path, sizeof(path), "%s/%s", HALI_BUILDDIR, eq + 1);
    s = hali_parameters_create(&params);
    if (!s) s = hali_parameters_add_file(params, scope, path);
  }
  if (!s) {
    hali_device_params_t p;
    hali_device_params_initialize(&p);
    p.kind = r->device ? HALI_DEVICE_LOCAL_TASK : HALI_DEVICE_LOCAL_SYNC;
    p.worker_count = 2;
    s = hali_device_create(in, &p, &dev);
  }
  if (!s) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", HALI_SRCDIR, r->path);
    s = hali_module_load_file(in, path, &m);
  }
  if (!s) {
    hali_context_params_t cp;
    hali_context_params_initialize(&cp);
    cp.parameters = params;
    s = hali_context_create(in, dev, &m, 1, &cp, &ctx);
  }
  if (!s) s = hali_context_lookup_function(ctx, r->function, &f);
  if (!s) {
    hali_variant_t a[2];
    if (r->nargs == 2) {
      a[0] = hali_variant_i64(r->args[0]);
      a[1] = hali_variant_i32((int32_t)r->args[1]);
    } else if (r->nargs == 1) {
      a[0] = hali_variant_i32((int32_t)r->args[0]);
    }
    nres = 1;
    s = hali_context_invoke(ctx, f, a, (size_t)r->nargs, res, nres);
    if (s) nres = 0;
  }
  for (size_t i = 0; !s && i < nres; ++i) {
    if (res[i].type == HALI_VARIANT_I32) {
      snprintf(out, n, "i32=%d", (int)res[i].u.i32);
    } else if (res[i].type == HALI_VARIANT_BUFFER_VIEW) {
      float v[16] = {0};
      size_t bytes = (size_t)hali_buffer_view_byte_length(res[i].u.view);
      if (bytes > sizeof(v)) bytes = sizeof(v);
      s = hali_buffer_view_read(res[i].u.view, v, bytes);
      size_t used = 0;
      for (size_t e = 0; !s && e < bytes / 4 && used < n; ++e) {
        uint32_t bits;
        memcpy(&bits, &v[e], sizeof(bits));
        used += (size_t)snprintf(out + used, n - used, "%08x ", bits);
      }
    }
  }
  for (size_t i = 0; i < nres; ++i) hali_variant_release(&res[i]);
  hali_context_release(ctx);
  hali_parameters_release(params);
  hali_module_release(m);
  hali_device_release(dev);
  hali_instance_release(in);
  return s;
}

/* Runs |r| with no failure (its answer and allocation count), then with
 * the k-th allocation failing for k = 1, 1+stride, ... up to that count
 * (with |from|, every allocation from the k-th on: memory that stays
 * short, where a retry would spin). */
static void loop(const run_t *r, long stride, int from) {
  install();
  char want[256], got[256];
  hali_status_t s = run_once(r, want, sizeof(want));
  if (s) {
    char *t = hali_status_to_string(s);
    ck_abort_msg("%s: the run without failures failed: %s", r->what, t);
  }
  ck_assert_msg(want[0], "%s: no result", r->what);
  long total = calls;
  ck_assert_msg(total > 10, "%s: only %ld allocations reached the hook",
                r->what, total);
  expect_nothing_live(r->what, 0);
  long failed = 0, ok = 0;
  for (long k = 1; k <= total; k += stride) {
    calls = 0;
    fail_at = from ? -1 : k;
    fail_from = from ? k : -1;
    s = run_once(r, got, sizeof(got));
    fail_at = fail_from = -1;
    if (s) {
      hali_status_code_t code = hali_status_code(s);
      char *t = hali_status_to_string(s);
      ck_assert_msg(code == HALI_STATUS_RESOURCE_EXHAUSTED,
                    "%s, allocation %ld failing%s: %s", r->what, k,
                    from ? " (and all after it)" : "", t ? t : "?");
      hali_free(t);
      hali_status_free(s);
      ++failed;
    } else {
      ck_assert_msg(strcmp(got, want) == 0,
                    "%s, allocation %ld failing: success with '%s', want '%s'",
                    r->what, k, got, want);
      ++ok;
    }
    expect_nothing_live(r->what, k);
  }
  ck_assert_msg(failed > 0, "%s: no failure point made the run fail", r->what);
  (void)ok;
}

static const run_t k_runs[] = {
    {"fib(12) on local-sync", "examples/fib.hasm", "fib", 0, 1, {12, 0}, NULL},
    {"fill(5, 7) on local-sync", "examples/fill.hasm", "fill", 0, 2, {5, 7},
     NULL},
    {"fill(5, 7) on local-task", "examples/fill.hasm", "fill", 1, 2, {5, 7},
     NULL},
    {"the tensor-level perceptron (rodata weights)",
     "examples/mlp_tensor_rodata.hasm", "main", 0, 0, {0, 0}, NULL},
    {"the tensor-level perceptron (weights from a .safetensors file)",
     "examples/mlp_tensor.hasm", "main", 0, 0, {0, 0},
     "model=examples/mlp.safetensors"},
};

START_TEST(every_allocation_fails_cleanly) {
  /* Every k, for every run: a few seconds in all. */
  loop(&k_runs[_i], 1, 0);
}
END_TEST

START_TEST(memory_that_stays_short_fails_cleanly) {
  loop(&k_runs[_i], 1, 1);
}
END_TEST

/* ---- The allocator's own contract. */

START_TEST(every_block_goes_through_the_hook) {
  install();
  char out[256];
  run_t r = k_runs[1];
  hali_status_t s = run_once(&r, out, sizeof(out));
  ck_assert_msg(s == NULL, "fill failed");
  /* A status, a module printed as text, a binary module: all from the hook
   * and released with hali_free / hali_status_free. */
  long before = calls;
  s = hali_status_make(HALI_STATUS_NOT_FOUND, "x %d", 1);
  char *t = hali_status_to_string(s);
  ck_assert_str_eq(t, "NOT_FOUND: x 1");
  ck_assert_int_gt(calls, before);
  ck_assert_int_gt(outstanding, 0);
  hali_free(t);
  hali_status_free(s);
  char path[1024];
  snprintf(path, sizeof(path), "%s/examples/fib.hasm", HALI_SRCDIR);
  char *text = NULL;
  s = hali_module_print_file(path, NULL, &text);
  ck_assert_msg(s == NULL && text && strstr(text, "func @fib"), "print");
  hali_free(text);
  expect_nothing_live("every block", 0);
}
END_TEST

START_TEST(allocator_changes_only_when_nothing_is_live) {
  install();
  hali_instance_t *in = NULL;
  ck_assert(hali_instance_create(NULL, &in) == NULL);
  ck_assert_uint_gt(hali_host_allocations_live(), 0);
  hali_status_t s = hali_set_host_allocator(NULL, NULL);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_FAILED_PRECONDITION);
  char *t = hali_status_to_string(s);
  ck_assert_msg(strstr(t, "still live") != NULL, "%s", t);
  hali_free(t);
  hali_status_free(s);
  hali_instance_release(in);
  expect_nothing_live("after release", 0);
  /* Back to the C library, and the C library's blocks are counted too. */
  ck_assert(hali_set_host_allocator(NULL, NULL) == NULL);
  long c = calls;
  s = hali_status_make(HALI_STATUS_INTERNAL, "libc");
  ck_assert_uint_gt(hali_host_allocations_live(), 0);
  ck_assert_int_eq(calls, c);
  hali_status_free(s);
  ck_assert_uint_eq(hali_host_allocations_live(), 0);
  hali_free(NULL);
}
END_TEST

/* Loading costs about one allocation per register name, whatever the
 * function's size: the assembler grows a function's register and block
 * arrays geometrically (it used to reallocate them once per register, three
 * allocations a register in all, and a function of N blocks copied its
 * block array N times). */
START_TEST(assembling_allocates_once_per_name) {
  enum { NREGS = 4000, NBLOCKS = 400 };
  size_t cap = 64 * (size_t)(NREGS + NBLOCKS) + 256, len = 0;
  char *text = malloc(cap);
  ck_assert_ptr_nonnull(text);
  len += (size_t)snprintf(text + len, cap - len,
                          "func @f(%%a: i64) -> i64 {\n");
  for (int b = 0; b < NBLOCKS; ++b) {
    len += (size_t)snprintf(text + len, cap - len, "^b%d:\n", b);
    for (int k = 0; k < NREGS / NBLOCKS; ++k) {
      int r = b * (NREGS / NBLOCKS) + k;
      if (r == 0)
        len += (size_t)snprintf(text + len, cap - len,
                                "  %%r0 = add.i64 %%a, %%a\n");
      else
        len += (size_t)snprintf(text + len, cap - len,
                                "  %%r%d = add.i64 %%r%d, %%a\n", r, r - 1);
    }
    if (b + 1 < NBLOCKS)
      len += (size_t)snprintf(text + len, cap - len, "  br ^b%d\n", b + 1);
  }
  len += (size_t)snprintf(text + len, cap - len, "  return %%r%d\n}\n",
                          NREGS - 1);
  ck_assert_uint_lt(len, cap);
  install();
  hali_instance_t *in = NULL;
  ck_assert(hali_instance_create(NULL, &in) == NULL);
  long before = calls;
  hali_module_t *m = NULL;
  hali_status_t s = hali_module_load_bytes(in, text, len, "big", &m);
  long used = calls - before;
  ck_assert_msg(s == NULL, "the module did not load");
  hali_module_release(m);
  hali_instance_release(in);
  free(text);
  expect_nothing_live("assembling", 0);
  /* The register names, one each; per block its name, its instruction
   * array and operand chunks as they double (6 for these ten
   * instructions); and a few that grow with the logarithm of the size.
   * Before, 3 per register: about 14,800 in all. */
  ck_assert_msg(used < NREGS + 8 * NBLOCKS + 200,
                "%ld allocations to load %d registers in %d blocks", used,
                NREGS, NBLOCKS);
}
END_TEST


/* A warm synchronous invoke allocates nothing and locks nothing: after
 * the first call (which makes the register stack), calls 2..N of a
 * function, also one that loops and calls another, reach the host's
 * allocator and pthread_mutex_lock zero times (issue 18: the scheduler's
 * path took 16 locks a call).  A function that spawns a fiber, and one
 * that calls it, still go through the scheduler, and their locks are
 * counted (the count works). */
START_TEST(warm_invoke_allocates_nothing) {
  static const char text[] =
      "module @warm\n"
      "func @id(%x: i32) -> i32 {\n"
      "  return %x\n"
      "}\n"
      "func @twice(%x: i32) -> i32 {\n"
      "  %y = add.i32 %x, %x\n"
      "  return %y\n"
      "}\n"
      "func @spawned(%x: i32) -> i32 {\n"
      "  %f = fiber.spawn @twice(%x)\n"
      "  %y = fiber.join @twice(%f)\n"
      "  %z = call @twice(%y)\n"
      "  return %z\n"
      "}\n"
      "func @via(%x: i32) -> i32 {\n"
      "  %y = call @spawned(%x)\n"
      "  return %y\n"
      "}\n"
      "func @sum(%n: i32) -> i32 {\n"
      "^entry:\n"
      "  %i = const.i32 0\n"
      "  %acc = const.i32 0\n"
      "  %one = const.i32 1\n"
      "  %done = ge.s.i32 %i, %n\n"
      "  cond_br %done, ^exit, ^body\n"
      "^body:\n"
      "  %t = call @twice(%i)\n"
      "  %acc = add.i32 %acc, %t\n"
      "  %i = add.i32 %i, %one\n"
      "  %more = lt.s.i32 %i, %n\n"
      "  cond_br %more, ^body, ^exit\n"
      "^exit:\n"
      "  return %acc\n"
      "}\n";
  install();
  hali_instance_t *in = NULL;
  ck_assert(hali_instance_create(NULL, &in) == NULL);
  hali_device_params_t dp;
  hali_device_params_initialize(&dp);
  dp.kind = HALI_DEVICE_LOCAL_SYNC;
  hali_device_t *d = NULL;
  ck_assert(hali_device_create(in, &dp, &d) == NULL);
  hali_module_t *m = NULL;
  ck_assert(hali_module_load_bytes(in, text, sizeof text - 1, "warm", &m) ==
            NULL);
  hali_context_t *c = NULL;
  ck_assert(hali_context_create(in, d, &m, 1, NULL, &c) == NULL);
  const char *names[] = {"id", "sum", "spawned", "via"};
  for (int k = 0; k < 4; ++k) {
    hali_function_t *f = NULL;
    ck_assert(hali_context_lookup_function(c, names[k], &f) == NULL);
    long before = 0;
    for (int i = 0; i < 50; ++i) {
      if (i == 1) {
        before = calls;
        mutex_locks = 0;
        __atomic_store_n(&count_locks, 1, __ATOMIC_RELAXED);
      }
      /* (Check's assertions lock: test plainly, assert at the end.) */
      hali_variant_t arg = hali_variant_i32(i), res;
      hali_status_t s = hali_context_invoke(c, f, &arg, 1, &res, 1);
      int32_t want = k == 0 ? i : k == 1 ? i * (i - 1) : 4 * i;
      if (s || res.type != HALI_VARIANT_I32 || res.u.i32 != want) {
        __atomic_store_n(&count_locks, 0, __ATOMIC_RELAXED);
        ck_abort_msg("@%s(%d): %s, %d (expected %d)", names[k], i,
                     s ? "failed" : "returned", res.u.i32, want);
      }
    }
    __atomic_store_n(&count_locks, 0, __ATOMIC_RELAXED);
    if (k >= 2) { /* it spawns, or calls a function that does */
      ck_assert_msg(!COUNT_LOCKS || mutex_locks >= 49,
                    "@%s: %ld lock(s) in 49 invokes", names[k], mutex_locks);
      continue;
    }
    ck_assert_msg(calls == before,
                  "@%s: %ld allocation(s) in 49 warm invokes", names[k],
                  calls - before);
    ck_assert_msg(mutex_locks == 0, "@%s: %ld lock(s) in 49 warm invokes",
                  names[k], mutex_locks);
  }
  hali_context_release(c);
  hali_module_release(m);
  hali_device_release(d);
  hali_instance_release(in);
  expect_nothing_live("warm invoke", 0);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("alloc");
  TCase *tc = tcase_create("host allocator");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, every_block_goes_through_the_hook);
  tcase_add_test(tc, allocator_changes_only_when_nothing_is_live);
  tcase_add_test(tc, assembling_allocates_once_per_name);
  tcase_add_test(tc, warm_invoke_allocates_nothing);
  tcase_add_loop_test(tc, every_allocation_fails_cleanly, 0,
                      (int)(sizeof(k_runs) / sizeof(k_runs[0])));
  tcase_add_loop_test(tc, memory_that_stays_short_fails_cleanly, 0,
                      (int)(sizeof(k_runs) / sizeof(k_runs[0])));
  suite_add_tcase(suite, tc);
  SRunner *sr = srunner_create(suite);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
