/* bench/dispatch_bench -- per-dispatch overhead of each executable loader.
 *
 * For each loader (native, ffi, static, bytecode) it records one reusable
 * command buffer holding 10,000 dispatches of a trivial one-workgroup
 * kernel (out[0] += c, bench/dispatch_kernel.h), replays it on a device
 * and reports the median time per dispatch, beside the same kernel called
 * 10,000 times through a plain C function pointer in the same run.  Every
 * replay's result is checked.  See bench/README.md.
 *
 *   bench/dispatch_bench [--reps=N] [--dispatches=N] [KERNEL_DIR]
 *
 * KERNEL_DIR holds dispatch_kernels.so (default: bench/ under the build
 * directory this was built in). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/dispatch_kernel.h"
#include "hal/hal.h"

#define BENCH_NAME "dispatch_bench"
#include "bench/bench_util.h"
#include "loader/executables.h"
#include "loader/loader.h"
#include "vm/vm.h"

static const char *const module_text =
    "module @dispatch_bench\n"
    "executable @native format \"native\" library \"dispatch_kernels.so\" {\n"
    "  export @bump(i32) -> (tensor<1xi32>)\n"
    "}\n"
    "executable @ffi format \"ffi\" library \"dispatch_kernels.so\" {\n"
    "  export @bump(i32) -> (tensor<1xi32>) symbol \"bump_ffi\"\n"
    "}\n"
    "executable @static format \"static\" library \"bench_static\" {\n"
    "  export @bump(i32) -> (tensor<1xi32>)\n"
    "}\n"
    "executable @bytecode format \"bytecode\" {\n"
    "  export @bump(i32) -> (tensor<1xi32>) function @bump_kernel\n"
    "}\n"
    "func @bump_kernel(%c: i32, %out: !hal.buffer, %x: i32, %y: i32, "
    "%z: i32, %cx: i32, %cy: i32, %cz: i32) {\n"
    "  %zero = const.i64 0\n"
    "  %v = hal.buffer.load.i32 %out, %zero\n"
    "  %v = add.i32 %v, %c\n"
    "  hal.buffer.store.i32 %out, %zero, %v\n"
    "  return\n"
    "}\n";

static const hali_kernel_export_t static_exports[] = {
    {"bump", bench_bump, 1, 1, {1, 1, 1}, 0},
};
static const hali_kernel_library_t static_library = {
    HALI_KERNEL_ABI_VERSION, "bench_static", 1, static_exports};

typedef struct {
  double median, min;
} timing_t;

static timing_t summarize(double *v, int n) {
  qsort(v, (size_t)n, sizeof(double), bench_cmp_double);
  timing_t t = {n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[0]};
  free(v);
  return t;
}

/* The baseline: the kernel through a function pointer the compiler cannot
 * see through, with states prepared once, as a loader would have them. */
static timing_t direct_ns(int reps, int dispatches) {
  int32_t out = 0;
  void *ptrs[1] = {&out};
  size_t lengths[1] = {sizeof(out)};
  uint32_t c = 3;
  hali_kernel_dispatch_state_t d = {1, 1, 1, 1, 1, 1, 1, &c, 1, ptrs, lengths};
  hali_kernel_workgroup_state_t w = {0};
  hali_kernel_fn_t volatile fn = bench_bump;
  double *t = calloc((size_t)reps, sizeof(double));
  for (int r = -1; r < reps; ++r) { /* r = -1 warms up */
    double start = bench_now_ns();
    for (int i = 0; i < dispatches; ++i) fn(&d, &w);
    double ns = bench_now_ns() - start;
    if (r >= 0) t[r] = ns / dispatches;
  }
  if (out != 3 * dispatches * (reps + 1)) {
    fprintf(stderr, "dispatch_bench: direct calls computed %d\n", out);
    exit(1);
  }
  return summarize(t, reps);
}

/* Replays a command buffer of |dispatches| dispatches of |exe| |reps|
 * times on |dev|; ns per dispatch. */
static timing_t replay_ns(hali_hal_device_t *dev, hali_hal_executable_t *exe,
                        int reps, int dispatches) {
  hali_hal_buffer_params_t params = {
      HALI_HAL_MEMORY_TYPE_HOST_VISIBLE | HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE,
      HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_DISPATCH |
          HALI_HAL_BUFFER_USAGE_MAPPING};
  hali_hal_buffer_t *out = NULL;
  bench_check(hali_hal_allocator_allocate_buffer(hali_hal_device_allocator(dev),
                                           params, 4, &out),
        "allocate");
  int32_t zero = 0;
  bench_check(hali_hal_buffer_write(out, 0, &zero, 4), "write");
  hali_hal_command_buffer_t *cb = NULL;
  bench_check(hali_hal_command_buffer_create(HALI_HAL_COMMAND_BUFFER_MODE_REUSABLE,
                                       HALI_HAL_COMMAND_CATEGORY_DISPATCH, &cb),
        "command buffer");
  const uint32_t c = 3;
  bench_check(hali_hal_command_buffer_push_constants(cb, 0, &c, 1), "constants");
  const hali_hal_buffer_binding_t binding = {0, out, 0, 4};
  bench_check(hali_hal_command_buffer_push_descriptor_set(cb, &binding, 1),
        "bindings");
  for (int i = 0; i < dispatches; ++i)
    bench_check(hali_hal_command_buffer_dispatch(cb, exe, 0, 1, 1, 1), "dispatch");
  bench_check(hali_hal_command_buffer_finalize(cb), "finalize");
  double *t = calloc((size_t)reps, sizeof(double));
  for (int r = -1; r < reps; ++r) { /* r = -1 warms up */
    hali_hal_fence_t *done = NULL;
    bench_check(hali_hal_fence_create_pending(&done), "fence");
    double start = bench_now_ns();
    bench_check(hali_hal_device_queue_execute(dev, NULL, done, &cb, 1), "execute");
    bench_check(hali_hal_fence_await(done, HALI_INFINITE), "replay");
    double ns = bench_now_ns() - start;
    hali_hal_fence_release(done);
    if (r >= 0) t[r] = ns / dispatches;
  }
  int32_t result = 0;
  bench_check(hali_hal_buffer_read(out, 0, &result, 4), "read");
  if (result != 3 * dispatches * (reps + 1)) {
    fprintf(stderr, "dispatch_bench: %s computed %d, expected %d\n",
            hali_hal_executable_format(exe), result,
            3 * dispatches * (reps + 1));
    exit(1);
  }
  hali_hal_command_buffer_release(cb);
  hali_hal_buffer_release(out);
  return summarize(t, reps);
}

int main(int argc, char **argv) {
  int reps = 21, dispatches = 10000;
  const char *dir = HALI_BUILDDIR "/bench";
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--reps=", 7) == 0) reps = atoi(argv[i] + 7);
    else if (strncmp(argv[i], "--dispatches=", 13) == 0)
      dispatches = atoi(argv[i] + 13);
    else if (argv[i][0] != '-') dir = argv[i];
    else {
      fprintf(stderr,
              "usage: dispatch_bench [--reps=N] [--dispatches=N] [DIR]\n");
      return 2;
    }
  }
  if (reps < 1 || dispatches < 1) {
    fprintf(stderr, "dispatch_bench: --reps and --dispatches must be >= 1\n");
    return 2;
  }

  hali_ir_module_t *ir = NULL;
  bench_check(hali_load_bytes((const uint8_t *)module_text, strlen(module_text),
                        "dispatch_bench.hasm", &ir),
        "assembling the module");
  hali_vm_module_t *m = NULL;
  bench_check(hali_vm_module_create(ir, &m), "module");
  hali_executable_registry_t *registry = NULL;
  bench_check(hali_executable_registry_create(&registry), "registry");
  bench_check(hali_executable_registry_register_static(registry, &static_library),
        "static kernels");
  const char *paths[] = {dir};
  hali_vm_link_t *link = NULL;
  bench_check(hali_vm_link_create(m, &link), "link");
  bench_check(hali_executable_registry_load_link(registry, link, NULL, paths, 1),
        "loading the executables");

  static const struct {
    const char *name;
    hali_hal_device_kind_t kind;
  } devices[] = {{"local-sync", HALI_HAL_DEVICE_LOCAL_SYNC},
                 {"local-task", HALI_HAL_DEVICE_LOCAL_TASK}};
  enum { DEVICES = 2, LOADERS = 4 };
  timing_t ns[DEVICES][LOADERS];
  timing_t direct[DEVICES];
  for (int d = 0; d < DEVICES; ++d) {
    hali_hal_device_params_t p;
    hali_hal_device_params_initialize(&p);
    p.kind = devices[d].kind;
    p.worker_count = 1;
    hali_hal_device_t *dev = NULL;
    bench_check(hali_hal_device_create(&p, &dev), "device");
    /* The baseline is measured beside each device's runs, so both see the
     * same machine state. */
    direct[d] = direct_ns(reps, dispatches);
    for (int l = 0; l < LOADERS; ++l)
      ns[d][l] = replay_ns(dev, link->executables[l], reps, dispatches);
    hali_hal_device_release(dev);
  }

  printf("hali dispatch overhead: a reusable command buffer of %d "
         "one-workgroup\ndispatches (out[0] += c), replayed %d times; ns per "
         "dispatch (median, min)\nand the ratio of the mins to a direct "
         "call's\n\n",
         dispatches, reps);
  printf("%-9s %18s %9s %18s %9s\n", "loader", "local-sync", "x direct",
         "local-task (1)", "x direct");
  for (int l = 0; l < LOADERS; ++l)
    printf("%-9s %9.1f %8.1f %9.0f %9.0f %8.0f %9.0f\n",
           hali_hal_executable_format(link->executables[l]), ns[0][l].median,
           ns[0][l].min, ns[0][l].min / direct[0].min, ns[1][l].median,
           ns[1][l].min, ns[1][l].min / direct[1].min);
  printf("%-9s %9.2f %8.2f %9.0f %9.2f %8.2f %9.0f\n", "direct",
         direct[0].median, direct[0].min, 1.0, direct[1].median,
         direct[1].min, 1.0);
  printf("\n(direct: the same kernel called %d times through a C function "
         "pointer;\n local-task: 1 worker, to which the queue thread hands "
         "each dispatch)\n",
         dispatches);
  hali_vm_link_free(link);
  hali_vm_module_release(m);
  hali_executable_registry_free(registry);
  return 0;
}
