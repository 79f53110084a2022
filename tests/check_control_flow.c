/* Tensor values across blocks (doc/passes.md, "Control flow"), through the
 * C API on both devices:
 *
 * - A loop of N dispatches on a loop-carried tensor (tests/passes/
 *   sh_cf_loop.hasm: y = y * s, N times) allocates the same buffers for
 *   N = 1000 as for N = 10: the same number of allocations per call and
 *   the same peak (the device's memory statistics), because the carried
 *   value lives in two buffers that the iterations reuse.  The numbers
 *   match a plain C loop of the same float multiplies.
 * - The caller's input is unchanged after the call (the loop starts from
 *   a clone of it).
 * - A diamond takes each arm (tests/passes/sh_cf_diamond.hasm) and a body
 *   that ties a result to a tensor the next iteration reads gets a copy
 *   (sh_cf_cow_live_out.hasm), checked against C loops; that copy, a
 *   transient of the loop body, reuses its buffer every iteration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "hali/hali.h"
#include "tests/settle.h"
#include "tests/testutil.h"

#define OK MEM_OK

typedef struct {
  hali_instance_t *in;
  hali_device_t *dev;
  hali_context_t *ctx;
} env_t;

static void env_open(env_t *e, int device, const char *file) {
  memset(e, 0, sizeof(*e));
  OK(hali_instance_create(NULL, &e->in));
  hali_device_params_t p;
  hali_device_params_initialize(&p);
  p.kind = device ? HALI_DEVICE_LOCAL_TASK : HALI_DEVICE_LOCAL_SYNC;
  p.worker_count = 2;
  OK(hali_device_create(e->in, &p, &e->dev));
  char path[1024];
  snprintf(path, sizeof(path), "%s/tests/passes/%s", HALI_SRCDIR, file);
  hali_module_t *m = NULL;
  OK(hali_module_load_file(e->in, path, &m));
  OK(hali_context_create(e->in, e->dev, &m, 1, NULL, &e->ctx));
  hali_module_release(m);
}

static void env_close(env_t *e) {
  hali_context_release(e->ctx);
  hali_device_release(e->dev);
  hali_instance_release(e->in);
}

/* @iterate(x, s, n) of sh_cf_loop; checks the result against a C loop and
 * that |x| is unchanged; returns the call's peak and allocation count. */
static void iterate(env_t *e, int64_t n, uint64_t *peak, uint64_t *allocs) {
  static const float x0[4] = {1, -2, 3.5f, 0.25f};
  const float s = 1.001f;
  hali_device_memory_statistics_t st0, st1;
  OK(hali_device_query_memory_statistics(e->dev, &st0));
  hali_device_reset_memory_peak(e->dev);
  hali_function_t *f = NULL;
  OK(hali_context_lookup_function(e->ctx, "iterate", &f));
  int64_t dim = 4;
  hali_buffer_view_t *v = NULL;
  OK(hali_buffer_view_create(e->dev, HALI_ELEMENT_TYPE_F32, 1, &dim, x0,
                             sizeof(x0), &v));
  hali_variant_t a[3] = {hali_variant_view(v), hali_variant_f64(s),
                         hali_variant_i64(n)};
  hali_variant_t r;
  OK(hali_context_invoke(e->ctx, f, a, 3, &r, 1));
  float got[4], in[4];
  OK(hali_buffer_view_read(r.u.view, got, sizeof(got)));
  OK(hali_buffer_view_read(v, in, sizeof(in)));
  for (int k = 0; k < 4; ++k) {
    float want = x0[k];
    for (int64_t i = 0; i < n; ++i) want *= s;
    ck_assert_msg(got[k] == want, "n=%lld [%d]: %g, a C loop gives %g",
                  (long long)n, k, got[k], want);
    ck_assert(in[k] == x0[k]); /* the argument is a value */
  }
  hali_variant_release(&r);
  hali_buffer_view_release(v);
  hali_test_settle(e->dev, st0.bytes_live);
  OK(hali_device_query_memory_statistics(e->dev, &st1));
  *peak = st1.bytes_peak - st0.bytes_live;
  *allocs = st1.allocation_count - st0.allocation_count;
}

START_TEST(loop_reuses_storage) {
  env_t e;
  env_open(&e, _i, "sh_cf_loop.hasm");
  uint64_t p0, a0, p1, a1, p10, a10, p1000, a1000;
  iterate(&e, 0, &p0, &a0);
  iterate(&e, 1, &p1, &a1);
  iterate(&e, 10, &p10, &a10);
  iterate(&e, 1000, &p1000, &a1000);
  /* The argument, the clone and the second buffer of the loop: 3 x 16
   * bytes at most, and the same allocations whatever N (two per call for
   * the carried value's buffers, then each iteration reuses them). */
  ck_assert_uint_eq(p1000, p10);
  ck_assert_uint_eq(a1000, a10);
  ck_assert_uint_eq(a1, a10);
  ck_assert_uint_le(p10, 3 * 16);
  ck_assert_uint_le(a0, a1);
  env_close(&e);
}
END_TEST

static void run_view(env_t *e, const char *fn, const float *x, hali_variant_t b,
                     float *out) {
  hali_function_t *f = NULL;
  OK(hali_context_lookup_function(e->ctx, fn, &f));
  int64_t dim = 4;
  hali_buffer_view_t *v = NULL;
  OK(hali_buffer_view_create(e->dev, HALI_ELEMENT_TYPE_F32, 1, &dim, x,
                             4 * sizeof(float), &v));
  hali_variant_t a[2] = {hali_variant_view(v), b}, r;
  OK(hali_context_invoke(e->ctx, f, a, 2, &r, 1));
  OK(hali_buffer_view_read(r.u.view, out, 4 * sizeof(float)));
  float in[4];
  OK(hali_buffer_view_read(v, in, sizeof(in)));
  ck_assert(memcmp(in, x, sizeof(in)) == 0);
  hali_variant_release(&r);
  hali_buffer_view_release(v);
}

START_TEST(diamond_and_live_out_tie) {
  static const float x[4] = {1, 2, -3, 0.5f};
  env_t e;
  env_open(&e, _i, "sh_cf_diamond.hasm");
  for (int c = 0; c < 2; ++c) {
    float got[4];
    run_view(&e, "pick", x, hali_variant_i64(c), got);
    for (int k = 0; k < 4; ++k) /* y = c ? 2x : x; z = y + x */
      ck_assert(got[k] == (c ? 2 * x[k] : x[k]) + x[k]);
  }
  env_close(&e);
  env_open(&e, _i, "sh_cf_cow_live_out.hasm");
  uint64_t allocs[41] = {0};
  for (int64_t n = 0; n <= 40; n += (n < 4 ? 1 : 36)) {
    float got[4];
    hali_device_memory_statistics_t st0, st1;
    OK(hali_device_query_memory_statistics(e.dev, &st0));
    run_view(&e, "acc", x, hali_variant_i64(n), got);
    OK(hali_device_query_memory_statistics(e.dev, &st1));
    allocs[n] = st1.allocation_count - st0.allocation_count;
    for (int k = 0; k < 4; ++k) {
      float acc = x[k]; /* acc += 2y each iteration; y stays x */
      for (int64_t i = 0; i < n; ++i) acc += 2 * x[k];
      ck_assert_msg(got[k] == acc, "n=%lld [%d]: %g, want %g", (long long)n,
                    k, got[k], acc);
    }
  }
  /* The body's copy of %y (a transient) reuses its buffer from the second
   * iteration on: 40 iterations allocate what 2 do. */
  ck_assert_uint_eq(allocs[40], allocs[2]);
  env_close(&e);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("control_flow");
  TCase *tc = tcase_create("tensor");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, loop_reuses_storage, 0, 2); /* local-sync, -task */
  tcase_add_loop_test(tc, diamond_and_live_out_tie, 0, 2);
  suite_add_tcase(suite, tc);
  return hali_test_main(suite);
}
