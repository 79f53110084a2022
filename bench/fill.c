/* bench/fill -- fill and copy bandwidth through the HAL against memset and
 * memcpy, at 4 KiB, 1 MiB and 256 MiB.
 *
 * For each size it records one reusable command buffer with one fill (of
 * a 1-, 2- and 4-byte pattern) or one copy, replays it on local-sync and
 * reports the median bandwidth, beside memset / memcpy of the same bytes
 * in the same run (alternated, so a noisy moment hurts both).  Every
 * measure's bytes are spot-checked; the baseline writes the same buffer's
 * memory (mapped), so both see the same pages.  See bench/README.md.
 *
 *   bench/fill [--reps=N] [--max-mib=N]   (256 MiB by default)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hal/hal.h"

#define BENCH_NAME "fill"
#include "bench/bench_util.h"

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void run_cb(hali_hal_device_t *device, hali_hal_command_buffer_t *cb) {
  hali_hal_fence_t *signal = NULL;
  bench_check(hali_hal_fence_create_pending(&signal), "fence");
  bench_check(hali_hal_device_queue_execute(device, NULL, signal, &cb, 1), "execute");
  bench_check(hali_hal_fence_await(signal, HALI_INFINITE), "await");
  hali_hal_fence_release(signal);
}

/* Keeps the compiler from dropping the baseline's memset / memcpy. */
static volatile uint8_t g_sink;

int main(int argc, char **argv) {
  int reps = 0;
  uint64_t max_mib = 256;
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--reps=", 7) == 0) reps = atoi(argv[i] + 7);
    else if (strncmp(argv[i], "--max-mib=", 10) == 0)
      max_mib = strtoull(argv[i] + 10, NULL, 10);
    else {
      fprintf(stderr, "usage: bench/fill [--reps=N] [--max-mib=N]\n");
      return 2;
    }
  }
  const uint64_t sizes[] = {4096, 1u << 20, max_mib << 20};
  hali_hal_device_t *device = NULL;
  hali_hal_device_params_t dp;
  hali_hal_device_params_initialize(&dp);
  dp.kind = HALI_HAL_DEVICE_LOCAL_SYNC;
  bench_check(hali_hal_device_create(&dp, &device), "device");
  hali_hal_allocator_t *allocator = hali_hal_device_allocator(device);
  hali_hal_buffer_params_t params = {
      .memory_types = HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL |
                      HALI_HAL_MEMORY_TYPE_HOST_VISIBLE |
                      HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE,
      .usage = HALI_HAL_BUFFER_USAGE_ALL};
  printf("fill/copy bandwidth, local-sync, median of the reps, GB/s "
         "(ratio: hali / libc; goal >= 0.95)\n");
  printf("%-10s %-12s %10s %10s %7s  %s\n", "size", "op", "hali", "libc",
         "ratio", "goal");
  for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; ++z) {
    const uint64_t n = sizes[z];
    if (n == 0 || (z == 2 && n <= sizes[1])) continue;
    /* As many reps as take ~50 MB per measure (at least 5). */
    int r = reps > 0 ? reps : (int)(n >= (50u << 20) ? 11 : (50u << 20) / n);
    if (r > 20000) r = 20000;
    hali_hal_buffer_t *a = NULL, *b = NULL;
    bench_check(hali_hal_allocator_allocate_buffer(allocator, params, n, &a), "a");
    bench_check(hali_hal_allocator_allocate_buffer(allocator, params, n, &b), "b");
    void *pa = NULL, *pb = NULL;
    bench_check(hali_hal_buffer_map_range(a, 0, n, &pa), "map");
    bench_check(hali_hal_buffer_map_range(b, 0, n, &pb), "map");
    memset(pb, 1, n);
    /* op 0..2: fill with a pattern of 1 << op bytes; op 3: copy b -> a. */
    static const uint32_t pattern[3] = {0x5C, 0xBEEF, 0x12345678};
    for (int op = 0; op < 4; ++op) {
      hali_hal_command_buffer_t *cb = NULL;
      bench_check(hali_hal_command_buffer_create(
                HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE,
                HALI_HAL_COMMAND_CATEGORY_ANY, &cb), "cb");
      if (op < 3)
        bench_check(hali_hal_command_buffer_fill(cb, a, 0, n, pattern[op], 1u << op),
              "fill");
      else
        bench_check(hali_hal_command_buffer_copy(cb, b, 0, a, 0, n), "copy");
      bench_check(hali_hal_command_buffer_finalize(cb), "finalize");
      run_cb(device, cb); /* warm: pages touched */
      double *th = malloc(sizeof(double) * (size_t)r),
             *tl = malloc(sizeof(double) * (size_t)r);
      if (!th || !tl) return 1;
      for (int i = 0; i < r; ++i) {
        double t0 = bench_now_ns();
        run_cb(device, cb);
        double t1 = bench_now_ns();
        /* The same bytes of the same buffer, so both see the same pages. */
        if (op < 3) memset(pa, 0x5C, n);
        else memcpy(pa, pb, n);
        double t2 = bench_now_ns();
        g_sink ^= ((volatile uint8_t *)pa)[i % n];
        th[i] = t1 - t0;
        tl[i] = t2 - t1;
      }
      run_cb(device, cb);
      /* Spot check: the fill's pattern, the copy's source bytes. */
      const uint8_t *q = pa;
      const uint64_t at = n / 2 + 1 - (n / 2 + 1) % 4;
      const uint8_t want =
          op < 3 ? (uint8_t)(pattern[op] >> (8 * (at % (1u << op))))
                 : ((const uint8_t *)pb)[at];
      if (q[at] != want) {
        fprintf(stderr, "fill: wrong byte after op %d: 0x%02x\n", op, q[at]);
        return 1;
      }
      double h = median(th, r), l = median(tl, r);
      double gh = (double)n / h, gl = (double)n / l; /* bytes/ns = GB/s */
      char sz[32], name[32];
      if (n >= (1u << 20)) snprintf(sz, sizeof sz, "%" PRIu64 " MiB", n >> 20);
      else snprintf(sz, sizeof sz, "%" PRIu64 " KiB", n >> 10);
      if (op < 3) snprintf(name, sizeof name, "fill %u B", 1u << op);
      else snprintf(name, sizeof name, "copy");
      /* 4 KiB: one queue submission (~0.3 us) outweighs the bytes, so
       * it measures the HAL sequence, not bandwidth: no goal. */
      printf("%-10s %-12s %10.2f %10.2f %7.2f  %s\n", sz, name, gh, gl,
             gh / gl, n < (1u << 20) ? "-" : gh / gl >= 0.95 ? "met" : "not met");
      free(th);
      free(tl);
      hali_hal_command_buffer_release(cb);
    }
    hali_hal_buffer_release(a);
    hali_hal_buffer_release(b);
  }
  hali_hal_device_release(device);
  return 0;
}
