/* Fence wiring between execution regions (doc/passes.md, "Independent
 * regions overlap"), seen from outside: `hali run` with a Chrome trace of
 * the HAL on local-task, its queue submissions read back with their
 * wait and signal fence ids.
 *
 * - Two regions that read only the argument both wait for the function's
 *   wait fence (neither for the other); the third, reading both results,
 *   waits for a join of their two signal fences and runs after both; no
 *   empty submission is left at the end; the numbers are right.
 * - The seed audit's p04: two submissions, the second waiting for the
 *   first one's signal fence, and none after it.
 * - Write after read: the region overwriting a mutable argument waits for
 *   the region that reads it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "hali/hali.h"
#include "tests/testutil.h"

typedef struct {
  int id;
  double ts, dur; /* microseconds */
  long wait, signal;
} submission_t;

/* The queue submissions of the Chrome trace in |text| (one event per
 * line, as vm/trace.c writes them), in the order of their ids. */
static int submissions(const char *text, submission_t *out, int cap) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, "{\"name\":\"submission ")) != NULL;
       ++p) {
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    char line[512];
    ck_assert_uint_lt(len, sizeof(line));
    memcpy(line, p, len);
    line[len] = 0;
    if (!strstr(line, "(execute)")) continue;
    ck_assert_int_lt(n, cap);
    submission_t *s = &out[n++];
    const char *ts = strstr(line, "\"ts\":"), *dur = strstr(line, "\"dur\":"),
               *wf = strstr(line, "\"wait_fence\":"),
               *sf = strstr(line, "\"signal_fence\":");
    ck_assert_msg(ts && dur && wf && sf, "submission without its fields: %s",
                  line);
    ck_assert_int_eq(sscanf(line, "{\"name\":\"submission %d", &s->id), 1);
    s->ts = strtod(ts + 5, NULL);
    s->dur = strtod(dur + 6, NULL);
    s->wait = strtol(wf + 13, NULL, 10);
    s->signal = strtol(sf + 15, NULL, 10);
    ck_assert_msg(strstr(line, "\"status\":\"OK\""), "%s", line);
  }
  /* Events are written as they finish: sort by id. */
  for (int i = 1; i < n; ++i)
    for (int j = i; j > 0 && out[j - 1].id > out[j].id; --j) {
      submission_t t = out[j];
      out[j] = out[j - 1];
      out[j - 1] = t;
    }
  return n;
}

/* Runs tests/passes/|file| @f on local-task with |inputs| and
 * |expected| outputs, traced; returns the submissions. */
static int traced_run(const char *file, const char *args, submission_t *out,
                      int cap) {
  if (!HALI_TRACING) return -1; /* configure --disable-tracing */
  char dir[] = "/tmp/hali_regions_XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char trace[128], cmd[2048];
  snprintf(trace, sizeof(trace), "%s/t.json", dir);
  snprintf(cmd, sizeof(cmd),
           "'%s' run '%s/tests/passes/%s' --function=f --device=local-task "
           "--workers=2 --trace=hal --trace-format=chrome --trace-out='%s' %s",
           HALI_TOOL, HALI_SRCDIR, file, trace, args);
  char *err = NULL;
  int rc = hali_test_shell(cmd, NULL, &err);
  ck_assert_msg(rc == 0, "%s: exit %d: %s", cmd, rc, err ? err : "");
  free(err);
  FILE *fp = fopen(trace, "rb");
  ck_assert_ptr_nonnull(fp);
  char *text = calloc(1, 1 << 20);
  ck_assert_ptr_nonnull(text);
  size_t got = fread(text, 1, (1 << 20) - 1, fp);
  fclose(fp);
  ck_assert_uint_gt(got, 0);
  int n = submissions(text, out, cap);
  free(text);
  unlink(trace);
  rmdir(dir);
  return n;
}

START_TEST(independent_regions) {
  submission_t s[16];
  int n = traced_run("sh_indep_regions.hasm",
                     "--input='4xf32=1 2 3 4' "
                     "--expected_output='4xf32=2 4 6 8' "
                     "--expected_output='4xf32=3 6 9 12' "
                     "--expected_output='4xf32=5 10 15 20'",
                     s, 16);
  if (n < 0) return;
  ck_assert_int_eq(n, 3); /* no empty submission for the signal */
  /* %a and %b: the same wait fence, not each other's signal. */
  ck_assert_int_eq(s[0].wait, s[1].wait);
  ck_assert_int_ne(s[1].wait, s[0].signal);
  /* %c: a join of both (a fence of its own), after both. */
  ck_assert_int_ne(s[2].wait, s[0].wait);
  ck_assert_int_ne(s[2].wait, s[0].signal);
  ck_assert_int_ne(s[2].wait, s[1].signal);
  ck_assert(s[2].ts >= s[0].ts + s[0].dur);
  ck_assert(s[2].ts >= s[1].ts + s[1].dur);
}
END_TEST

START_TEST(p04_two_submissions) {
  submission_t s[16];
  int n = traced_run("sh_p04.hasm",
                     "--input='4xf32=1 2 3 4' "
                     "--expected_output='4xf32=11 22 33 44' "
                     "--expected_output='4xf32=13 26 39 52'",
                     s, 16);
  if (n < 0) return;
  ck_assert_int_eq(n, 2);
  ck_assert_int_eq(s[1].wait, s[0].signal);
}
END_TEST

START_TEST(write_after_read) {
  submission_t s[16];
  int n = traced_run("sh_war_regions.hasm",
                     "--input='4xf32=1 2 3 4' --input='4xf32=5 6 7 8' "
                     "--expected_output='4xf32=2 4 6 8' "
                     "--expected_output='4xf32=50 60 70 80'",
                     s, 16);
  /* Read %m; overwrite %m (after the read); read %x; the signal's join. */
  if (n < 0) return;
  ck_assert_int_eq(n, 4);
  ck_assert_int_eq(s[1].wait, s[0].signal);
  ck_assert_int_eq(s[2].wait, s[0].wait);
  ck_assert(s[1].ts >= s[0].ts + s[0].dur);
}
END_TEST

/* ---- Memory statistics through the C API (hali_device_query_memory_
 * statistics): sh_pack_share's call holds its slab (80 bytes: doc/passes.md,
 * "schedule-execution") and its 16-byte result, and nothing more; every
 * call frees what it allocated (the live bytes go back to where they
 * were), so the peak after 10 calls is the peak after 1. */
#define MEM_OK(s)                                                              \
  do {                                                                         \
    hali_status_t s_ = (s);                                                    \
    if (s_) {                                                                  \
      char *t_ = hali_status_to_string(s_);                                    \
      ck_abort_msg("%s", t_);                                                  \
    }                                                                          \
  } while (0)

/* local-task's queue thread drops a submission's command buffer (and the
 * slab it retains) just after signalling its fence, so the bytes of a
 * call come back shortly after the call returns: wait (at most 5 s) until
 * the live bytes are |base| again. */
static void settle(hali_device_t *dev, uint64_t base) {
  hali_device_memory_statistics_t st;
  for (int k = 0; k < 5000; ++k) {
    MEM_OK(hali_device_query_memory_statistics(dev, &st));
    if (st.bytes_live == base) return;
    usleep(1000);
  }
  ck_abort_msg("%llu bytes live, %llu before the call",
               (unsigned long long)st.bytes_live, (unsigned long long)base);
}

static void pack_share_calls(hali_context_t *ctx, hali_device_t *dev, int n,
                             uint64_t base) {
  hali_function_t *f = NULL;
  MEM_OK(hali_context_lookup_function(ctx, "f", &f));
  static const float x[4] = {1, 2, 3, 4};
  for (int k = 0; k < n; ++k) {
    int64_t dim = 4;
    hali_buffer_view_t *v = NULL;
    MEM_OK(hali_buffer_view_create(dev, HALI_ELEMENT_TYPE_F32, 1, &dim, x,
                                   sizeof(x), &v));
    hali_variant_t a = hali_variant_view(v), r;
    MEM_OK(hali_context_invoke(ctx, f, &a, 1, &r, 1));
    float got[4];
    MEM_OK(hali_buffer_view_read(r.u.view, got, sizeof(got)));
    ck_assert(got[0] == 31 && got[1] == 47 && got[2] == 63 && got[3] == 79);
    hali_variant_release(&r);
    hali_buffer_view_release(v);
    settle(dev, base);
  }
}

START_TEST(memory_statistics) {
  hali_instance_t *in = NULL;
  hali_device_t *dev = NULL;
  hali_context_t *ctx = NULL;
  hali_module_t *m = NULL;
  MEM_OK(hali_instance_create(NULL, &in));
  hali_device_params_t p;
  hali_device_params_initialize(&p);
  p.kind = _i ? HALI_DEVICE_LOCAL_TASK : HALI_DEVICE_LOCAL_SYNC;
  p.worker_count = 2;
  MEM_OK(hali_device_create(in, &p, &dev));
  MEM_OK(hali_module_load_file(
      in, HALI_SRCDIR "/tests/passes/sh_pack_share.hasm", &m));
  MEM_OK(hali_context_create(in, dev, &m, 1, NULL, &ctx));
  hali_module_release(m);
  hali_device_memory_statistics_t st0, st1, st10;
  MEM_OK(hali_device_query_memory_statistics(dev, &st0));
  hali_device_reset_memory_peak(dev);
  MEM_OK(hali_device_query_memory_statistics(dev, &st1));
  ck_assert_uint_eq(st1.bytes_peak, st0.bytes_live);
  pack_share_calls(ctx, dev, 1, st0.bytes_live);
  MEM_OK(hali_device_query_memory_statistics(dev, &st1));
  /* The argument (16), the slab (80) and the result (16) at once. */
  ck_assert_uint_eq(st1.bytes_peak - st0.bytes_live, 16 + 80 + 16);
  ck_assert_uint_eq(st1.bytes_live, st0.bytes_live);
  ck_assert_uint_eq(st1.allocations_live, st0.allocations_live);
  ck_assert_uint_eq(st1.allocation_count - st0.allocation_count, 3);
  pack_share_calls(ctx, dev, 10, st0.bytes_live);
  MEM_OK(hali_device_query_memory_statistics(dev, &st10));
  ck_assert_uint_eq(st10.bytes_peak, st1.bytes_peak);
  ck_assert_uint_eq(st10.bytes_live, st0.bytes_live);
  ck_assert_uint_eq(st10.allocation_count - st1.allocation_count, 30);
  /* Bad arguments. */
  hali_status_t s = hali_device_query_memory_statistics(NULL, &st0);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_INVALID_ARGUMENT);
  hali_status_free(s);
  s = hali_device_query_memory_statistics(dev, NULL);
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_INVALID_ARGUMENT);
  hali_status_free(s);
  hali_device_reset_memory_peak(NULL); /* a no-op */
  hali_context_release(ctx);
  hali_device_release(dev);
  hali_instance_release(in);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("regions");
  TCase *tc = tcase_create("fences");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, independent_regions);
  tcase_add_test(tc, p04_two_submissions);
  tcase_add_test(tc, write_after_read);
  suite_add_tcase(suite, tc);
  TCase *mem = tcase_create("memory");
  tcase_set_timeout(mem, 60);
  tcase_add_loop_test(mem, memory_statistics, 0, 2); /* local-sync, local-task */
  suite_add_tcase(suite, mem);
  return hali_test_main(suite);
}
