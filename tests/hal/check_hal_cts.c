/* The HAL conformance suite: the same test bodies run against every device
 * configuration (Check loop tests; _i indexes cts_configs): local-sync and
 * local-task with 1, 2 and 4 workers. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/command_list.h" /* hali_hal_command_buffer_has_op_loop */
#include "tests/hal/hal_testutil.h"

typedef struct cts_config_t {
  const char *label;
  hali_hal_device_kind_t kind;
  uint32_t workers;
} cts_config_t;

static const cts_config_t cts_configs[] = {
    {"local-sync", HALI_HAL_DEVICE_LOCAL_SYNC, 0},
    {"local-task/1", HALI_HAL_DEVICE_LOCAL_TASK, 1},
    {"local-task/2", HALI_HAL_DEVICE_LOCAL_TASK, 2},
    {"local-task/4", HALI_HAL_DEVICE_LOCAL_TASK, 4},
};
#define CTS_CONFIG_COUNT ((int)(sizeof(cts_configs) / sizeof(cts_configs[0])))

static hali_hal_device_t *cts_device_with_limit(int i, uint64_t max_bytes) {
  hali_hal_device_params_t params;
  hali_hal_device_params_initialize(&params);
  params.kind = cts_configs[i].kind;
  params.worker_count = cts_configs[i].workers;
  params.max_bytes = max_bytes;
  hali_hal_device_t *device = NULL;
  HALI_CK_OK(hali_hal_device_create(&params, &device));
  ck_assert_uint_eq(hali_hal_device_kind(device), cts_configs[i].kind);
  if (cts_configs[i].kind == HALI_HAL_DEVICE_LOCAL_TASK)
    ck_assert_uint_eq(hali_hal_device_worker_count(device),
                      cts_configs[i].workers);
  return device;
}

static hali_hal_device_t *cts_device(int i) {
  return cts_device_with_limit(i, 0);
}

static hali_hal_buffer_t *cts_buffer(hali_hal_device_t *device,
                                     hali_hal_device_size_t size) {
  return hali_test_allocate(hali_hal_device_allocator(device), size);
}

static hali_hal_command_buffer_t *cts_command_buffer(void) {
  hali_hal_command_buffer_t *cb = NULL;
  HALI_CK_OK(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT, HALI_HAL_COMMAND_CATEGORY_ANY,
      &cb));
  return cb;
}

/* Finalizes |cb|, submits it with no wait fence and returns the status the
 * signal fence ends with.  Releases |cb|. */
static hali_status_t cts_run(hali_hal_device_t *device,
                             hali_hal_command_buffer_t *cb) {
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  hali_hal_fence_t *signal = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&signal));
  HALI_CK_OK(hali_hal_device_queue_execute(device, NULL, signal, &cb, 1));
  hali_hal_command_buffer_release(cb);
  hali_status_t status = hali_hal_fence_await(signal, HALI_INFINITE);
  hali_hal_fence_release(signal);
  return status;
}

static void cts_set_bytes(hali_hal_buffer_t *buffer, uint8_t value) {
  void *p = NULL;
  HALI_CK_OK(hali_hal_buffer_map_range(buffer, 0, HALI_HAL_WHOLE_BUFFER, &p));
  memset(p, value, (size_t)hali_hal_buffer_length(buffer));
}

/* Checks |buffer| bytes [begin, end) equal |expected| (the rest is the
 * caller's business). */
static void cts_expect_bytes(hali_hal_buffer_t *buffer, size_t begin,
                             size_t end, const uint8_t *expected,
                             const char *label) {
  for (size_t i = begin; i < end; ++i)
    ck_assert_msg(hali_test_byte(buffer, i) == expected[i - begin],
                  "%s: byte %zu is 0x%02x, expected 0x%02x", label, i,
                  hali_test_byte(buffer, i), expected[i - begin]);
}

static void cts_expect_fill(hali_hal_buffer_t *buffer, size_t begin,
                            size_t end, uint8_t value, const char *label) {
  for (size_t i = begin; i < end; ++i)
    ck_assert_msg(hali_test_byte(buffer, i) == value,
                  "%s: byte %zu is 0x%02x, expected 0x%02x", label, i,
                  hali_test_byte(buffer, i), value);
}

/* ---- Kernels. ---- */

/* out[i] = in[i] * c0 + c1 + (x + 10 y + 100 z) for the 4 lanes of each
 * workgroup (x, y, z); visits[wg] += 1; workers[wg] = worker id; also
 * exercises its 256 bytes of scratch. */
static int cts_scale_kernel(const hali_kernel_dispatch_state_t *d,
                            const hali_kernel_workgroup_state_t *w) {
  if (d->binding_count != 4 || d->constant_count != 2) return 90;
  if (!w->scratch || w->scratch_size < 256 || (uintptr_t)w->scratch % 64)
    return 91;
  const uint32_t *in = d->binding_ptrs[0];
  uint32_t *out = d->binding_ptrs[1];
  uint32_t *visits = d->binding_ptrs[2];
  uint32_t *workers = d->binding_ptrs[3];
  uint64_t wg = ((uint64_t)w->workgroup_id_z * d->workgroup_count_y +
                 w->workgroup_id_y) *
                    d->workgroup_count_x +
                w->workgroup_id_x;
  uint32_t *scratch = w->scratch;
  for (uint32_t lane = 0; lane < d->workgroup_size_x; ++lane) {
    uint64_t i = wg * d->workgroup_size_x + lane;
    if ((i + 1) * sizeof(uint32_t) > d->binding_lengths[1]) return 92;
    scratch[lane] = in[i] * d->constants[0] + d->constants[1];
  }
  for (uint32_t lane = 0; lane < d->workgroup_size_x; ++lane)
    out[wg * d->workgroup_size_x + lane] =
        scratch[lane] + w->workgroup_id_x + 10 * w->workgroup_id_y +
        100 * w->workgroup_id_z;
  visits[wg] += 1;
  workers[wg] = w->worker_id;
  return 0;
}

/* Returns 42 in the workgroup whose linear index is constant 0. */
static int cts_fail_kernel(const hali_kernel_dispatch_state_t *d,
                           const hali_kernel_workgroup_state_t *w) {
  uint64_t wg = ((uint64_t)w->workgroup_id_z * d->workgroup_count_y +
                 w->workgroup_id_y) *
                    d->workgroup_count_x +
                w->workgroup_id_x;
  return wg == d->constants[0] ? 42 : 0;
}

/* Counts its workgroups; the one whose linear index is constant 0
 * requests cts_stop (with CANCELLED): the submitter giving up mid-dispatch,
 * at a known workgroup. */
static hali_hal_stop_t *cts_stop;
static atomic_int cts_stop_ran;
static int cts_stop_kernel(const hali_kernel_dispatch_state_t *d,
                           const hali_kernel_workgroup_state_t *w) {
  uint64_t wg = ((uint64_t)w->workgroup_id_z * d->workgroup_count_y +
                 w->workgroup_id_y) *
                    d->workgroup_count_x +
                w->workgroup_id_x;
  atomic_fetch_add(&cts_stop_ran, 1);
  if (wg == d->constants[0])
    hali_hal_stop_request(cts_stop, HALI_STATUS_CANCELLED);
  return 0;
}

/* counter[0] += c0, atomically (replays of one command buffer on two
 * queues at once share the counter). */
static int cts_add_kernel(const hali_kernel_dispatch_state_t *d,
                          const hali_kernel_workgroup_state_t *w) {
  (void)w;
  if (d->binding_count != 1 || d->binding_lengths[0] < 4) return 93;
  atomic_fetch_add((_Atomic uint32_t *)d->binding_ptrs[0], d->constants[0]);
  return 0;
}

/* binding 0's first word = 1 when it runs on the thread that submitted
 * it (cts_submitter), 2 elsewhere. */
static pthread_t cts_submitter;
static int cts_where_kernel(const hali_kernel_dispatch_state_t *d,
                            const hali_kernel_workgroup_state_t *w) {
  (void)w;
  *(uint32_t *)d->binding_ptrs[0] =
      pthread_equal(pthread_self(), cts_submitter) ? 1 : 2;
  return 0;
}

static const hali_kernel_export_t cts_exports[] = {
    {"scale", cts_scale_kernel, 4, 2, {4, 1, 1}, 256},
    {"fail_at", cts_fail_kernel, 0, 1, {1, 1, 1}, 0},
    {"stop_at", cts_stop_kernel, 0, 1, {1, 1, 1}, 0},
    {"add", cts_add_kernel, 1, 1, {1, 1, 1}, 0},
    {"where", cts_where_kernel, 1, 0, {1, 1, 1}, 0},
};
static const hali_kernel_library_t cts_library = {
    HALI_KERNEL_ABI_VERSION, "cts_kernels", 5, cts_exports};

static hali_hal_executable_t *cts_executable(void) {
  hali_hal_executable_t *exe = NULL;
  HALI_CK_OK(hali_hal_executable_create_from_library(&cts_library, NULL, &exe));
  return exe;
}

/* ---- Transfer. ---- */

START_TEST(test_fill_patterns) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_buffer_t *buffer = cts_buffer(device, 64);
  cts_set_bytes(buffer, 0xAA);
  hali_hal_command_buffer_t *cb = cts_command_buffer();
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, buffer, 3, 5, 0x5C, 1));
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, buffer, 10, 6, 0xBEEF, 2));
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, buffer, 20, 12, 0x12345678, 4));
  /* Only the low bytes of the pattern count. */
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, buffer, 41, 2, 0xFFFFFF07, 1));
  HALI_CK_OK(cts_run(device, cb));
  const char *label = cts_configs[_i].label;
  cts_expect_fill(buffer, 0, 3, 0xAA, label);
  cts_expect_fill(buffer, 3, 8, 0x5C, label);
  cts_expect_fill(buffer, 8, 10, 0xAA, label);
  static const uint8_t beef[6] = {0xEF, 0xBE, 0xEF, 0xBE, 0xEF, 0xBE};
  cts_expect_bytes(buffer, 10, 16, beef, label);
  cts_expect_fill(buffer, 16, 20, 0xAA, label);
  static const uint8_t word[12] = {0x78, 0x56, 0x34, 0x12, 0x78, 0x56,
                                   0x34, 0x12, 0x78, 0x56, 0x34, 0x12};
  cts_expect_bytes(buffer, 20, 32, word, label);
  cts_expect_fill(buffer, 32, 41, 0xAA, label);
  cts_expect_fill(buffer, 41, 43, 0x07, label);
  cts_expect_fill(buffer, 43, 64, 0xAA, label);
  hali_hal_buffer_release(buffer);
  hali_hal_device_release(device);
}
END_TEST

/* Fills of every pattern length, against a byte-at-a-time reference:
 * patterns with equal and unequal bytes, start offsets of every phase
 * against 16-byte alignment, lengths around the 32-byte chunk and around
 * the size where fills switch to streaming stores (4 MiB), in aligned
 * and unaligned memory. */
START_TEST(test_fill_widened_matches_reference) {
  hali_hal_device_t *device = cts_device(_i);
  static const struct {
    uint32_t pattern, length;
  } patterns[] = {{0x5C, 1},       {0x0707, 2},     {0xBEEF, 2},
                  {0x12345678, 4}, {0xABABABAB, 4}, {0x00FF00FF, 4},
                  {0x01000000, 4}};
  static const uint64_t lengths[] = {4, 28, 32, 36, 60, 64, 100, 4096,
                                     (4u << 20) - 4, 4u << 20,
                                     (4u << 20) + 68};
  static const uint64_t small_starts[] = {0, 2, 4, 6, 8, 10, 12, 14, 16, 20};
  static const uint64_t big_starts[] = {0, 6};
  const char *label = cts_configs[_i].label;
  for (size_t k = 0; k < sizeof patterns / sizeof patterns[0]; ++k)
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; ++l) {
      const bool big = lengths[l] > 4096;
      /* Past 4 KiB only the unequal 2- and 4-byte patterns (the others
       * are memsets), to keep the test fast. */
      if (big && k != 2 && k != 3) continue;
      const size_t nstarts = big ? 2 : sizeof small_starts / sizeof(uint64_t);
      for (size_t t = 0; t < nstarts; ++t) {
        const uint32_t plen = patterns[k].length;
        const uint64_t start = big ? big_starts[t] : small_starts[t];
        const uint64_t len = lengths[l] - lengths[l] % plen;
        const uint64_t off = start - start % plen;
        const size_t size = (size_t)(off + len + 40);
        /* skew 0: the allocator's (aligned) memory; 1, 2: host memory
         * wrapped at an odd and an even unaligned address, so that the
         * fill reaches its aligned part at every phase of the pattern. */
        const int skew = (int)((k + l + t) % 3);
        uint8_t *host = NULL;
        hali_hal_buffer_t *buffer = NULL;
        if (skew == 0) {
          buffer = cts_buffer(device, size);
        } else {
          host = malloc(size + 64);
          ck_assert_ptr_nonnull(host);
          HALI_CK_OK(hali_hal_buffer_wrap_host(
              hali_test_host_params(), host + 32 + skew, size, NULL, NULL,
              NULL, &buffer));
        }
        uint8_t *want = malloc(size), *got = malloc(size);
        ck_assert_ptr_nonnull(want);
        ck_assert_ptr_nonnull(got);
        cts_set_bytes(buffer, 0xAA);
        memset(want, 0xAA, size);
        for (uint64_t i = 0; i < len; ++i)
          want[off + i] = (uint8_t)(patterns[k].pattern >> (8 * (i % plen)));
        hali_hal_command_buffer_t *cb = cts_command_buffer();
        HALI_CK_OK(hali_hal_command_buffer_fill(cb, buffer, off, len,
                                                patterns[k].pattern, plen));
        HALI_CK_OK(cts_run(device, cb));
        HALI_CK_OK(hali_hal_buffer_read(buffer, 0, got, size));
        for (size_t i = 0; i < size; ++i)
          if (got[i] != want[i])
            ck_abort_msg("%s: fill of %" PRIu64 " bytes at %" PRIu64
                         " with 0x%x/%u: byte %zu is 0x%02x, expected 0x%02x",
                         label, len, off, patterns[k].pattern, plen, i,
                         got[i], want[i]);
        free(want);
        free(got);
        hali_hal_buffer_release(buffer);
        free(host);
      }
    }
  hali_hal_device_release(device);
}
END_TEST

START_TEST(test_fill_copy_subspans) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_buffer_t *buffer = cts_buffer(device, 64);
  cts_set_bytes(buffer, 0x11);
  hali_hal_buffer_t *low = NULL, *high = NULL;
  HALI_CK_OK(hali_hal_buffer_subspan(buffer, 8, 16, &low));  /* [8, 24) */
  HALI_CK_OK(hali_hal_buffer_subspan(buffer, 40, 20, &high)); /* [40, 60) */
  hali_hal_command_buffer_t *cb = cts_command_buffer();
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, low, 2, 6, 0x2233, 2));
  HALI_CK_OK(hali_hal_command_buffer_execution_barrier(cb));
  /* Copy within one allocation, non-overlapping, through subspans. */
  HALI_CK_OK(hali_hal_command_buffer_copy(cb, low, 0, high, 5, 10));
  HALI_CK_OK(cts_run(device, cb));
  const char *label = cts_configs[_i].label;
  cts_expect_fill(buffer, 0, 10, 0x11, label);
  static const uint8_t filled[6] = {0x33, 0x22, 0x33, 0x22, 0x33, 0x22};
  cts_expect_bytes(buffer, 10, 16, filled, label);
  cts_expect_fill(buffer, 16, 45, 0x11, label);
  static const uint8_t copied[10] = {0x11, 0x11, 0x33, 0x22, 0x33,
                                     0x22, 0x33, 0x22, 0x11, 0x11};
  cts_expect_bytes(buffer, 45, 55, copied, label);
  cts_expect_fill(buffer, 55, 64, 0x11, label);
  /* Overlapping ranges of one allocation are rejected at record time. */
  cb = cts_command_buffer();
  hali_hal_buffer_t *mid = NULL;
  HALI_CK_OK(hali_hal_buffer_subspan(buffer, 20, 30, &mid)); /* [20, 50) */
  HALI_CK_STATUS(hali_hal_command_buffer_copy(cb, low, 8, mid, 0, 8),
                 HALI_STATUS_INVALID_ARGUMENT, "[16, 24)", "[20, 28)",
                 "overlap");
  HALI_CK_STATUS(hali_hal_command_buffer_copy(cb, mid, 22, high, 0, 8),
                 HALI_STATUS_INVALID_ARGUMENT, "[42, 50)", "[40, 48)");
  hali_hal_command_buffer_release(cb);
  hali_hal_buffer_release(mid);
  hali_hal_buffer_release(low);
  hali_hal_buffer_release(high);
  hali_hal_buffer_release(buffer);
  hali_hal_device_release(device);
}
END_TEST

START_TEST(test_update_copies_at_record_time) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_buffer_t *buffer = cts_buffer(device, 16);
  cts_set_bytes(buffer, 0);
  uint8_t source[5] = {1, 2, 3, 4, 5};
  hali_hal_command_buffer_t *cb = cts_command_buffer();
  HALI_CK_OK(hali_hal_command_buffer_update(cb, source, buffer, 7, 5));
  memset(source, 0xFF, sizeof(source)); /* must not affect the recording */
  HALI_CK_OK(cts_run(device, cb));
  static const uint8_t expected[16] = {0, 0, 0, 0, 0, 0, 0, 1,
                                       2, 3, 4, 5, 0, 0, 0, 0};
  cts_expect_bytes(buffer, 0, 16, expected, cts_configs[_i].label);
  hali_hal_buffer_release(buffer);
  hali_hal_device_release(device);
}
END_TEST

START_TEST(test_submission_rules) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_buffer_t *buffer = cts_buffer(device, 16);
  hali_hal_command_buffer_t *cb = cts_command_buffer();
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, buffer, 0, 16, 1, 1));
  HALI_CK_STATUS(hali_hal_device_queue_execute(device, NULL, NULL, &cb, 1),
                 HALI_STATUS_FAILED_PRECONDITION, "not finalized");
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  HALI_CK_OK(hali_hal_device_queue_execute(device, NULL, NULL, &cb, 1));
  HALI_CK_STATUS(hali_hal_device_queue_execute(device, NULL, NULL, &cb, 1),
                 HALI_STATUS_FAILED_PRECONDITION, "one-shot",
                 "more than once");
  hali_hal_command_buffer_release(cb);
  /* A reusable command buffer runs as often as it is submitted. */
  hali_hal_command_buffer_t *reusable = NULL;
  HALI_CK_OK(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE,
      HALI_HAL_COMMAND_CATEGORY_TRANSFER, &reusable));
  hali_hal_buffer_t *counter = cts_buffer(device, 4);
  hali_hal_buffer_t *scratch = cts_buffer(device, 4);
  /* counter <- scratch; scratch <- 7: after two runs counter holds 7. */
  HALI_CK_OK(hali_hal_command_buffer_copy(reusable, scratch, 0, counter, 0, 4));
  HALI_CK_OK(hali_hal_command_buffer_fill(reusable, scratch, 0, 4, 7, 4));
  HALI_CK_OK(hali_hal_command_buffer_finalize(reusable));
  hali_hal_fence_t *signal = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&signal));
  hali_hal_command_buffer_t *twice[2] = {reusable, reusable};
  HALI_CK_OK(hali_hal_device_queue_execute(device, NULL, signal, twice, 2));
  HALI_CK_OK(hali_hal_fence_await(signal, HALI_INFINITE));
  uint32_t value = 0;
  HALI_CK_OK(hali_hal_buffer_read(counter, 0, &value, 4));
  ck_assert_uint_eq(value, 7);
  /* An empty submission is a wait -> signal barrier. */
  hali_hal_fence_t *after = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&after));
  HALI_CK_OK(hali_hal_device_queue_execute(device, signal, after, NULL, 0));
  HALI_CK_OK(hali_hal_fence_await(after, HALI_INFINITE));
  hali_hal_fence_release(after);
  hali_hal_fence_release(signal);
  hali_hal_command_buffer_release(reusable);
  hali_hal_buffer_release(counter);
  hali_hal_buffer_release(scratch);
  hali_hal_buffer_release(buffer);
  hali_hal_device_release(device);
}
END_TEST

/* ---- Queue ordering and failure propagation. ---- */

typedef struct signal_thread_t {
  hali_hal_fence_t *fence;
  int delay_ms;
} signal_thread_t;

static void *signal_thread_main(void *arg) {
  signal_thread_t *job = arg;
  hali_test_sleep_ms(job->delay_ms);
  hali_status_free(hali_hal_fence_signal(job->fence));
  return NULL;
}

static void cts_submit_fill(hali_hal_device_t *device, hali_hal_fence_t *wait,
                            hali_hal_fence_t *signal,
                            hali_hal_buffer_t *buffer, uint8_t value) {
  hali_hal_command_buffer_t *cb = cts_command_buffer();
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, buffer, 0,
                                          hali_hal_buffer_length(buffer),
                                          value, 1));
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  HALI_CK_OK(hali_hal_device_queue_execute(device, wait, signal, &cb, 1));
  hali_hal_command_buffer_release(cb);
}

START_TEST(test_queue_order_and_parking) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_buffer_t *buffer = cts_buffer(device, 8);
  hali_hal_fence_t *gate = NULL, *first = NULL, *last = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&gate));
  HALI_CK_OK(hali_hal_fence_create_pending(&first));
  HALI_CK_OK(hali_hal_fence_create_pending(&last));
  cts_submit_fill(device, NULL, first, buffer, 1);
  HALI_CK_OK(hali_hal_fence_await(first, HALI_INFINITE));
  /* Parked behind |gate|; the next submission has no wait of its own. */
  hali_hal_fence_t *gated = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&gated));
  cts_submit_fill(device, gate, gated, buffer, 2);
  cts_submit_fill(device, NULL, last, buffer, 3);
  bool in_order = cts_configs[_i].kind == HALI_HAL_DEVICE_LOCAL_SYNC;
  if (in_order) {
    /* local-sync: it runs after the parked one: the queue is in order. */
    HALI_CK_STATUS(hali_hal_fence_await(last, 20 * 1000000),
                   HALI_STATUS_DEADLINE_EXCEEDED, "did not reach 1");
    ck_assert_uint_eq(hali_test_byte(buffer, 0), 1);
  } else {
    /* local-task: only fences order submissions: the ungated one runs
     * while the gated one still waits (doc/hal.md, "Queue order"). */
    HALI_CK_OK(hali_hal_fence_await(last, HALI_INFINITE));
    ck_assert_uint_eq(hali_test_byte(buffer, 0), 3);
    HALI_CK_STATUS(hali_hal_fence_await(gated, 20 * 1000000),
                   HALI_STATUS_DEADLINE_EXCEEDED, "did not reach 1");
    ck_assert_uint_eq(hali_test_byte(buffer, 7), 3);
  }
  /* Open the gate from another thread; the queue drains. */
  signal_thread_t job = {gate, 5};
  pthread_t thread;
  ck_assert_int_eq(pthread_create(&thread, NULL, signal_thread_main, &job), 0);
  HALI_CK_OK(hali_hal_fence_await(last, HALI_INFINITE));
  HALI_CK_OK(hali_hal_fence_await(gated, HALI_INFINITE));
  pthread_join(thread, NULL);
  /* The last fill to run wins: 3 in order, the gated 2 otherwise. */
  ck_assert_uint_eq(hali_test_byte(buffer, 0), in_order ? 3 : 2);
  ck_assert_uint_eq(hali_test_byte(buffer, 7), in_order ? 3 : 2);
  HALI_CK_OK(hali_hal_device_wait_idle(device, HALI_INFINITE));
  hali_hal_fence_release(gated);
  hali_hal_fence_release(gate);
  hali_hal_fence_release(first);
  hali_hal_fence_release(last);
  hali_hal_buffer_release(buffer);
  hali_hal_device_release(device);
}
END_TEST

/* Queue work chained through the top of a timeline: a submission signals
 * 2^64-2, the next waits on it and signals 2^64-1 (a legal payload), and a
 * third waits on that.  Signalling the top point again leaves the
 * timeline there. */
START_TEST(test_queue_top_of_timeline) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_buffer_t *a = cts_buffer(device, 4), *b = cts_buffer(device, 4);
  hali_hal_semaphore_t *sem = NULL;
  HALI_CK_OK(hali_hal_semaphore_create(UINT64_MAX - 3, &sem));
  hali_hal_fence_t *f2 = NULL, *f1 = NULL, *done = NULL;
  HALI_CK_OK(hali_hal_fence_create_at(sem, UINT64_MAX - 1, &f2));
  HALI_CK_OK(hali_hal_fence_create_at(sem, UINT64_MAX, &f1));
  HALI_CK_OK(hali_hal_fence_create_pending(&done));
  cts_submit_fill(device, NULL, f2, a, 0x11);
  cts_submit_fill(device, f2, f1, b, 0x22);
  HALI_CK_OK(hali_hal_device_queue_execute(device, f1, done, NULL, 0));
  HALI_CK_OK(hali_hal_fence_await(done, 5000 * 1000000LL));
  ck_assert_uint_eq(hali_test_byte(a, 3), 0x11);
  ck_assert_uint_eq(hali_test_byte(b, 3), 0x22);
  uint64_t value = 0;
  HALI_CK_OK(hali_hal_semaphore_query(sem, &value));
  ck_assert_uint_eq(value, UINT64_MAX);
  HALI_CK_OK(hali_hal_device_queue_execute(device, NULL, f1, NULL, 0));
  HALI_CK_OK(hali_hal_device_wait_idle(device, HALI_INFINITE));
  HALI_CK_OK(hali_hal_semaphore_query(sem, &value));
  ck_assert_uint_eq(value, UINT64_MAX);
  hali_hal_fence_release(f2);
  hali_hal_fence_release(f1);
  hali_hal_fence_release(done);
  hali_hal_semaphore_release(sem);
  hali_hal_buffer_release(a);
  hali_hal_buffer_release(b);
  hali_hal_device_release(device);
}
END_TEST

START_TEST(test_wait_failure_propagates) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_buffer_t *buffer = cts_buffer(device, 8);
  cts_set_bytes(buffer, 0);
  hali_hal_fence_t *wait = NULL, *signal = NULL, *next = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&wait));
  HALI_CK_OK(hali_hal_fence_create_pending(&signal));
  HALI_CK_OK(hali_hal_fence_create_pending(&next));
  cts_submit_fill(device, wait, signal, buffer, 9);
  /* Work not waiting on the failure still runs. */
  cts_submit_fill(device, NULL, next, buffer, 4);
  hali_hal_fence_fail(wait,
                      hali_status_make(HALI_STATUS_DATA_LOSS, "upstream broke"));
  HALI_CK_STATUS(hali_hal_fence_await(signal, HALI_INFINITE),
                 HALI_STATUS_DATA_LOSS, "upstream broke",
                 "wait fence of queue submission",
                 hali_hal_device_kind_name(cts_configs[_i].kind));
  HALI_CK_OK(hali_hal_fence_await(next, HALI_INFINITE));
  ck_assert_uint_eq(hali_test_byte(buffer, 0), 4); /* the 9 never landed */
  /* The first failure is kept: failing the signal fence again changes
   * nothing. */
  hali_hal_fence_fail(signal,
                      hali_status_make(HALI_STATUS_ABORTED, "second failure"));
  bool ready = false;
  HALI_CK_STATUS(hali_hal_fence_query(signal, &ready), HALI_STATUS_DATA_LOSS,
                 "upstream broke");
  ck_assert(ready);
  /* Downstream of the failed signal fence fails with the same status. */
  hali_hal_fence_t *downstream = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&downstream));
  HALI_CK_OK(hali_hal_device_queue_execute(device, signal, downstream, NULL, 0));
  HALI_CK_STATUS(hali_hal_fence_await(downstream, HALI_INFINITE),
                 HALI_STATUS_DATA_LOSS, "upstream broke");
  hali_hal_fence_release(downstream);
  hali_hal_fence_release(wait);
  hali_hal_fence_release(signal);
  hali_hal_fence_release(next);
  hali_hal_buffer_release(buffer);
  hali_hal_device_release(device);
}
END_TEST

START_TEST(test_any_wait_point_failure_fails_fast) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_buffer_t *buffer = cts_buffer(device, 8);
  hali_hal_fence_t *a = NULL, *b = NULL, *wait = NULL, *signal = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&a));
  HALI_CK_OK(hali_hal_fence_create_pending(&b));
  hali_hal_fence_t *parts[2] = {a, b};
  HALI_CK_OK(hali_hal_fence_join(parts, 2, &wait));
  HALI_CK_OK(hali_hal_fence_create_pending(&signal));
  cts_submit_fill(device, wait, signal, buffer, 1);
  /* The second point fails while the first is still pending: the
   * submission fails now, without waiting for |a|. */
  hali_hal_fence_fail(b, hali_status_make(HALI_STATUS_ABORTED, "b died"));
  HALI_CK_STATUS(hali_hal_fence_await(signal, 5000 * 1000000LL),
                 HALI_STATUS_ABORTED, "b died");
  HALI_CK_OK(hali_hal_fence_signal(a));
  HALI_CK_OK(hali_hal_device_wait_idle(device, HALI_INFINITE));
  ck_assert_uint_eq(hali_test_byte(buffer, 0), 0);
  hali_hal_fence_release(a);
  hali_hal_fence_release(b);
  hali_hal_fence_release(wait);
  hali_hal_fence_release(signal);
  hali_hal_buffer_release(buffer);
  hali_hal_device_release(device);
}
END_TEST

/* ---- Dispatch. ---- */

enum { GX = 7, GY = 3, GZ = 2, WG = GX * GY * GZ, N = WG * 4 };

typedef struct dispatch_buffers_t {
  hali_hal_buffer_t *in, *out, *visits, *workers;
} dispatch_buffers_t;

static void cts_run_scale(hali_hal_device_t *device, dispatch_buffers_t *b) {
  b->in = cts_buffer(device, N * 4);
  b->out = cts_buffer(device, N * 4);
  b->visits = cts_buffer(device, WG * 4);
  b->workers = cts_buffer(device, WG * 4);
  uint32_t in[N];
  for (uint32_t i = 0; i < N; ++i) in[i] = i * 3 + 1;
  HALI_CK_OK(hali_hal_buffer_write(b->in, 0, in, sizeof(in)));
  hali_hal_executable_t *exe = cts_executable();
  hali_hal_command_buffer_t *cb = cts_command_buffer();
  uint32_t constants[2] = {5, 1000};
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 0, constants, 2));
  hali_hal_buffer_binding_t bindings[4] = {
      {0, b->in, 0, HALI_HAL_WHOLE_BUFFER},
      {1, b->out, 0, HALI_HAL_WHOLE_BUFFER},
      {2, b->visits, 0, WG * 4},
      {3, b->workers, 0, WG * 4},
  };
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(cb, bindings, 4));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 0, GX, GY, GZ));
  hali_hal_executable_release(exe); /* the recording keeps it alive */
  HALI_CK_OK(cts_run(device, cb));
}

static void cts_release_dispatch(dispatch_buffers_t *b) {
  hali_hal_buffer_release(b->in);
  hali_hal_buffer_release(b->out);
  hali_hal_buffer_release(b->visits);
  hali_hal_buffer_release(b->workers);
}

START_TEST(test_dispatch_multi_workgroup) {
  hali_hal_device_t *device = cts_device(_i);
  dispatch_buffers_t b;
  cts_run_scale(device, &b);
  uint32_t out[N], visits[WG], workers[WG];
  HALI_CK_OK(hali_hal_buffer_read(b.out, 0, out, sizeof(out)));
  HALI_CK_OK(hali_hal_buffer_read(b.visits, 0, visits, sizeof(visits)));
  HALI_CK_OK(hali_hal_buffer_read(b.workers, 0, workers, sizeof(workers)));
  for (uint32_t z = 0; z < GZ; ++z)
    for (uint32_t y = 0; y < GY; ++y)
      for (uint32_t x = 0; x < GX; ++x) {
        uint32_t wg = (z * GY + y) * GX + x;
        ck_assert_msg(visits[wg] == 1, "%s: workgroup %u ran %u times",
                      cts_configs[_i].label, wg, visits[wg]);
        ck_assert_uint_lt(workers[wg], hali_hal_device_worker_count(device));
        for (uint32_t lane = 0; lane < 4; ++lane) {
          uint32_t i = wg * 4 + lane;
          ck_assert_uint_eq(out[i], (i * 3 + 1) * 5 + 1000 + x + 10 * y +
                                        100 * z);
        }
      }
  cts_release_dispatch(&b);
  hali_hal_device_release(device);
}
END_TEST

/* Grids whose x * y * z would wrap (to 0: "run nothing and succeed") or
 * exceed the limits are refused when recorded, on every device; an exact
 * empty grid runs nothing; the valid dispatch beside them runs once. */
START_TEST(test_dispatch_grid_limits) {
  hali_hal_device_t *device = cts_device(_i);
  dispatch_buffers_t b = {
      .in = cts_buffer(device, N * 4),
      .out = cts_buffer(device, N * 4),
      .visits = cts_buffer(device, WG * 4),
      .workers = cts_buffer(device, WG * 4),
  };
  cts_set_bytes(b.visits, 0);
  hali_hal_executable_t *exe = cts_executable();
  hali_hal_command_buffer_t *cb = cts_command_buffer();
  uint32_t constants[2] = {1, 0};
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 0, constants, 2));
  hali_hal_buffer_binding_t bindings[4] = {
      {0, b.in, 0, HALI_HAL_WHOLE_BUFFER},
      {1, b.out, 0, HALI_HAL_WHOLE_BUFFER},
      {2, b.visits, 0, WG * 4},
      {3, b.workers, 0, WG * 4},
  };
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(cb, bindings, 4));
  HALI_CK_STATUS(
      hali_hal_command_buffer_dispatch(cb, exe, 0, 4194304, 2097152, 2097152),
      HALI_STATUS_OUT_OF_RANGE,
      "dispatch of executable 'cts_kernels' export 0 'scale': workgroup "
      "count 4194304 x 2097152 x 2097152 overflows 64 bits");
  HALI_CK_STATUS(
      hali_hal_command_buffer_dispatch(cb, exe, 0, 65536, 65536, 65536),
      HALI_STATUS_OUT_OF_RANGE,
      "65536 x 65536 x 65536 = 281474976710656 workgroups exceeds the "
      "maximum of 4294967295 per dispatch");
  HALI_CK_STATUS(
      hali_hal_command_buffer_dispatch(cb, exe, 0, UINT32_MAX, 1, 1),
      HALI_STATUS_OUT_OF_RANGE,
      "workgroup count x 4294967295 exceeds the maximum of 2147483647");
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 0, 0, GY, GZ));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 0, GX, GY, GZ));
  ck_assert_uint_eq(hali_hal_command_buffer_command_count(cb), 4);
  hali_hal_executable_release(exe);
  HALI_CK_OK(cts_run(device, cb));
  uint32_t visits[WG];
  HALI_CK_OK(hali_hal_buffer_read(b.visits, 0, visits, sizeof(visits)));
  for (uint32_t wg = 0; wg < WG; ++wg)
    ck_assert_msg(visits[wg] == 1, "%s: workgroup %u ran %u times",
                  cts_configs[_i].label, wg, visits[wg]);
  cts_release_dispatch(&b);
  hali_hal_device_release(device);
}
END_TEST

START_TEST(test_dispatch_kernel_failure) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_buffer_t *buffer = cts_buffer(device, 4);
  cts_set_bytes(buffer, 0);
  hali_hal_executable_t *exe = cts_executable();
  hali_hal_command_buffer_t *cb = cts_command_buffer();
  uint32_t fail_at = 1 * 4 + 2; /* workgroup (2,1,0) of a 4x3x1 grid */
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 0, &fail_at, 1));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 1, 4, 3, 1));
  HALI_CK_OK(hali_hal_command_buffer_execution_barrier(cb));
  /* Nothing after the failing command runs. */
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, buffer, 0, 4, 0xAB, 1));
  HALI_CK_STATUS(cts_run(device, cb), HALI_STATUS_INTERNAL,
                 "error code 42", "executable 'cts_kernels'",
                 "export 1 'fail_at'", "workgroup (2,1,0)",
                 "command 1 of 4",
                 hali_hal_device_kind_name(cts_configs[_i].kind));
  ck_assert_uint_eq(hali_test_byte(buffer, 0), 0);
  hali_hal_executable_release(exe);
  hali_hal_buffer_release(buffer);
  hali_hal_device_release(device);
}
END_TEST

START_TEST(test_dispatch_usage_and_mapping) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_allocator_t *allocator = hali_hal_device_allocator(device);
  hali_hal_buffer_params_t transfer_only = {
      .memory_types = HALI_HAL_MEMORY_TYPE_HOST_VISIBLE,
      .usage = HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_MAPPING,
  };
  hali_hal_buffer_t *buffer = NULL;
  HALI_CK_OK(
      hali_hal_allocator_allocate_buffer(allocator, transfer_only, 64, &buffer));
  hali_hal_command_buffer_t *cb = cts_command_buffer();
  hali_hal_buffer_binding_t binding = {0, buffer, 0, 64};
  HALI_CK_STATUS(hali_hal_command_buffer_push_descriptor_set(cb, &binding, 1),
                 HALI_STATUS_PERMISSION_DENIED, "binding 0",
                 "lacks the required DISPATCH usage");
  hali_hal_command_buffer_release(cb);
  hali_hal_buffer_release(buffer);
  hali_hal_buffer_params_t device_local = {
      .memory_types = HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL,
      .usage = HALI_HAL_BUFFER_USAGE_ALL,
  };
  HALI_CK_OK(
      hali_hal_allocator_allocate_buffer(allocator, device_local, 64, &buffer));
  void *p = NULL;
  HALI_CK_STATUS(hali_hal_buffer_map_range(buffer, 0, 64, &p),
                 HALI_STATUS_PERMISSION_DENIED, "not HOST_VISIBLE");
  hali_hal_buffer_release(buffer);
  hali_hal_device_release(device);
}
END_TEST

START_TEST(test_dispatch_uncommitted_binding) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_buffer_t *buffer = NULL;
  hali_hal_fence_t *freed = NULL, *made = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&freed));
  HALI_CK_OK(hali_hal_fence_create_pending(&made));
  /* On local-task only fences order submissions (doc/hal.md, "Queue
   * order"): the dealloca waits for the alloca. */
  HALI_CK_OK(hali_hal_device_queue_alloca(device, NULL, made,
                                          hali_test_host_params(), N * 4,
                                          &buffer));
  HALI_CK_OK(hali_hal_device_queue_dealloca(device, made, freed, buffer));
  hali_hal_fence_release(made);
  HALI_CK_OK(hali_hal_fence_await(freed, HALI_INFINITE));
  dispatch_buffers_t b;
  memset(&b, 0, sizeof(b));
  b.visits = cts_buffer(device, WG * 4);
  hali_hal_executable_t *exe = cts_executable();
  hali_hal_command_buffer_t *cb = cts_command_buffer();
  uint32_t constants[2] = {1, 2};
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 0, constants, 2));
  hali_hal_buffer_binding_t bindings[4] = {
      {0, b.visits, 0, WG * 4},
      {1, buffer, 0, N * 4},
      {2, b.visits, 0, WG * 4},
      {3, b.visits, 0, WG * 4},
  };
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(cb, bindings, 4));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 0, 1, 1, 1));
  HALI_CK_STATUS(cts_run(device, cb), HALI_STATUS_FAILED_PRECONDITION,
                 "not committed", "binding 1",
                 "executable 'cts_kernels' export 0 'scale'");
  uint32_t visits = 0;
  HALI_CK_OK(hali_hal_buffer_read(b.visits, 0, &visits, 4));
  ck_assert_uint_eq(visits, 0); /* no workgroup ran */
  hali_hal_executable_release(exe);
  hali_hal_buffer_release(b.visits);
  hali_hal_buffer_release(buffer);
  hali_hal_fence_release(freed);
  hali_hal_device_release(device);
}
END_TEST

/* A reusable command buffer replays from the program made at finalize
 * (hal/command_exec.c): each dispatch sees the constants and bindings
 * pushed before it (here changed between dispatches, a binding to a
 * subspan at an offset), on every replay, as a one-shot recording of the
 * same commands (which replays by walking the list) and as the plain
 * formula say.  A binding whose storage was decommitted after finalize
 * fails the replay with the walk's error. */
static void record_program_test(hali_hal_command_buffer_t *cb,
                                hali_hal_executable_t *exe,
                                hali_hal_buffer_t *in, hali_hal_buffer_t *out,
                                hali_hal_buffer_t *out2_span,
                                hali_hal_buffer_t *visits,
                                hali_hal_buffer_t *workers) {
  uint32_t constants[2] = {5, 1000};
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 0, constants, 2));
  hali_hal_buffer_binding_t bindings[4] = {
      {0, in, 0, HALI_HAL_WHOLE_BUFFER},
      {1, out, 0, HALI_HAL_WHOLE_BUFFER},
      {2, visits, 0, WG * 4},
      {3, workers, 0, WG * 4},
  };
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(cb, bindings, 4));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 0, GX, GY, GZ));
  uint32_t c1 = 2000;
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 1, &c1, 1));
  hali_hal_buffer_binding_t second = {1, out2_span, 4 * 4, N * 4};
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(cb, &second, 1));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 0, GX, GY, GZ));
  /* An exact empty grid between them runs nothing. */
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 0, 0, 1, 1));
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
}

static void expect_program_results(hali_hal_buffer_t *out,
                                   hali_hal_buffer_t *out2,
                                   hali_hal_buffer_t *visits, uint32_t runs,
                                   const char *label) {
  uint32_t got[N], got2[N + 8], v[WG];
  HALI_CK_OK(hali_hal_buffer_read(out, 0, got, sizeof(got)));
  HALI_CK_OK(hali_hal_buffer_read(out2, 0, got2, sizeof(got2)));
  HALI_CK_OK(hali_hal_buffer_read(visits, 0, v, sizeof(v)));
  for (uint32_t z = 0; z < GZ; ++z)
    for (uint32_t y = 0; y < GY; ++y)
      for (uint32_t x = 0; x < GX; ++x) {
        uint32_t wg = (z * GY + y) * GX + x;
        ck_assert_msg(v[wg] == 2 * runs, "%s: workgroup %u ran %u times",
                      label, wg, v[wg]);
        for (uint32_t lane = 0; lane < 4; ++lane) {
          uint32_t i = wg * 4 + lane, id = x + 10 * y + 100 * z;
          ck_assert_uint_eq(got[i], (i * 3 + 1) * 5 + 1000 + id);
          /* out2 = 8 bytes of span offset + 16 bytes of binding offset */
          ck_assert_uint_eq(got2[i + 6], (i * 3 + 1) * 5 + 2000 + id);
        }
      }
  for (uint32_t i = 0; i < 6; ++i) ck_assert_uint_eq(got2[i], 0);
}

START_TEST(test_reusable_replay_program) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_executable_t *exe = cts_executable();
  hali_hal_buffer_t *in = cts_buffer(device, N * 4);
  uint32_t data[N];
  for (uint32_t i = 0; i < N; ++i) data[i] = i * 3 + 1;
  HALI_CK_OK(hali_hal_buffer_write(in, 0, data, sizeof(data)));
  for (int mode = 0; mode < 2; ++mode) { /* 0: reusable, 1: one-shot */
    hali_hal_buffer_t *out = cts_buffer(device, N * 4);
    hali_hal_buffer_t *out2 = cts_buffer(device, (N + 8) * 4);
    hali_hal_buffer_t *visits = cts_buffer(device, WG * 4);
    hali_hal_buffer_t *workers = cts_buffer(device, WG * 4);
    hali_hal_buffer_t *span = NULL;
    HALI_CK_OK(hali_hal_buffer_subspan(out2, 8, (N + 6) * 4, &span));
    hali_hal_command_buffer_t *cb = NULL;
    HALI_CK_OK(hali_hal_command_buffer_create(
        mode ? HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT
             : HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE,
        HALI_HAL_COMMAND_CATEGORY_ANY, &cb));
    record_program_test(cb, exe, in, out, span, visits, workers);
    uint32_t runs = mode ? 1 : 3;
    for (uint32_t r = 0; r < runs; ++r) {
      hali_hal_fence_t *signal = NULL;
      HALI_CK_OK(hali_hal_fence_create_pending(&signal));
      HALI_CK_OK(hali_hal_device_queue_execute(device, NULL, signal, &cb, 1));
      HALI_CK_OK(hali_hal_fence_await(signal, HALI_INFINITE));
      hali_hal_fence_release(signal);
    }
    expect_program_results(out, out2, visits, runs,
                           mode ? "one-shot" : "reusable");
    hali_hal_command_buffer_release(cb);
    hali_hal_buffer_release(span);
    hali_hal_buffer_release(out);
    hali_hal_buffer_release(out2);
    hali_hal_buffer_release(visits);
    hali_hal_buffer_release(workers);
  }
  /* Storage decommitted after finalize: the replay fails as the walk. */
  hali_hal_buffer_t *transient = NULL, *small = cts_buffer(device, WG * 4);
  hali_hal_fence_t *made = NULL, *freed = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&made));
  HALI_CK_OK(hali_hal_fence_create_pending(&freed));
  HALI_CK_OK(hali_hal_device_queue_alloca(device, NULL, made,
                                          hali_test_host_params(), N * 4,
                                          &transient));
  HALI_CK_OK(hali_hal_fence_await(made, HALI_INFINITE));
  hali_hal_command_buffer_t *cb = NULL;
  HALI_CK_OK(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE, HALI_HAL_COMMAND_CATEGORY_ANY,
      &cb));
  uint32_t constants[2] = {1, 2};
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 0, constants, 2));
  hali_hal_buffer_binding_t bindings[4] = {
      {0, small, 0, WG * 4},
      {1, transient, 0, N * 4},
      {2, small, 0, WG * 4},
      {3, small, 0, WG * 4},
  };
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(cb, bindings, 4));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 0, 1, 1, 1));
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  for (int k = 0; k < 2; ++k) {
    if (k == 1) {
      HALI_CK_OK(hali_hal_device_queue_dealloca(device, NULL, freed,
                                                transient));
      HALI_CK_OK(hali_hal_fence_await(freed, HALI_INFINITE));
    }
    hali_hal_fence_t *signal = NULL;
    HALI_CK_OK(hali_hal_fence_create_pending(&signal));
    HALI_CK_OK(hali_hal_device_queue_execute(device, NULL, signal, &cb, 1));
    hali_status_t s = hali_hal_fence_await(signal, HALI_INFINITE);
    hali_hal_fence_release(signal);
    if (k == 0) HALI_CK_OK(s);
    else
      HALI_CK_STATUS(s, HALI_STATUS_FAILED_PRECONDITION, "not committed",
                     "binding 1", "executable 'cts_kernels' export 0 'scale'",
                     "executing command 2 of 3");
  }
  hali_hal_command_buffer_release(cb);
  hali_hal_fence_release(made);
  hali_hal_fence_release(freed);
  hali_hal_buffer_release(transient);
  hali_hal_buffer_release(small);
  hali_hal_buffer_release(in);
  hali_hal_executable_release(exe);
  hali_hal_device_release(device);
}
END_TEST

/* The op loop of a reusable command buffer (hal/command_exec.c): one-
 * workgroup C kernels called directly with the states built at finalize,
 * the binding pointers resolved once per replay.  Each dispatch sees the
 * constants and bindings pushed before it, and the scratch its export
 * declares (the scale kernel fails without 256 aligned bytes); fills,
 * barriers and empty grids between them keep their places; every replay
 * gives the plain formula's results. */
START_TEST(test_reusable_op_loop) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_executable_t *exe = cts_executable();
  hali_hal_buffer_t *in = cts_buffer(device, 16);
  hali_hal_buffer_t *out = cts_buffer(device, 16);
  hali_hal_buffer_t *out2 = cts_buffer(device, 64);
  hali_hal_buffer_t *visits = cts_buffer(device, 4);
  hali_hal_buffer_t *workers = cts_buffer(device, 4);
  const uint32_t data[4] = {7, 11, 13, 17};
  HALI_CK_OK(hali_hal_buffer_write(in, 0, data, sizeof(data)));
  hali_hal_command_buffer_t *cb = NULL;
  HALI_CK_OK(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE, HALI_HAL_COMMAND_CATEGORY_ANY,
      &cb));
  uint32_t constants[2] = {5, 1000};
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 0, constants, 2));
  hali_hal_buffer_binding_t bindings[4] = {
      {0, in, 0, 16}, {1, out, 0, 16}, {2, visits, 0, 4}, {3, workers, 0, 4}};
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(cb, bindings, 4));
  enum { K = 50 };
  for (int k = 0; k < K; ++k)
    HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 0, 1, 1, 1));
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, out2, 0, 64, 0xAB, 1));
  HALI_CK_OK(hali_hal_command_buffer_execution_barrier(cb));
  uint32_t c1 = 2000;
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 1, &c1, 1));
  hali_hal_buffer_binding_t second = {1, out2, 16, 16};
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(cb, &second, 1));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 0, 0, 1, 1));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 0, 1, 1, 1));
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  ck_assert(hali_hal_command_buffer_has_op_loop(cb));
  const uint32_t runs = 3;
  for (uint32_t r = 0; r < runs; ++r) {
    hali_hal_fence_t *signal = NULL;
    HALI_CK_OK(hali_hal_fence_create_pending(&signal));
    HALI_CK_OK(hali_hal_device_queue_execute(device, NULL, signal, &cb, 1));
    HALI_CK_OK(hali_hal_fence_await(signal, HALI_INFINITE));
    hali_hal_fence_release(signal);
  }
  uint32_t got[4], got2[16], v = 0, worker = 0;
  HALI_CK_OK(hali_hal_buffer_read(out, 0, got, sizeof(got)));
  HALI_CK_OK(hali_hal_buffer_read(out2, 0, got2, sizeof(got2)));
  HALI_CK_OK(hali_hal_buffer_read(visits, 0, &v, 4));
  HALI_CK_OK(hali_hal_buffer_read(workers, 0, &worker, 4));
  ck_assert_uint_eq(v, runs * (K + 1));
  ck_assert_uint_lt(worker, hali_hal_device_worker_count(device));
  for (int i = 0; i < 4; ++i) {
    ck_assert_uint_eq(got[i], data[i] * 5 + 1000);
    ck_assert_uint_eq(got2[i], 0xABABABABu);
    ck_assert_uint_eq(got2[4 + i], data[i] * 5 + 2000);
  }
  for (int i = 8; i < 16; ++i) ck_assert_uint_eq(got2[i], 0xABABABABu);
  hali_hal_command_buffer_release(cb);
  hali_hal_buffer_release(in);
  hali_hal_buffer_release(out);
  hali_hal_buffer_release(out2);
  hali_hal_buffer_release(visits);
  hali_hal_buffer_release(workers);
  hali_hal_executable_release(exe);
  hali_hal_device_release(device);
}
END_TEST

/* A kernel failing in the op loop fails the replay with the walk's
 * message (a one-shot recording of the same commands walks the list),
 * and a stop requested by the fourth of nine one-workgroup dispatches
 * abandons the replay before the next dispatch: exactly four ran. */
static hali_hal_command_buffer_t *cts_fail_recording(
    hali_hal_executable_t *exe, hali_hal_buffer_t *counter,
    hali_hal_command_buffer_mode_bits_t mode) {
  hali_hal_command_buffer_t *cb = NULL;
  HALI_CK_OK(hali_hal_command_buffer_create(mode, HALI_HAL_COMMAND_CATEGORY_ANY,
                                            &cb));
  uint32_t one = 1, zero = 0;
  hali_hal_buffer_binding_t binding = {0, counter, 0, 4};
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(cb, &binding, 1));
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 0, &one, 1));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 3, 1, 1, 1));
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 0, &zero, 1));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 1, 1, 1, 1));
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 0, &one, 1));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 3, 1, 1, 1));
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  return cb;
}

static char *cts_replay_failure(hali_hal_device_t *device,
                                hali_hal_command_buffer_t *cb) {
  hali_hal_fence_t *signal = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&signal));
  HALI_CK_OK(hali_hal_device_queue_execute(device, NULL, signal, &cb, 1));
  hali_status_t s = hali_hal_fence_await(signal, HALI_INFINITE);
  hali_hal_fence_release(signal);
  ck_assert_msg(s != NULL, "the replay succeeded");
  ck_assert_int_eq(hali_status_code(s), HALI_STATUS_INTERNAL);
  char *text = hali_status_to_string(s);
  hali_status_free(s);
  /* Up to the queue's own lines (the submission's number differs). */
  char *queue = strstr(text, "\n  queue submission");
  ck_assert_ptr_nonnull(queue);
  *queue = 0;
  return text;
}

START_TEST(test_reusable_op_loop_failure_and_stop) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_executable_t *exe = cts_executable();
  hali_hal_buffer_t *counter = cts_buffer(device, 4);
  hali_hal_command_buffer_t *reusable = cts_fail_recording(
      exe, counter, HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE);
  hali_hal_command_buffer_t *one_shot = cts_fail_recording(
      exe, counter, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT);
  ck_assert(hali_hal_command_buffer_has_op_loop(reusable));
  ck_assert(!hali_hal_command_buffer_has_op_loop(one_shot));
  char *a = cts_replay_failure(device, reusable);
  char *b = cts_replay_failure(device, one_shot);
  ck_assert_str_eq(a, b);
  ck_assert_msg(strstr(a, "kernel returned error code 42") &&
                    strstr(a, "export 1 'fail_at' at workgroup (0,0,0) of "
                              "(1,1,1)") &&
                    strstr(a, "executing command 4 of 7"),
                "%s", a);
  free(a);
  free(b);
  /* The dispatch before the failing one ran, the one after did not. */
  uint32_t count = 0;
  HALI_CK_OK(hali_hal_buffer_read(counter, 0, &count, 4));
  ck_assert_uint_eq(count, 2);
  hali_hal_command_buffer_release(reusable);
  hali_hal_command_buffer_release(one_shot);

  hali_hal_command_buffer_t *cb = NULL;
  HALI_CK_OK(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE, HALI_HAL_COMMAND_CATEGORY_ANY,
      &cb));
  uint32_t never = UINT32_MAX, now = 0;
  for (int k = 0; k < 9; ++k) {
    HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 0,
                                                      k == 3 ? &now : &never,
                                                      1));
    HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 2, 1, 1, 1));
  }
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  ck_assert(hali_hal_command_buffer_has_op_loop(cb));
  HALI_CK_OK(hali_hal_stop_create(INT64_MAX, &cts_stop));
  atomic_store(&cts_stop_ran, 0);
  hali_hal_fence_t *signal = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&signal));
  HALI_CK_OK(hali_hal_device_queue_execute_stoppable(device, NULL, signal,
                                                     &cb, 1, cts_stop));
  HALI_CK_STATUS(hali_hal_fence_await(signal, HALI_INFINITE),
                 HALI_STATUS_CANCELLED,
                 "the invocation that submitted this work was cancelled",
                 "abandoned before command 9 of 18");
  ck_assert_int_eq(atomic_load(&cts_stop_ran), 4);
  hali_hal_fence_release(signal);
  hali_hal_stop_release(cts_stop);
  cts_stop = NULL;
  hali_hal_command_buffer_release(cb);
  hali_hal_buffer_release(counter);
  hali_hal_executable_release(exe);
  hali_hal_device_release(device);
}
END_TEST

/* One reusable command buffer replayed on several queues at once (no
 * fence between the submissions): one replay holds the op loop's binding
 * pointers, the others walk the steps; every dispatch of every replay
 * counts once. */
START_TEST(test_reusable_concurrent_replays) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_executable_t *exe = cts_executable();
  hali_hal_buffer_t *counter = cts_buffer(device, 4);
  hali_hal_command_buffer_t *cb = NULL;
  HALI_CK_OK(hali_hal_command_buffer_create(
      HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE, HALI_HAL_COMMAND_CATEGORY_ANY,
      &cb));
  uint32_t three = 3;
  hali_hal_buffer_binding_t binding = {0, counter, 0, 4};
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(cb, &binding, 1));
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 0, &three, 1));
  enum { D = 2000, REPLAYS = 8, ROUNDS = 5 };
  for (int k = 0; k < D; ++k)
    HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 3, 1, 1, 1));
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  for (int round = 0; round < ROUNDS; ++round) {
    hali_hal_fence_t *signals[REPLAYS];
    for (int r = 0; r < REPLAYS; ++r) {
      HALI_CK_OK(hali_hal_fence_create_pending(&signals[r]));
      HALI_CK_OK(
          hali_hal_device_queue_execute(device, NULL, signals[r], &cb, 1));
    }
    for (int r = 0; r < REPLAYS; ++r) {
      HALI_CK_OK(hali_hal_fence_await(signals[r], HALI_INFINITE));
      hali_hal_fence_release(signals[r]);
    }
  }
  uint32_t count = 0;
  HALI_CK_OK(hali_hal_buffer_read(counter, 0, &count, 4));
  ck_assert_uint_eq(count, 3u * D * REPLAYS * ROUNDS);
  hali_hal_command_buffer_release(cb);
  hali_hal_buffer_release(counter);
  hali_hal_executable_release(exe);
  hali_hal_device_release(device);
}
END_TEST

/* A tiny transfer-only submission whose wait fence is reached runs on
 * the submitting thread on local-task too (hal/device.c): its signal
 * fence is reached when queue_execute returns, with the results there,
 * and a failure reaches the fence the same way.  Dispatches still run on
 * a runner; a tiny submission whose wait fence is not reached waits for
 * it; one over the 64 KiB bound goes to a runner and lands all the same. */
static hali_hal_fence_t *cts_submit(hali_hal_device_t *device,
                                    hali_hal_fence_t *wait,
                                    hali_hal_command_buffer_t *cb) {
  hali_hal_fence_t *signal = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&signal));
  HALI_CK_OK(hali_hal_device_queue_execute(device, wait, signal, &cb, 1));
  hali_hal_command_buffer_release(cb);
  return signal;
}

static bool cts_fence_reached(hali_hal_fence_t *fence) {
  bool ready = false;
  hali_status_t s = hali_hal_fence_query(fence, &ready);
  if (s) {
    hali_status_free(s);
    return true; /* failed: complete too */
  }
  return ready;
}

START_TEST(test_tiny_submissions_inline) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_buffer_t *a = cts_buffer(device, 4096), *b = cts_buffer(device, 64);
  hali_hal_command_buffer_t *cb = cts_command_buffer();
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, a, 0, 4096, 0x5A, 1));
  HALI_CK_OK(hali_hal_command_buffer_copy(cb, a, 8, b, 0, 16));
  const uint8_t bytes[4] = {1, 2, 3, 4};
  HALI_CK_OK(hali_hal_command_buffer_update(cb, bytes, b, 16, 4));
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  hali_hal_fence_t *signal = cts_submit(device, NULL, cb);
  ck_assert(cts_fence_reached(signal)); /* (ran inside queue_execute) */
  HALI_CK_OK(hali_hal_fence_await(signal, HALI_INFINITE));
  hali_hal_fence_release(signal);
  cts_expect_fill(a, 0, 4096, 0x5A, "tiny fill");
  cts_expect_fill(b, 0, 16, 0x5A, "tiny copy");
  cts_expect_bytes(b, 16, 20, bytes, "tiny update");

  /* Not reached: it waits, then runs. */
  hali_hal_fence_t *gate = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&gate));
  cb = cts_command_buffer();
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, b, 0, 64, 0x33, 1));
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  signal = cts_submit(device, gate, cb);
  hali_test_sleep_ms(2);
  ck_assert(!cts_fence_reached(signal));
  cts_expect_fill(b, 0, 16, 0x5A, "before the gate");
  HALI_CK_OK(hali_hal_fence_signal(gate));
  HALI_CK_OK(hali_hal_fence_await(signal, HALI_INFINITE));
  cts_expect_fill(b, 0, 64, 0x33, "after the gate");
  hali_hal_fence_release(signal);
  hali_hal_fence_release(gate);

  /* Over the bound: a runner's, same result. */
  hali_hal_buffer_t *big = cts_buffer(device, 128 << 10);
  cb = cts_command_buffer();
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, big, 0, 128 << 10, 0x77, 1));
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  signal = cts_submit(device, NULL, cb);
  HALI_CK_OK(hali_hal_fence_await(signal, HALI_INFINITE));
  hali_hal_fence_release(signal);
  cts_expect_fill(big, 0, 128 << 10, 0x77, "large fill");
  hali_hal_buffer_release(big);

  /* A dispatch: on a runner on local-task, here on local-sync. */
  hali_hal_executable_t *exe = cts_executable();
  cb = cts_command_buffer();
  hali_hal_buffer_binding_t binding = {0, b, 0, 4};
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(cb, &binding, 1));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 4, 1, 1, 1));
  cts_submitter = pthread_self();
  HALI_CK_OK(cts_run(device, cb));
  uint32_t where = 0;
  HALI_CK_OK(hali_hal_buffer_read(b, 0, &where, 4));
  ck_assert_uint_eq(where, cts_configs[_i].kind == HALI_HAL_DEVICE_LOCAL_TASK
                               ? 2
                               : 1);
  hali_hal_executable_release(exe);

  /* A failing tiny submission fails its fence, inline as on a runner. */
  hali_hal_buffer_t *transient = NULL;
  hali_hal_fence_t *made = NULL, *freed = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&made));
  HALI_CK_OK(hali_hal_fence_create_pending(&freed));
  HALI_CK_OK(hali_hal_device_queue_alloca(device, NULL, made,
                                          hali_test_host_params(), 64,
                                          &transient));
  HALI_CK_OK(hali_hal_device_queue_dealloca(device, made, freed, transient));
  HALI_CK_OK(hali_hal_fence_await(freed, HALI_INFINITE));
  cb = cts_command_buffer();
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, transient, 0, 64, 0x11, 1));
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  signal = cts_submit(device, NULL, cb);
  ck_assert(cts_fence_reached(signal));
  HALI_CK_STATUS(hali_hal_fence_await(signal, HALI_INFINITE),
                 HALI_STATUS_FAILED_PRECONDITION, "not committed",
                 "executing command 0 of 1");
  hali_hal_fence_release(signal);
  hali_hal_fence_release(made);
  hali_hal_fence_release(freed);
  hali_hal_buffer_release(transient);
  hali_hal_buffer_release(a);
  hali_hal_buffer_release(b);
  hali_hal_device_release(device);
}
END_TEST

/* local-task: runner 0's spin for new work adapts.  Submissions 3 ms
 * apart find it asleep; each spin that found nothing halved the next,
 * so after a few it does not spin at all (an idle host costs the runner
 * nothing).  Work submitted right after the previous completed turns the
 * spin back on (retried: on a busy machine the host may lose its core
 * between the two). */
static void cts_dispatch_once(hali_hal_device_t *device,
                              hali_hal_executable_t *exe,
                              hali_hal_buffer_t *counter, bool poll) {
  hali_hal_command_buffer_t *cb = cts_command_buffer();
  uint32_t one = 1;
  hali_hal_buffer_binding_t binding = {0, counter, 0, 4};
  HALI_CK_OK(hali_hal_command_buffer_push_descriptor_set(cb, &binding, 1));
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 0, &one, 1));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 3, 1, 1, 1));
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  hali_hal_fence_t *signal = cts_submit(device, NULL, cb);
  while (poll && !cts_fence_reached(signal)) {
  }
  HALI_CK_OK(hali_hal_fence_await(signal, HALI_INFINITE));
  hali_hal_fence_release(signal);
}

START_TEST(test_runner_spin_adapts) {
  hali_hal_device_params_t params;
  hali_hal_device_params_initialize(&params);
  params.kind = HALI_HAL_DEVICE_LOCAL_TASK;
  params.worker_count = 1;
  hali_hal_device_t *device = NULL;
  HALI_CK_OK(hali_hal_device_create(&params, &device));
  if (hali_hal_device_runner_spin_ns(device) == 0) { /* one core: no spin */
    hali_hal_device_release(device);
    return;
  }
  /* Full at creation; the runner may already have spun once on its empty
   * queue and halved it (it did under load). */
  const int64_t first = hali_hal_device_runner_spin_ns(device);
  ck_assert_msg(first == 20000 || first == 10000, "spin at creation %lld ns",
                (long long)first);
  hali_hal_executable_t *exe = cts_executable();
  hali_hal_buffer_t *counter = cts_buffer(device, 4);
  for (int k = 0; k < 8; ++k) {
    cts_dispatch_once(device, exe, counter, false);
    hali_test_sleep_ms(3);
  }
  ck_assert_int_eq(hali_hal_device_runner_spin_ns(device), 0);
  int rounds = 0;
  int64_t back = 0;
  while ((back = hali_hal_device_runner_spin_ns(device)) == 0 &&
         rounds < 2000) {
    cts_dispatch_once(device, exe, counter, true);
    ++rounds;
  }
  /* Back on at the full 20 us (read at once it may already be halved by
   * one empty spin since: 10 us). */
  ck_assert_msg(back == 20000 || back == 10000,
                "the spin stayed off over %d back-to-back submissions "
                "(%lld ns)",
                rounds, (long long)back);
  uint32_t count = 0;
  HALI_CK_OK(hali_hal_buffer_read(counter, 0, &count, 4));
  ck_assert_uint_eq(count, 8u + (uint32_t)rounds);
  hali_hal_buffer_release(counter);
  hali_hal_executable_release(exe);
  hali_hal_device_release(device);
}
END_TEST

/* ---- Stream-ordered allocation. ---- */

START_TEST(test_alloca_dealloca_order) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_allocator_t *allocator = hali_hal_device_allocator(device);
  hali_hal_fence_t *gate = NULL, *allocated = NULL, *filled = NULL,
                   *freed = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&gate));
  HALI_CK_OK(hali_hal_fence_create_pending(&allocated));
  HALI_CK_OK(hali_hal_fence_create_pending(&filled));
  HALI_CK_OK(hali_hal_fence_create_pending(&freed));
  hali_hal_buffer_t *buffer = NULL;
  HALI_CK_OK(hali_hal_device_queue_alloca(device, gate, allocated,
                                          hali_test_host_params(), 256,
                                          &buffer));
  cts_submit_fill(device, allocated, filled, buffer, 0x5A);
  HALI_CK_OK(hali_hal_device_queue_dealloca(device, filled, freed, buffer));
  /* Nothing is committed while the gate is closed. */
  hali_test_sleep_ms(5);
  ck_assert(!hali_hal_buffer_is_committed(buffer));
  hali_hal_allocator_statistics_t st;
  hali_hal_allocator_query_statistics(allocator, &st);
  ck_assert_uint_eq(st.bytes_live, 0);
  uint8_t byte = 0;
  HALI_CK_STATUS(hali_hal_buffer_read(buffer, 0, &byte, 1),
                 HALI_STATUS_FAILED_PRECONDITION, "not committed");
  HALI_CK_OK(hali_hal_fence_signal(gate));
  HALI_CK_OK(hali_hal_fence_await(freed, HALI_INFINITE));
  ck_assert(!hali_hal_buffer_is_committed(buffer));
  hali_hal_allocator_query_statistics(allocator, &st);
  ck_assert_uint_eq(st.bytes_live, 0);
  ck_assert_uint_eq(st.bytes_peak, 256);
  ck_assert_uint_eq(st.allocation_count, 1);
  /* Allocate again, observe the storage between alloca and dealloca. */
  hali_hal_buffer_release(buffer);
  HALI_CK_OK(hali_hal_device_queue_alloca(device, NULL, NULL,
                                          hali_test_host_params(), 100,
                                          &buffer));
  HALI_CK_OK(hali_hal_device_wait_idle(device, HALI_INFINITE));
  ck_assert(hali_hal_buffer_is_committed(buffer));
  hali_hal_allocator_query_statistics(allocator, &st);
  ck_assert_uint_eq(st.bytes_live, 100);
  /* Deallocating twice fails the second signal fence (the second waits
   * for the first: local-task orders submissions only by fences). */
  hali_hal_fence_t *again = NULL, *once = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&again));
  HALI_CK_OK(hali_hal_fence_create_pending(&once));
  HALI_CK_OK(hali_hal_device_queue_dealloca(device, NULL, once, buffer));
  HALI_CK_OK(hali_hal_device_queue_dealloca(device, once, again, buffer));
  hali_hal_fence_release(once);
  HALI_CK_STATUS(hali_hal_fence_await(again, HALI_INFINITE),
                 HALI_STATUS_FAILED_PRECONDITION, "not committed",
                 "queue_dealloca of 100 bytes");
  hali_hal_buffer_t *span = NULL;
  HALI_CK_OK(hali_hal_buffer_subspan(buffer, 0, 10, &span));
  HALI_CK_STATUS(hali_hal_device_queue_dealloca(device, NULL, NULL, span),
                 HALI_STATUS_INVALID_ARGUMENT, "subspan");
  hali_hal_buffer_release(span);
  hali_hal_buffer_release(buffer);
  hali_hal_fence_release(again);
  hali_hal_fence_release(gate);
  hali_hal_fence_release(allocated);
  hali_hal_fence_release(filled);
  hali_hal_fence_release(freed);
  hali_hal_device_release(device);
}
END_TEST

START_TEST(test_alloca_limit) {
  hali_hal_device_t *device = cts_device_with_limit(_i, 1000);
  hali_hal_buffer_t *a = NULL, *b = NULL;
  hali_hal_fence_t *fa = NULL, *fb = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&fa));
  HALI_CK_OK(hali_hal_fence_create_pending(&fb));
  HALI_CK_OK(hali_hal_device_queue_alloca(device, NULL, fa,
                                          hali_test_host_params(), 800, &a));
  HALI_CK_OK(hali_hal_device_queue_alloca(device, fa, fb,
                                          hali_test_host_params(), 400, &b));
  HALI_CK_OK(hali_hal_fence_await(fa, HALI_INFINITE));
  HALI_CK_STATUS(hali_hal_fence_await(fb, HALI_INFINITE),
                 HALI_STATUS_RESOURCE_EXHAUSTED, "allocating 400 bytes",
                 "limit of 1000 bytes", "800 bytes live",
                 "queue_alloca of 400 bytes");
  ck_assert(!hali_hal_buffer_is_committed(b));
  hali_hal_buffer_release(a);
  hali_hal_buffer_release(b);
  hali_hal_fence_release(fa);
  hali_hal_fence_release(fb);
  hali_hal_device_release(device);
}
END_TEST

/* ---- Lifetime. ---- */

START_TEST(test_device_release_drains) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_buffer_t *buffer = cts_buffer(device, 32);
  hali_hal_fence_t *gate = NULL, *done = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&gate));
  HALI_CK_OK(hali_hal_fence_create_pending(&done));
  cts_submit_fill(device, gate, done, buffer, 0x77);
  HALI_CK_STATUS(hali_hal_device_wait_idle(device, 0),
                 HALI_STATUS_DEADLINE_EXCEEDED, "1 queue submissions");
  signal_thread_t job = {gate, 10};
  pthread_t thread;
  ck_assert_int_eq(pthread_create(&thread, NULL, signal_thread_main, &job), 0);
  hali_hal_device_release(device); /* blocks until the fill ran */
  bool ready = false;
  HALI_CK_OK(hali_hal_fence_query(done, &ready));
  ck_assert(ready);
  pthread_join(thread, NULL);
  ck_assert_uint_eq(hali_test_byte(buffer, 31), 0x77);
  hali_hal_fence_release(gate);
  hali_hal_fence_release(done);
  hali_hal_buffer_release(buffer); /* outlives its device */
}
END_TEST

/* ---- Stop requests (hal/stop.h): the submitter gives up. ---- */

/* Submits a 1000-workgroup dispatch of stop_at(|at|) on behalf of |stop|
 * and returns the status its signal fence ends with. */
static hali_status_t cts_run_stoppable(hali_hal_device_t *device,
                                       hali_hal_stop_t *stop, uint32_t at) {
  hali_hal_executable_t *exe = cts_executable();
  hali_hal_command_buffer_t *cb = cts_command_buffer();
  HALI_CK_OK(hali_hal_command_buffer_push_constants(cb, 0, &at, 1));
  HALI_CK_OK(hali_hal_command_buffer_dispatch(cb, exe, 2, 1000, 1, 1));
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  hali_hal_fence_t *signal = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&signal));
  HALI_CK_OK(hali_hal_device_queue_execute_stoppable(device, NULL, signal,
                                                     &cb, 1, stop));
  hali_hal_command_buffer_release(cb);
  hali_hal_executable_release(exe);
  hali_status_t status = hali_hal_fence_await(signal, HALI_INFINITE);
  hali_hal_fence_release(signal);
  return status;
}

/* A stop requested during a dispatch abandons it before the next
 * workgroup: on one worker exactly the workgroups up to the one that
 * requested it ran; with more, each worker finishes at most the one it
 * was running.  Without a request the same dispatch runs whole. */
START_TEST(test_stop_abandons_dispatch) {
  hali_hal_device_t *device = cts_device(_i);
  HALI_CK_OK(hali_hal_stop_create(INT64_MAX, &cts_stop));
  atomic_store(&cts_stop_ran, 0);
  HALI_CK_OK(cts_run_stoppable(device, cts_stop, UINT32_MAX));
  ck_assert_int_eq(atomic_load(&cts_stop_ran), 1000);
  atomic_store(&cts_stop_ran, 0);
  HALI_CK_STATUS(cts_run_stoppable(device, cts_stop, 5),
                 HALI_STATUS_CANCELLED,
                 "the invocation that submitted this work was cancelled",
                 "abandoned before its next workgroup",
                 "export 2 'stop_at'");
  int ran = atomic_load(&cts_stop_ran);
  uint32_t workers = hali_hal_device_worker_count(device);
  if (workers == 1 && cts_configs[_i].kind == HALI_HAL_DEVICE_LOCAL_SYNC)
    ck_assert_int_eq(ran, 6);
  else
    ck_assert_msg(ran >= 1 && ran < 1000, "%s: %d of 1000 workgroups ran",
                  cts_configs[_i].label, ran);
  /* Requested: later work of the same submitter does not start. */
  atomic_store(&cts_stop_ran, 0);
  HALI_CK_STATUS(cts_run_stoppable(device, cts_stop, UINT32_MAX),
                 HALI_STATUS_CANCELLED, "abandoned before it started");
  ck_assert_int_eq(atomic_load(&cts_stop_ran), 0);
  hali_hal_stop_release(cts_stop);
  cts_stop = NULL;
  /* A passed deadline is a stop too, with its own code. */
  hali_hal_stop_t *late = NULL;
  HALI_CK_OK(hali_hal_stop_create(hali_test_now_ns() - 1, &late));
  HALI_CK_STATUS(cts_run_stoppable(device, late, UINT32_MAX),
                 HALI_STATUS_DEADLINE_EXCEEDED, "exceeded its deadline");
  ck_assert_int_eq(atomic_load(&cts_stop_ran), 0);
  ck_assert_int_eq(hali_hal_stop_check(late), HALI_STATUS_DEADLINE_EXCEEDED);
  hali_hal_stop_release(late);
  hali_hal_device_release(device);
}
END_TEST

/* Work parked behind a wait fence is given up once its submitter stops:
 * on local-task within the queue thread's 20 ms wait slices, on local-sync
 * when the queue is pumped next (here: the gate opening).  The fill never
 * runs; its fence fails with the stop's status. */
START_TEST(test_stop_abandons_parked_work) {
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_buffer_t *buffer = cts_buffer(device, 16);
  cts_set_bytes(buffer, 0);
  hali_hal_stop_t *stop = NULL;
  HALI_CK_OK(hali_hal_stop_create(INT64_MAX, &stop));
  hali_hal_fence_t *gate = NULL, *done = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&gate));
  HALI_CK_OK(hali_hal_fence_create_pending(&done));
  hali_hal_command_buffer_t *cb = cts_command_buffer();
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, buffer, 0, 16, 0x5A, 1));
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  HALI_CK_OK(hali_hal_device_queue_execute_stoppable(device, gate, done, &cb,
                                                     1, stop));
  hali_hal_command_buffer_release(cb);
  hali_hal_stop_request(stop, HALI_STATUS_CANCELLED);
  if (cts_configs[_i].kind == HALI_HAL_DEVICE_LOCAL_TASK) {
    /* Nobody opens the gate: the queue thread gives up by itself. */
    HALI_CK_STATUS(hali_hal_fence_await(done, HALI_INFINITE),
                   HALI_STATUS_CANCELLED, "abandoned before it started");
  }
  HALI_CK_OK(hali_hal_fence_signal(gate));
  HALI_CK_STATUS(hali_hal_fence_await(done, HALI_INFINITE),
                 HALI_STATUS_CANCELLED, "abandoned before it started");
  ck_assert_uint_eq(hali_test_byte(buffer, 0), 0);
  HALI_CK_OK(hali_hal_device_wait_idle(device, HALI_INFINITE));
  hali_hal_fence_release(gate);
  hali_hal_fence_release(done);
  hali_hal_buffer_release(buffer);
  hali_hal_stop_release(stop);
  hali_hal_device_release(device);
}
END_TEST

/* local-task orders submissions only by their fences (doc/hal.md, "Queue
 * order"): behind a blocked oldest submission, a later one runs as soon
 * as its own wait fence is signalled; the deadlock probes report the queue
 * blocked, on the oldest waiting fence, only while nothing can start; a
 * stopped submission behind blocked ones is given up without anyone
 * signalling; a failed wait fails only its own submission, with the
 * reason.  (local-sync keeps submission order: test_queue_order_and_parking.) */
START_TEST(test_queue_fences_are_the_order) {
  if (cts_configs[_i].kind != HALI_HAL_DEVICE_LOCAL_TASK) return;
  hali_hal_device_t *device = cts_device(_i);
  hali_hal_buffer_t *a = cts_buffer(device, 8), *b = cts_buffer(device, 8),
                    *c = cts_buffer(device, 8);
  cts_set_bytes(a, 0);
  cts_set_bytes(b, 0);
  cts_set_bytes(c, 0);
  hali_hal_fence_t *gate_a = NULL, *gate_b = NULL, *gate_c = NULL,
                   *done_a = NULL, *done_b = NULL, *done_c = NULL;
  HALI_CK_OK(hali_hal_fence_create_pending(&gate_a));
  HALI_CK_OK(hali_hal_fence_create_pending(&gate_b));
  HALI_CK_OK(hali_hal_fence_create_pending(&gate_c));
  HALI_CK_OK(hali_hal_fence_create_pending(&done_a));
  HALI_CK_OK(hali_hal_fence_create_pending(&done_b));
  HALI_CK_OK(hali_hal_fence_create_pending(&done_c));
  cts_submit_fill(device, gate_a, done_a, a, 1);
  cts_submit_fill(device, gate_b, done_b, b, 2);
  /* Nothing can start: blocked, on the oldest submission's wait fence. */
  ck_assert(!hali_hal_device_queue_can_progress(device));
  bool pending = false;
  hali_hal_fence_t *blocked = NULL;
  hali_hal_device_queue_state(device, &pending, &blocked);
  ck_assert(pending);
  ck_assert_ptr_eq(blocked, gate_a);
  hali_hal_fence_release(blocked);
  /* The later one runs first, the older one still waits. */
  HALI_CK_OK(hali_hal_fence_signal(gate_b));
  HALI_CK_OK(hali_hal_fence_await(done_b, HALI_INFINITE));
  ck_assert_uint_eq(hali_test_byte(b, 7), 2);
  ck_assert_uint_eq(hali_test_byte(a, 0), 0);
  bool ready = true;
  HALI_CK_OK(hali_hal_fence_query(done_a, &ready));
  ck_assert(!ready);
  /* Blocked again once the runner has finished with it. */
  blocked = NULL;
  for (int i = 0; i < 5000 && !blocked; ++i) {
    hali_hal_device_queue_state(device, &pending, &blocked);
    if (!blocked) hali_test_sleep_ms(1);
  }
  ck_assert_ptr_eq(blocked, gate_a);
  hali_hal_fence_release(blocked);
  ck_assert(!hali_hal_device_queue_can_progress(device));
  /* Stopped behind the blocked one: given up by the runners alone. */
  hali_hal_stop_t *stop = NULL;
  HALI_CK_OK(hali_hal_stop_create(INT64_MAX, &stop));
  hali_hal_command_buffer_t *cb = cts_command_buffer();
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, c, 0, 8, 7, 1));
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  HALI_CK_OK(hali_hal_device_queue_execute_stoppable(device, gate_c, done_c,
                                                     &cb, 1, stop));
  hali_hal_command_buffer_release(cb);
  hali_hal_stop_request(stop, HALI_STATUS_CANCELLED);
  HALI_CK_STATUS(hali_hal_fence_await(done_c, HALI_INFINITE),
                 HALI_STATUS_CANCELLED, "abandoned before it started");
  ck_assert_uint_eq(hali_test_byte(c, 0), 0);
  /* A failed wait fails its own submission only, with the reason. */
  hali_hal_fence_fail(gate_a, hali_status_make(HALI_STATUS_DATA_LOSS,
                                               "upstream broke"));
  HALI_CK_STATUS(hali_hal_fence_await(done_a, HALI_INFINITE),
                 HALI_STATUS_DATA_LOSS, "upstream broke",
                 "the wait fence of queue submission 1 failed",
                 "queue submission 1 on local-task");
  ck_assert_uint_eq(hali_test_byte(a, 0), 0);
  HALI_CK_OK(hali_hal_device_wait_idle(device, HALI_INFINITE));
  hali_hal_stop_release(stop);
  hali_hal_fence_release(gate_a);
  hali_hal_fence_release(gate_b);
  hali_hal_fence_release(gate_c);
  hali_hal_fence_release(done_a);
  hali_hal_fence_release(done_b);
  hali_hal_fence_release(done_c);
  hali_hal_buffer_release(a);
  hali_hal_buffer_release(b);
  hali_hal_buffer_release(c);
  hali_hal_device_release(device);
}
END_TEST

/* Not parametrised: the same dispatch on every configuration gives the
 * same bytes. */
START_TEST(test_dispatch_identical_across_devices) {
  uint32_t reference[N];
  for (int i = 0; i < CTS_CONFIG_COUNT; ++i) {
    hali_hal_device_t *device = cts_device(i);
    dispatch_buffers_t b;
    cts_run_scale(device, &b);
    uint32_t out[N];
    HALI_CK_OK(hali_hal_buffer_read(b.out, 0, out, sizeof(out)));
    if (i == 0)
      memcpy(reference, out, sizeof(out));
    else
      ck_assert_msg(memcmp(reference, out, sizeof(out)) == 0,
                    "%s differs from %s", cts_configs[i].label,
                    cts_configs[0].label);
    cts_release_dispatch(&b);
    hali_hal_device_release(device);
  }
}
END_TEST

static void add_device_tests(TCase *tc, const TTest *test) {
  tcase_add_loop_test(tc, test, 0, CTS_CONFIG_COUNT);
}

/* ---- Tracing: a C user of the HAL with a tracer sees the [hal] lines
 * hali's --trace=hal prints for allocation and queue operations. ---- */

typedef struct trace_sink_t {
  pthread_mutex_t mutex;
  char text[4096];
  size_t len;
} trace_sink_t;

static void sink_line(void *user, const char *line) {
  trace_sink_t *sink = user;
  pthread_mutex_lock(&sink->mutex);
  int n = snprintf(sink->text + sink->len, sizeof(sink->text) - sink->len,
                   "%s\n", line);
  if (n > 0) sink->len += (size_t)n;
  pthread_mutex_unlock(&sink->mutex);
}

#define ID(object) ((const hali_ref_t *)(const void *)(object))->id

START_TEST(test_tracer_lines) {
  hali_hal_device_t *device = cts_device(_i);
  trace_sink_t sink = {.mutex = PTHREAD_MUTEX_INITIALIZER};
  /* Lines only (no clock): the device's spans stay off, so every line
   * comes from this thread, in call order, on every device. */
  hali_hal_tracer_t tracer = {.user = &sink, .line = sink_line};
  hali_hal_device_set_tracer(device, &tracer);
  hali_hal_buffer_params_t params = {
      HALI_HAL_MEMORY_TYPE_HOST_VISIBLE | HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE,
      HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_MAPPING};
  hali_hal_buffer_t *buffer = NULL;
  HALI_CK_OK(hali_hal_allocator_allocate_buffer(
      hali_hal_device_allocator(device), params, 64, &buffer));
  hali_hal_command_buffer_t *cb = NULL;
  HALI_CK_OK(hali_hal_device_create_command_buffer(
      device, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT,
      HALI_HAL_COMMAND_CATEGORY_TRANSFER, &cb));
  HALI_CK_OK(hali_hal_command_buffer_fill(cb, buffer, 0, 32, 0x5a, 1));
  HALI_CK_OK(hali_hal_command_buffer_execution_barrier(cb));
  HALI_CK_OK(hali_hal_command_buffer_copy(cb, buffer, 0, buffer, 32, 32));
  /* Refused records print nothing. */
  HALI_CK_STATUS(hali_hal_command_buffer_fill(cb, buffer, 0, 3, 0, 2),
                 HALI_STATUS_INVALID_ARGUMENT, "multiples");
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  hali_hal_fence_t *wait = NULL, *done = NULL, *allocated = NULL,
                   *freed = NULL;
  HALI_CK_OK(hali_hal_fence_create(&wait));
  HALI_CK_OK(hali_hal_fence_create_pending(&done));
  HALI_CK_OK(hali_hal_fence_create_pending(&allocated));
  HALI_CK_OK(hali_hal_fence_create_pending(&freed));
  HALI_CK_OK(hali_hal_device_queue_execute(device, wait, done, &cb, 1));
  hali_hal_buffer_t *staged = NULL;
  HALI_CK_OK(hali_hal_device_queue_alloca(device, done, allocated, params, 32,
                                          &staged));
  HALI_CK_OK(hali_hal_device_queue_dealloca(device, allocated, freed, staged));
  HALI_CK_OK(hali_hal_fence_await(freed, HALI_INFINITE));
  ck_assert_uint_eq(hali_test_byte(buffer, 63), 0x5a);
  /* A failing operation prints nothing (the error tells). */
  hali_hal_buffer_t *span = NULL;
  HALI_CK_OK(hali_hal_buffer_subspan(staged, 0, 8, &span));
  HALI_CK_STATUS(hali_hal_device_queue_dealloca(device, NULL, NULL, span),
                 HALI_STATUS_INVALID_ARGUMENT, "subspan");
  char want[2048];
  snprintf(want, sizeof(want),
           "[hal] allocate 64 bytes memory=HOST_VISIBLE|DEVICE_VISIBLE "
           "usage=TRANSFER|MAPPING -> !hal.buffer#%u\n"
           "[hal] command_buffer.create mode=1 categories=1 -> "
           "!hal.command_buffer#%u\n"
           "[hal] command_buffer#%u fill !hal.buffer#%u [0, +32) "
           "pattern=0x5a/1\n"
           "[hal] command_buffer#%u execution_barrier\n"
           "[hal] command_buffer#%u copy !hal.buffer#%u+0 -> !hal.buffer#%u+32 "
           "32 bytes\n"
           "[hal] command_buffer#%u finalize\n"
           "[hal] queue.execute wait=!hal.fence#%u signal=!hal.fence#%u "
           "command_buffers=[#%u]\n"
           "[hal] queue.alloca 32 bytes wait=!hal.fence#%u "
           "signal=!hal.fence#%u -> !hal.buffer#%u\n"
           "[hal] queue.dealloca !hal.buffer#%u wait=!hal.fence#%u "
           "signal=!hal.fence#%u\n"
           "[hal] subspan !hal.buffer#%u [0, +8) -> !hal.buffer#%u\n",
           ID(buffer), ID(cb), ID(cb), ID(buffer), ID(cb), ID(cb), ID(buffer),
           ID(buffer), ID(cb), ID(wait), ID(done), ID(cb), ID(done),
           ID(allocated), ID(staged), ID(staged), ID(allocated), ID(freed),
           ID(staged), ID(span));
  pthread_mutex_lock(&sink.mutex);
  ck_assert_str_eq(sink.text, want);
  pthread_mutex_unlock(&sink.mutex);
  /* Off again: the allocator is silent too, and so is a command buffer
   * created on the device now, or without a device. */
  hali_hal_device_set_tracer(device, NULL);
  hali_hal_buffer_t *quiet = cts_buffer(device, 16);
  hali_hal_command_buffer_t *silent = NULL;
  HALI_CK_OK(hali_hal_device_create_command_buffer(
      device, 0, HALI_HAL_COMMAND_CATEGORY_TRANSFER, &silent));
  HALI_CK_OK(hali_hal_command_buffer_finalize(silent));
  hali_hal_command_buffer_release(silent);
  pthread_mutex_lock(&sink.mutex);
  ck_assert_str_eq(sink.text, want);
  pthread_mutex_unlock(&sink.mutex);
  hali_hal_buffer_release(quiet);
  hali_hal_buffer_release(span);
  hali_hal_buffer_release(staged);
  hali_hal_buffer_release(buffer);
  hali_hal_command_buffer_release(cb);
  hali_hal_fence_release(wait);
  hali_hal_fence_release(done);
  hali_hal_fence_release(allocated);
  hali_hal_fence_release(freed);
  hali_hal_device_release(device);
}
END_TEST

/* The rest of the [hal] lines: buffers report to their allocator's tracer
 * (subspans, views), constant buffers and fences to the tracer they were
 * made with, update to its command buffer's.  Fences made without a
 * device, and the _untraced variants the queue and the VM's await use,
 * print nothing; neither do failing calls. */
START_TEST(test_tracer_object_lines) {
  hali_hal_device_t *device = cts_device(_i);
  trace_sink_t sink = {.mutex = PTHREAD_MUTEX_INITIALIZER};
  hali_hal_tracer_t tracer = {.user = &sink, .line = sink_line};
  hali_hal_device_set_tracer(device, &tracer);
  ck_assert_ptr_nonnull(hali_hal_device_tracer(device));
  ck_assert_ptr_null(hali_hal_device_tracer(NULL));
  hali_hal_buffer_t *buffer = cts_buffer(device, 64);
  sink.len = 0;
  sink.text[0] = 0;
  char want[4096];
  size_t n = 0;
#define WANT(...) n += (size_t)snprintf(want + n, sizeof(want) - n, __VA_ARGS__)
  /* Buffers and views. */
  hali_hal_buffer_t *span = NULL, *bad = NULL;
  HALI_CK_OK(hali_hal_buffer_subspan(buffer, 8, 16, &span));
  WANT("[hal] subspan !hal.buffer#%u [8, +16) -> !hal.buffer#%u\n", ID(buffer),
       ID(span));
  HALI_CK_STATUS(hali_hal_buffer_subspan(buffer, 60, 8, &bad),
                 HALI_STATUS_OUT_OF_RANGE, "subspan");
  hali_hal_dim_t shape[2] = {2, 2};
  hali_hal_buffer_view_t *view = NULL, *quiet_view = NULL, *bad_view = NULL;
  HALI_CK_OK(hali_hal_buffer_view_create(span, 2, shape,
                                         HALI_HAL_ELEMENT_TYPE_FLOAT_32,
                                         HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
                                         &view));
  WANT("[hal] buffer_view.create !hal.buffer#%u 2x2xf32 -> "
       "!hal.buffer_view#%u\n",
       ID(span), ID(view));
  HALI_CK_OK(hali_hal_buffer_view_create_untraced(
      span, 2, shape, HALI_HAL_ELEMENT_TYPE_FLOAT_32,
      HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR, &quiet_view));
  shape[0] = 100;
  HALI_CK_STATUS(hali_hal_buffer_view_create(
                     span, 2, shape, HALI_HAL_ELEMENT_TYPE_FLOAT_32,
                     HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR, &bad_view),
                 HALI_STATUS_OUT_OF_RANGE, "bytes");
  /* Constant data: traced through the tracer it is wrapped with. */
  static uint8_t bytes[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  hali_hal_buffer_params_t cparams = {
      HALI_HAL_MEMORY_TYPE_HOST_VISIBLE | HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE,
      HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_MAPPING};
  hali_hal_buffer_t *constant = NULL, *untraced_constant = NULL,
                    *cspan = NULL, *uspan = NULL;
  HALI_CK_OK(hali_hal_buffer_wrap_constant(hali_hal_device_allocator(device),
                                           "@table", cparams, bytes,
                                           sizeof(bytes), "test data", NULL,
                                           NULL, &constant));
  WANT("[hal] constant @table 12 bytes -> !hal.buffer#%u\n", ID(constant));
  HALI_CK_OK(hali_hal_buffer_subspan(constant, 4, 4, &cspan));
  WANT("[hal] subspan !hal.buffer#%u [4, +4) -> !hal.buffer#%u\n",
       ID(constant), ID(cspan));
  HALI_CK_OK(hali_hal_buffer_wrap_constant(NULL, "@quiet", cparams, bytes,
                                           sizeof(bytes), "test data", NULL,
                                           NULL, &untraced_constant));
  HALI_CK_OK(hali_hal_buffer_subspan(untraced_constant, 0, 4, &uspan));
  ck_assert_ptr_null(hali_hal_buffer_tracer(uspan));
  /* update: labelled by the caller, or "host". */
  hali_hal_command_buffer_t *cb = NULL;
  HALI_CK_OK(hali_hal_device_create_command_buffer(
      device, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT,
      HALI_HAL_COMMAND_CATEGORY_TRANSFER, &cb));
  WANT("[hal] command_buffer.create mode=1 categories=1 -> "
       "!hal.command_buffer#%u\n",
       ID(cb));
  HALI_CK_OK(hali_hal_command_buffer_update_from(cb, bytes + 4, "@table", 4,
                                                 buffer, 16, 8));
  WANT("[hal] command_buffer#%u update @table+4 -> !hal.buffer#%u+16 8 "
       "bytes\n",
       ID(cb), ID(buffer));
  HALI_CK_OK(hali_hal_command_buffer_update(cb, bytes, buffer, 0, 4));
  WANT("[hal] command_buffer#%u update host+0 -> !hal.buffer#%u+0 4 bytes\n",
       ID(cb), ID(buffer));
  HALI_CK_STATUS(hali_hal_command_buffer_update(cb, bytes, buffer, 62, 4),
                 HALI_STATUS_OUT_OF_RANGE, "update target");
  HALI_CK_OK(hali_hal_command_buffer_finalize(cb));
  WANT("[hal] command_buffer#%u finalize\n", ID(cb));
  /* Fences. */
  hali_hal_fence_t *a = NULL, *b = NULL, *ab = NULL, *plain = NULL,
                   *set = NULL, *pq = NULL;
  HALI_CK_OK(hali_hal_device_create_fence(device, &a));
  WANT("[hal] fence.create -> !hal.fence#%u\n", ID(a));
  HALI_CK_OK(hali_hal_device_create_fence(device, &b));
  WANT("[hal] fence.create -> !hal.fence#%u\n", ID(b));
  HALI_CK_OK(hali_hal_fence_create_pending(&plain)); /* no tracer */
  HALI_CK_OK(hali_hal_fence_create(&set));
  hali_hal_fence_trace_to(set, hali_hal_device_allocator(device));
  hali_hal_fence_t *pair[2] = {plain, a};
  HALI_CK_OK(hali_hal_fence_join(pair, 2, &pq)); /* takes a's tracer */
  WANT("[hal] fence.join !hal.fence#%u !hal.fence#%u -> !hal.fence#%u\n",
       ID(plain), ID(a), ID(pq));
  hali_hal_fence_t *both[2] = {a, b};
  HALI_CK_OK(hali_hal_fence_join(both, 2, &ab));
  WANT("[hal] fence.join !hal.fence#%u !hal.fence#%u -> !hal.fence#%u\n",
       ID(a), ID(b), ID(ab));
  bool ready = true;
  HALI_CK_OK(hali_hal_fence_query(ab, &ready));
  ck_assert(!ready);
  WANT("[hal] fence.query !hal.fence#%u -> %d\n", ID(ab),
       (int)HALI_STATUS_DEADLINE_EXCEEDED);
  HALI_CK_OK(hali_hal_fence_query_untraced(ab, &ready));
  HALI_CK_OK(hali_hal_fence_signal(a));
  WANT("[hal] fence.signal !hal.fence#%u\n", ID(a));
  HALI_CK_OK(hali_hal_fence_signal_untraced(plain));
  HALI_CK_OK(hali_hal_fence_signal(plain)); /* no tracer: no line */
  hali_hal_fence_fail(b, hali_status_make(HALI_STATUS_ABORTED, "test"));
  WANT("[hal] fence.fail !hal.fence#%u code %d\n", ID(b),
       (int)HALI_STATUS_ABORTED);
  HALI_CK_STATUS(hali_hal_fence_query(ab, &ready), HALI_STATUS_ABORTED,
                 "test");
  WANT("[hal] fence.query !hal.fence#%u -> %d\n", ID(ab),
       (int)HALI_STATUS_ABORTED);
  HALI_CK_OK(hali_hal_fence_await_untraced(a, HALI_INFINITE));
  hali_hal_fence_trace_await(set, HALI_STATUS_DEADLINE_EXCEEDED, 2500);
  WANT("[hal] fence.await !hal.fence#%u -> DEADLINE_EXCEEDED after 2 us\n",
       ID(set));
  hali_hal_fence_trace_await(plain, 0, 0);
  /* Fences and constants read the tracer at each line: clearing the
   * device's (which clears its allocator's) silences them. */
  hali_hal_device_set_tracer(device, NULL);
  HALI_CK_OK(hali_hal_fence_signal(set));
  HALI_CK_OK(hali_hal_fence_query(set, &ready));
  hali_hal_buffer_t *late = NULL;
  HALI_CK_OK(hali_hal_buffer_subspan(constant, 0, 2, &late));
  hali_hal_buffer_release(late);
  hali_hal_device_set_tracer(device, &tracer);
  ck_assert_int_eq(hali_hal_fence_state_code(HALI_OK, true), 0);
  pthread_mutex_lock(&sink.mutex);
  ck_assert_str_eq(sink.text, want);
  sink.len = 0;
  sink.text[0] = 0;
  pthread_mutex_unlock(&sink.mutex);
  /* A blocking await reports how long it took (not asserted: any number). */
  HALI_CK_OK(hali_hal_fence_await(a, HALI_INFINITE));
  n = 0;
  WANT("[hal] fence.await !hal.fence#%u -> OK after ", ID(a));
#undef WANT
  pthread_mutex_lock(&sink.mutex);
  ck_assert_int_eq(strncmp(sink.text, want, n), 0);
  ck_assert_str_eq(sink.text + n + strspn(sink.text + n, "0123456789"),
                   " us\n");
  pthread_mutex_unlock(&sink.mutex);
  hali_hal_fence_release(a);
  hali_hal_fence_release(b);
  hali_hal_fence_release(ab);
  hali_hal_fence_release(plain);
  hali_hal_fence_release(set);
  hali_hal_fence_release(pq);
  hali_hal_command_buffer_release(cb);
  hali_hal_buffer_release(uspan);
  hali_hal_buffer_release(untraced_constant);
  hali_hal_buffer_release(cspan);
  hali_hal_buffer_release(constant);
  hali_hal_buffer_view_release(quiet_view);
  hali_hal_buffer_view_release(view);
  hali_hal_buffer_release(span);
  hali_hal_buffer_release(buffer);
  hali_hal_device_set_tracer(device, NULL);
  hali_hal_device_release(device);
}
END_TEST
#undef ID

/* An allocator without a device reports to its own tracer. */
START_TEST(test_allocator_tracer) {
  (void)_i;
  hali_hal_allocator_t *allocator = NULL;
  HALI_CK_OK(hali_hal_allocator_create(NULL, &allocator));
  trace_sink_t sink = {.mutex = PTHREAD_MUTEX_INITIALIZER};
  hali_hal_tracer_t tracer = {.user = &sink, .line = sink_line};
  hali_hal_allocator_set_tracer(allocator, &tracer);
  hali_hal_buffer_params_t params = {HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL, 0};
  hali_hal_buffer_t *buffer = NULL;
  HALI_CK_OK(hali_hal_allocator_allocate_buffer(allocator, params, 5, &buffer));
  char want[256];
  snprintf(want, sizeof(want),
           "[hal] allocate 5 bytes memory=DEVICE_LOCAL usage=NONE -> "
           "!hal.buffer#%u\n",
           ((hali_ref_t *)buffer)->id);
  ck_assert_str_eq(sink.text, want);
  hali_hal_buffer_release(buffer);
  hali_hal_allocator_release(allocator);
}
END_TEST

static Suite *hal_cts_suite(void) {
  Suite *s = suite_create("hal-cts (local-sync, local-task/1,2,4)");
  TCase *tc = tcase_create("transfer");
  add_device_tests(tc, test_fill_patterns);
  add_device_tests(tc, test_fill_widened_matches_reference);
  add_device_tests(tc, test_fill_copy_subspans);
  add_device_tests(tc, test_update_copies_at_record_time);
  add_device_tests(tc, test_submission_rules);
  suite_add_tcase(s, tc);
  tc = tcase_create("queue");
  add_device_tests(tc, test_queue_order_and_parking);
  add_device_tests(tc, test_wait_failure_propagates);
  add_device_tests(tc, test_queue_top_of_timeline);
  add_device_tests(tc, test_device_release_drains);
  add_device_tests(tc, test_any_wait_point_failure_fails_fast);
  suite_add_tcase(s, tc);
  tc = tcase_create("dispatch");
  add_device_tests(tc, test_dispatch_multi_workgroup);
  add_device_tests(tc, test_dispatch_kernel_failure);
  add_device_tests(tc, test_dispatch_grid_limits);
  add_device_tests(tc, test_dispatch_usage_and_mapping);
  add_device_tests(tc, test_dispatch_uncommitted_binding);
  add_device_tests(tc, test_reusable_replay_program);
  add_device_tests(tc, test_reusable_op_loop);
  add_device_tests(tc, test_reusable_op_loop_failure_and_stop);
  add_device_tests(tc, test_reusable_concurrent_replays);
  add_device_tests(tc, test_tiny_submissions_inline);
  tcase_add_test(tc, test_runner_spin_adapts);
  add_device_tests(tc, test_stop_abandons_dispatch);
  add_device_tests(tc, test_stop_abandons_parked_work);
  add_device_tests(tc, test_queue_fences_are_the_order);
  tcase_add_test(tc, test_dispatch_identical_across_devices);
  suite_add_tcase(s, tc);
  tc = tcase_create("alloca");
  add_device_tests(tc, test_alloca_dealloca_order);
  add_device_tests(tc, test_alloca_limit);
  suite_add_tcase(s, tc);
  tc = tcase_create("tracing");
  add_device_tests(tc, test_tracer_lines);
  add_device_tests(tc, test_tracer_object_lines);
  tcase_add_test(tc, test_allocator_tracer);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *runner = srunner_create(hal_cts_suite());
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed ? 1 : 0;
}
