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
 *   the region that reads it.
 * - Two ~20 ms kernels in independent regions overlap in time on two
 *   workers, and do not on one. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "hali/hali.h"
#include "tests/settle.h"
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

static int traced_run_on(const char *file, int workers, const char *args,
                         submission_t *out, int cap);

/* Runs tests/passes/|file| @f on local-task with |inputs| and
 * |expected| outputs, traced; returns the submissions. */
static int traced_run(const char *file, const char *args, submission_t *out,
                      int cap) {
  char path[256];
  snprintf(path, sizeof(path), "passes/%s", file);
  return traced_run_on(path, 2, args, out, cap);
}

/* The same for tests/|file| on local-task with |workers| workers. */
static int traced_run_on(const char *file, int workers, const char *args,
                         submission_t *out, int cap) {
  if (!HALI_TRACING) return -1; /* configure --disable-tracing */
  char dir[] = "/tmp/hali_regions_XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char trace[128], cmd[2048];
  snprintf(trace, sizeof(trace), "%s/t.json", dir);
  snprintf(cmd, sizeof(cmd),
           "'%s' run '%s/tests/%s' --function=f --device=local-task "
           "--workers=%d --trace=hal --trace-format=chrome --trace-out='%s' "
           "%s",
           HALI_TOOL, HALI_SRCDIR, file, workers, trace, args);
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

/* Real overlap (doc/hal.md, "Queue order"): two ~20 ms kernels in
 * independent regions (tests/regions_overlap.hasm) on local-task.  With
 * two workers the queue has two runners, and the trace's submission
 * intervals intersect; with one worker they cannot, and do not (the
 * control: the overlap comes from the queue, not from the trace).  Both
 * results are right either way.  Asserted on the intervals, not on wall
 * time. */
static void spin_pair(int workers, submission_t *s) {
  int n = traced_run_on("regions_overlap.hasm", workers,
                        "--input=1xi32=5 --input=1xi32=7 --input=i64=8000000 "
                        "--expected_output=1xi32=8000005 "
                        "--expected_output=1xi32=8000007",
                        s, 16);
  if (n < 0) return;
  /* The two kernels, then the signal's join of both (empty). */
  ck_assert_int_eq(n, 3);
  ck_assert_int_eq(s[0].wait, s[1].wait); /* neither waits for the other */
  ck_assert_int_ne(s[1].wait, s[0].signal);
  /* Each spins for milliseconds: these are the kernels, not bookkeeping. */
  ck_assert_msg(s[0].dur > 1000 && s[1].dur > 1000, "durations %g, %g us",
                s[0].dur, s[1].dur);
}

START_TEST(independent_kernels_overlap) {
  if (!HALI_TRACING) return;
  submission_t s[16];
  spin_pair(2, s);
  double end0 = s[0].ts + s[0].dur, end1 = s[1].ts + s[1].dur;
  ck_assert_msg(s[1].ts < end0 && s[0].ts < end1,
                "no overlap on 2 workers: [%g, %g] and [%g, %g] us",
                s[0].ts, end0, s[1].ts, end1);
}
END_TEST

START_TEST(one_worker_serializes) {
  if (!HALI_TRACING) return;
  submission_t s[16];
  spin_pair(1, s);
  double end0 = s[0].ts + s[0].dur, end1 = s[1].ts + s[1].dur;
  ck_assert_msg(s[1].ts >= end0 || s[0].ts >= end1,
                "overlap on 1 worker: [%g, %g] and [%g, %g] us", s[0].ts,
                end0, s[1].ts, end1);
}
END_TEST

/* The deadlock report with fences as the only order: a barrier waits on a
 * fence nothing signals, a later barrier waits on nothing.  On local-task
 * the later one runs anyway, so the program reaches the await of the stuck
 * one and the report names that await (line 12); on local-sync, in
 * submission order, the later one is stuck behind it and the report names
 * the first await (line 11).  Either way: a report, not a hang. */
START_TEST(deadlock_report_follows_the_fences) {
  static const char prog[] =
      "module @dead\n"
      "func @dead() -> i32 {\n"
      "  %device = hal.device.get\n"
      "  %gate = hal.fence.create %device\n"
      "  %done = hal.fence.create %device\n"
      "  %other = hal.fence.create %device\n"
      "  %null = hal.fence.null\n"
      "  hal.device.queue.execute %device, %gate, %done, []\n"
      "  hal.device.queue.execute %device, %null, %other, []\n"
      "  %forever = const.i64 -1\n"
      "  %s = hal.fence.await %other, %forever\n"
      "  %s = hal.fence.await %done, %forever\n"
      "  return %s\n"
      "}\n";
  char dir[] = "/tmp/hali_dead_XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char path[128], cmd[512];
  snprintf(path, sizeof(path), "%s/dead.hasm", dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(prog, f);
  fclose(f);
  const char *const devices[2] = {"local-sync", "local-task --workers=2"};
  const char *const where[2] = {"at @dead@8 (", "at @dead@9 ("};
  const char *const line[2] = {"dead.hasm:11)", "dead.hasm:12)"};
  for (int d = 0; d < 2; ++d) {
    snprintf(cmd, sizeof(cmd), "timeout 60 '%s' run '%s' --function=dead "
             "--device=%s", HALI_TOOL, path, devices[d]);
    char *err = NULL;
    int rc = hali_test_shell(cmd, NULL, &err);
    ck_assert_msg(rc == 1, "%s: exit %d: %s", cmd, rc, err);
    ck_assert_msg(strstr(err, "FAILED_PRECONDITION: deadlock: all 1 "
                              "fiber(s) are suspended") &&
                      strstr(err, where[d]) && strstr(err, line[d]),
                  "%s: %s", devices[d], err);
    free(err);
  }
  unlink(path);
  rmdir(dir);
}
END_TEST

/* ---- Memory statistics through the C API (hali_device_query_memory_
 * statistics): sh_pack_share's call holds its slab (80 bytes: doc/passes.md,
 * "schedule-execution") and its 16-byte result, and nothing more; every
 * call frees what it allocated (the live bytes go back to where they
 * were), so the peak after 10 calls is the peak after 1. */
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
    hali_test_settle(dev, base);
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
  tcase_add_test(tc, independent_kernels_overlap);
  tcase_add_test(tc, one_worker_serializes);
  tcase_add_test(tc, deadlock_report_follows_the_fences);
  suite_add_tcase(suite, tc);
  TCase *mem = tcase_create("memory");
  tcase_set_timeout(mem, 60);
  tcase_add_loop_test(mem, memory_statistics, 0, 2); /* local-sync, local-task */
  suite_add_tcase(suite, mem);
  return hali_test_main(suite);
}
