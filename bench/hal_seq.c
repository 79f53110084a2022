/* bench/hal -- the cost of one small HAL sequence, end to end: create a
 * one-shot command buffer, record a 4 KiB fill, finalize, execute on the
 * queue with a signal fence, await the fence (and release both).  Median
 * and minimum per sequence over many sequences, on local-sync and on
 * local-task (1 worker), beside the goals of issue 18 (0.5 us local-sync,
 * 5 us local-task).  Every sequence's fill is spot-checked at the end.
 *
 *   bench/hal [--reps=N] [--sequences=N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hal/hal.h"

#define BENCH_NAME "hal_seq"
#include "bench/bench_util.h"

/* One sequence: the work a host does for one small submission. */
static void sequence(hali_hal_device_t *device, hali_hal_buffer_t *buffer,
                     uint32_t pattern) {
  hali_hal_command_buffer_t *cb = NULL;
  bench_check(hali_hal_command_buffer_create(HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT,
                                       HALI_HAL_COMMAND_CATEGORY_ANY, &cb),
        "create");
  bench_check(hali_hal_command_buffer_fill(cb, buffer, 0, 4096, pattern, 4), "fill");
  bench_check(hali_hal_command_buffer_finalize(cb), "finalize");
  hali_hal_fence_t *signal = NULL;
  bench_check(hali_hal_fence_create_pending(&signal), "fence");
  bench_check(hali_hal_device_queue_execute(device, NULL, signal, &cb, 1),
        "execute");
  hali_hal_command_buffer_release(cb);
  bench_check(hali_hal_fence_await(signal, HALI_INFINITE), "await");
  hali_hal_fence_release(signal);
}

int main(int argc, char **argv) {
  int reps = 21, sequences = 1000;
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--reps=", 7) == 0) reps = atoi(argv[i] + 7);
    else if (strncmp(argv[i], "--sequences=", 12) == 0)
      sequences = atoi(argv[i] + 12);
    else {
      fprintf(stderr, "usage: bench/hal [--reps=N] [--sequences=N]\n");
      return 2;
    }
  }
  if (reps < 1 || sequences < 1) {
    fprintf(stderr, "hal: --reps and --sequences must be >= 1\n");
    return 2;
  }
  static const struct {
    const char *name;
    hali_hal_device_kind_t kind;
    double goal_us;
  } devices[] = {{"local-sync", HALI_HAL_DEVICE_LOCAL_SYNC, 0.5},
                 {"local-task (1)", HALI_HAL_DEVICE_LOCAL_TASK, 5.0}};
  printf("HAL sequence: create one-shot command buffer, fill 4 KiB, "
         "finalize, execute, await; us per sequence (%d runs of %d)\n",
         reps, sequences);
  printf("%-16s %10s %10s %8s  %s\n", "device", "median", "min", "goal",
         "met");
  double *t = malloc(sizeof(double) * (size_t)reps);
  if (!t) return 1;
  for (size_t d = 0; d < sizeof devices / sizeof devices[0]; ++d) {
    hali_hal_device_params_t p;
    hali_hal_device_params_initialize(&p);
    p.kind = devices[d].kind;
    p.worker_count = 1;
    hali_hal_device_t *device = NULL;
    bench_check(hali_hal_device_create(&p, &device), "device");
    hali_hal_buffer_params_t bp = {
        .memory_types = HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL |
                        HALI_HAL_MEMORY_TYPE_HOST_VISIBLE |
                        HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE,
        .usage = HALI_HAL_BUFFER_USAGE_ALL};
    hali_hal_buffer_t *buffer = NULL;
    bench_check(hali_hal_allocator_allocate_buffer(hali_hal_device_allocator(device),
                                             bp, 4096, &buffer),
          "buffer");
    sequence(device, buffer, 0x01020304u); /* warm */
    uint32_t last = 0;
    for (int r = 0; r < reps; ++r) {
      double t0 = bench_now_ns();
      for (int i = 0; i < sequences; ++i) {
        last = 0x01020304u + (uint32_t)i;
        sequence(device, buffer, last);
      }
      t[r] = (bench_now_ns() - t0) / sequences / 1000.0;
    }
    uint32_t got = 0;
    bench_check(hali_hal_buffer_read(buffer, 4092, &got, 4), "read");
    uint8_t want[4] = {(uint8_t)last, (uint8_t)(last >> 8),
                       (uint8_t)(last >> 16), (uint8_t)(last >> 24)};
    if (memcmp(&got, want, 4) != 0) {
      fprintf(stderr, "hal: the last fill did not land\n");
      return 1;
    }
    qsort(t, (size_t)reps, sizeof *t, bench_cmp_double);
    const double median = t[reps / 2];
    printf("%-16s %10.2f %10.2f %8.1f  %s\n", devices[d].name, median, t[0],
           devices[d].goal_us, median <= devices[d].goal_us ? "met" : "not met");
    hali_hal_buffer_release(buffer);
    hali_hal_device_release(device);
  }
  free(t);
  return 0;
}
