/* bench/collectives: an all-reduce (sum) of f32 through hali's queue —
 * a reusable command buffer holding one collective, submitted and awaited —
 * beside the same MPI_Allreduce called directly, alternated in one run on
 * the same buffers.  Run on 2 ranks by `make bench-collectives` (mpirun).
 * Goal (issue 21): hali <= 1.05 x MPI at 1 MiB and above; the latency hali
 * adds at 4 KiB is printed in microseconds. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "hal/hal.h"

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void die(hali_status_t s) {
  if (!s) return;
  fprintf(stderr, "bench/collectives: %s\n", hali_status_message(s));
  exit(1);
}

int main(void) {
  hali_hal_device_t *device = NULL;
  die(hali_hal_device_create(NULL, &device));
  hali_hal_channel_t *channel = NULL;
  die(hali_hal_device_default_channel(device, &channel));
  int rank = hali_hal_channel_rank(channel);
  int ranks = hali_hal_channel_count(channel);
  if (!hali_hal_channel_is_mpi(channel) || ranks < 2) {
    fprintf(stderr, "bench/collectives: run under mpirun -np 2 (make "
                    "bench-collectives)\n");
    return 2;
  }
  static const size_t sizes[] = {4096, 1u << 20, 64u << 20};
  if (rank == 0)
    printf("all-reduce(sum) of f32 on %d ranks, median of alternated runs\n"
           "%10s %12s %12s %8s %10s  goal\n",
           ranks, "bytes", "MPI us", "hali us", "ratio", "added us");
  int failures = 0;
  for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); ++si) {
    size_t bytes = sizes[si], n = bytes / 4;
    int reps = bytes >= (64u << 20) ? 11 : bytes >= (1u << 20) ? 101 : 2001;
    hali_hal_buffer_params_t params = {
        HALI_HAL_MEMORY_TYPE_HOST_VISIBLE | HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE,
        HALI_HAL_BUFFER_USAGE_ALL};
    hali_hal_buffer_t *send = NULL, *recv = NULL;
    hali_hal_allocator_t *a = hali_hal_device_allocator(device);
    die(hali_hal_allocator_allocate_buffer(a, params, bytes, &send));
    die(hali_hal_allocator_allocate_buffer(a, params, bytes, &recv));
    float *sp = NULL, *rp = NULL;
    die(hali_hal_buffer_map_range(send, 0, bytes, (void **)&sp));
    die(hali_hal_buffer_map_range(recv, 0, bytes, (void **)&rp));
    for (size_t i = 0; i < n; ++i) sp[i] = (float)(rank + 1);
    hali_hal_command_buffer_t *cb = NULL;
    die(hali_hal_device_create_command_buffer(
        device, 0, HALI_HAL_COMMAND_CATEGORY_ANY, &cb));
    hali_hal_collective_t op = {HALI_HAL_COLLECTIVE_ALL_REDUCE,
                                HALI_HAL_COLLECTIVE_REDUCTION_SUM,
                                HALI_HAL_ELEMENT_TYPE_FLOAT_32, 0, n};
    die(hali_hal_command_buffer_collective(cb, channel, &op, send, 0, bytes,
                                           recv, 0, bytes));
    die(hali_hal_command_buffer_finalize(cb));
    double *tm = calloc((size_t)reps, sizeof(double));
    double *th = calloc((size_t)reps, sizeof(double));
    for (int r = -2; r < reps; ++r) { /* two warm-up rounds */
      MPI_Barrier(MPI_COMM_WORLD);
      int64_t t0 = hali_clock_now_ns();
      MPI_Allreduce(sp, rp, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      int64_t t1 = hali_clock_now_ns();
      MPI_Barrier(MPI_COMM_WORLD);
      int64_t t2 = hali_clock_now_ns();
      hali_hal_fence_t *f = NULL;
      die(hali_hal_device_create_fence(device, &f));
      die(hali_hal_device_queue_execute(device, NULL, f, &cb, 1));
      die(hali_hal_fence_await(f, HALI_INFINITE));
      hali_hal_fence_release(f);
      int64_t t3 = hali_clock_now_ns();
      if (r >= 0) tm[r] = (double)(t1 - t0) / 1e3, th[r] = (double)(t3 - t2) / 1e3;
    }
    float want = (float)(ranks * (ranks + 1) / 2);
    for (size_t i = 0; i < n; ++i)
      if (rp[i] != want) {
        fprintf(stderr, "rank %d: element %zu is %g, want %g\n", rank, i,
                (double)rp[i], (double)want);
        return 1;
      }
    qsort(tm, (size_t)reps, sizeof(double), cmp);
    qsort(th, (size_t)reps, sizeof(double), cmp);
    double m = tm[reps / 2], h = th[reps / 2];
    if (rank == 0) {
      const char *goal = "";
      if (bytes >= (1u << 20)) {
        bool met = h <= 1.05 * m;
        goal = met ? "<= 1.05x: met" : "<= 1.05x: NOT met";
        failures += !met;
      } else {
        goal = "(latency reported)";
      }
      printf("%10zu %12.1f %12.1f %8.3f %10.1f  %s\n", bytes, m, h, h / m,
             h - m, goal);
    }
    free(tm);
    free(th);
    hali_hal_command_buffer_release(cb);
    hali_hal_buffer_release(send);
    hali_hal_buffer_release(recv);
  }
  hali_hal_channel_release(channel);
  hali_hal_device_release(device);
  return 0;
}
