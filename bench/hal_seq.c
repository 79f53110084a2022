/* bench/hal -- the cost of one small HAL sequence, end to end: create a
 * one-shot command buffer, record a 4 KiB fill, finalize, execute on the
 * queue with a signal fence, await the fence (and release both).  Median
 * and minimum per sequence over many sequences, on local-sync and on
 * local-task (1 worker), beside the goals of issue 18 (0.5 us local-sync,
 * 5 us local-task).  Every sequence's fill is spot-checked at the end.
 *
 * Then the CPU time the device's own threads spend beside an idle host
 * (one larger fill every 200 us): what runner 0's spin for new work
 * costs when no work comes.
 *
 *   bench/hal [--reps=N] [--sequences=N] [--idle=N] [--device=D] [--made=M]
 *
 * --idle=0 skips the idle-host row; --device=local-sync (or local-task)
 * and --made=plain (or device) run only those rows (for callgrind).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hal/hal.h"

#define BENCH_NAME "hal_seq"
#include "bench/bench_util.h"

/* One sequence: the work a host does for one small submission.  |via|:
 * make the command buffer and the fence through the device, as
 * vm/hal_ops.c does (the device recycles command buffers), instead of
 * hali_hal_command_buffer_create / hali_hal_fence_create_pending. */
static void sequence(hali_hal_device_t *device, hali_hal_buffer_t *buffer,
                     uint32_t pattern, hali_hal_device_size_t length,
                     int via) {
  hali_hal_command_buffer_t *cb = NULL;
  bench_check(
      via ? hali_hal_device_create_command_buffer(
                device, HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT,
                HALI_HAL_COMMAND_CATEGORY_ANY, &cb)
          : hali_hal_command_buffer_create(
                HALI_HAL_COMMAND_BUFFER_MODE_ONE_SHOT,
                HALI_HAL_COMMAND_CATEGORY_ANY, &cb),
      "create");
  bench_check(hali_hal_command_buffer_fill(cb, buffer, 0, length, pattern, 4),
              "fill");
  bench_check(hali_hal_command_buffer_finalize(cb), "finalize");
  hali_hal_fence_t *signal = NULL;
  bench_check(via ? hali_hal_device_create_fence(device, &signal)
                  : hali_hal_fence_create_pending(&signal),
              "fence");
  bench_check(hali_hal_device_queue_execute(device, NULL, signal, &cb, 1),
        "execute");
  hali_hal_command_buffer_release(cb);
  bench_check(hali_hal_fence_await(signal, HALI_INFINITE), "await");
  hali_hal_fence_release(signal);
}

static double cpu_ns(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static hali_hal_device_t *make_device(hali_hal_device_kind_t kind) {
  hali_hal_device_params_t p;
  hali_hal_device_params_initialize(&p);
  p.kind = kind;
  p.worker_count = 1;
  hali_hal_device_t *device = NULL;
  bench_check(hali_hal_device_create(&p, &device), "device");
  return device;
}

static hali_hal_buffer_t *make_buffer(hali_hal_device_t *device,
                                      hali_hal_device_size_t size) {
  hali_hal_buffer_params_t bp = {
      .memory_types = HALI_HAL_MEMORY_TYPE_DEVICE_LOCAL |
                      HALI_HAL_MEMORY_TYPE_HOST_VISIBLE |
                      HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE,
      .usage = HALI_HAL_BUFFER_USAGE_ALL};
  hali_hal_buffer_t *buffer = NULL;
  bench_check(hali_hal_allocator_allocate_buffer(
                  hali_hal_device_allocator(device), bp, size, &buffer),
              "buffer");
  return buffer;
}

/* An idle host: one fill of |length| bytes (too large to run on the
 * submitting thread) every |gap_us|, |count| times; returns the CPU time
 * the device's own threads (runner, worker) spent per submission: the
 * process's CPU time minus the host thread's. */
static double idle_host_cpu_us(hali_hal_device_kind_t kind,
                               hali_hal_device_size_t length, int gap_us,
                               int count, double *out_host_us) {
  hali_hal_device_t *device = make_device(kind);
  hali_hal_buffer_t *buffer = make_buffer(device, length);
  sequence(device, buffer, 0x01020304u, length, 1); /* warm */
  const struct timespec gap = {0, (long)gap_us * 1000};
  double p0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
  double t0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
  for (int i = 0; i < count; ++i) {
    sequence(device, buffer, 0x01020304u + (uint32_t)i, length, 1);
    nanosleep(&gap, NULL);
  }
  double host = cpu_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
  double all = cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - p0;
  hali_hal_buffer_release(buffer);
  hali_hal_device_release(device);
  *out_host_us = host / count / 1000.0;
  return (all - host) / count / 1000.0;
}

int main(int argc, char **argv) {
  int reps = 21, sequences = 1000, idle = 300;
  const char *only = NULL; /* --device=D: only its rows (for callgrind) */
  int only_via = -1;       /* --made=plain|device: only those rows */
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--reps=", 7) == 0) reps = atoi(argv[i] + 7);
    else if (strncmp(argv[i], "--sequences=", 12) == 0)
      sequences = atoi(argv[i] + 12);
    else if (strncmp(argv[i], "--idle=", 7) == 0)
      idle = atoi(argv[i] + 7);
    else if (strncmp(argv[i], "--device=", 9) == 0)
      only = argv[i] + 9;
    else if (strcmp(argv[i], "--made=plain") == 0)
      only_via = 0;
    else if (strcmp(argv[i], "--made=device") == 0)
      only_via = 1;
    else {
      fprintf(stderr,
              "usage: bench/hal [--reps=N] [--sequences=N] [--idle=N] "
              "[--device=local-sync|local-task] [--made=plain|device]\n");
      return 2;
    }
  }
  if (reps < 1 || sequences < 1 || idle < 0) {
    fprintf(stderr, "hal: --reps and --sequences must be >= 1, --idle >= 0\n");
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
  printf("%-16s %-7s %10s %10s %8s  %s\n", "device", "made", "median", "min",
         "goal", "met");
  double *t = malloc(sizeof(double) * (size_t)reps);
  if (!t) return 1;
  for (size_t d = 0; d < sizeof devices / sizeof devices[0]; ++d) {
    if (only && strncmp(only, devices[d].name, strlen(only))) continue;
    for (int via = 0; via < 2; ++via) {
      if (only_via >= 0 && via != only_via) continue;
      hali_hal_device_t *device = make_device(devices[d].kind);
      hali_hal_buffer_t *buffer = make_buffer(device, 4096);
      sequence(device, buffer, 0x01020304u, 4096, via); /* warm */
      uint32_t last = 0;
      for (int r = 0; r < reps; ++r) {
        double t0 = bench_now_ns();
        for (int i = 0; i < sequences; ++i) {
          last = 0x01020304u + (uint32_t)i;
          sequence(device, buffer, last, 4096, via);
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
      printf("%-16s %-7s %10.2f %10.2f %8.1f  %s\n", devices[d].name,
             via ? "device" : "plain", median, t[0], devices[d].goal_us,
             median <= devices[d].goal_us ? "met" : "not met");
      hali_hal_buffer_release(buffer);
      hali_hal_device_release(device);
    }
  }
  printf("(made: plain = hali_hal_command_buffer_create and "
         "hali_hal_fence_create_pending;\n device = "
         "hali_hal_device_create_command_buffer / _create_fence, as the VM "
         "does)\n\n");
  free(t);
  if (!idle) return 0;
  /* The device's threads beside an idle host (the runner's spin). */
  enum { IDLE_BYTES = 256 << 10, IDLE_GAP_US = 200 };
  double host_us = 0, sync_host_us = 0;
  double task_us = idle_host_cpu_us(HALI_HAL_DEVICE_LOCAL_TASK, IDLE_BYTES,
                                    IDLE_GAP_US, idle, &host_us);
  double sync_us = idle_host_cpu_us(HALI_HAL_DEVICE_LOCAL_SYNC, IDLE_BYTES,
                                    IDLE_GAP_US, idle, &sync_host_us);
  printf("idle host: one 256 KiB fill every %d us, %d times; CPU us per "
         "submission\n",
         IDLE_GAP_US, idle);
  printf("local-task (1) device threads %8.2f   host thread %8.2f\n",
         task_us, host_us);
  printf("local-sync     (the fill on the host thread: %.2f)\n",
         sync_host_us);
  (void)sync_us;
  return 0;
}
