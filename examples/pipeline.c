/* hali example: pipelining two invocations of a tensor-level function by
 * chaining fences, with one host wait at the end.
 *
 * The module below is written at the tensor level; the loader's passes
 * (doc/passes.md) turn @f into @f$async(x, n, wait, signal) and a blocking
 * @f.  The host calls
 *   y1 = f$async(x,  n, <null fence>, s1)
 *   y2 = f$async(y1, n, s1,           s2)
 * without waiting in between (the second call's work is queued behind the
 * first one's signal; it imports y1, whose contents do not exist yet), then
 * awaits s2 once and checks y2 = 2 (2 x + 1) + 1 = 4 x + 3.
 *
 * Internal APIs (loader/, vm/, hal/): the public C API lives elsewhere.
 * Usage: pipeline [local-sync|local-task]   (default local-task)
 * Exits 0 when the numbers are right; run by make check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/hal.h"
#include "loader/executables.h"
#include "loader/loader.h"
#include "vm/fiber.h"
#include "vm/vm.h"

static const char module_text[] =
    "module @pipeline\n"
    "executable @k format \"bytecode\" {\n"
    "  export @affine(tensor<?xf32>, f32, f32) -> (tensor<?xf32>)\n"
    "      function @affine_kernel\n"
    "}\n"
    "# y = 2 x + 1\n"
    "func @f(%x: tensor<?xf32>, %n: i64) -> tensor<?xf32> {\n"
    "  %a = const.f32 2.0\n"
    "  %b = const.f32 1.0\n"
    "  %y = tensor.dispatch @k::@affine[%n](%x, %a, %b) -> tensor<?xf32>{%n}\n"
    "  return %y\n"
    "}\n"
    "func @affine_kernel(%in: !hal.buffer, %a: f32, %b: f32, %out: !hal.buffer,\n"
    "                    %i: i32, %wy: i32, %wz: i32, %cx: i32, %cy: i32,\n"
    "                    %cz: i32) {\n"
    "  %four = const.i32 4\n"
    "  %o = mul.i32 %i, %four\n"
    "  %off = ext.u.i32.i64 %o\n"
    "  %v = hal.buffer.load.f32 %in, %off\n"
    "  %v = fma.f32 %v, %a, %b\n"
    "  hal.buffer.store.f32 %out, %off, %v\n"
    "  return\n"
    "}\n";

enum { N = 8 };

static hali_value_t ref_value(hali_type_t type, void *ref) {
  hali_value_t v = {.type = type};
  v.ref = (hali_ref_t *)ref;
  return v;
}

/* Runs |fn| with |args| to completion (f$async returns once its work is
 * queued) and takes its one result (retained). */
static hali_status_t call(hali_vm_scheduler_t *sched, const hali_vm_link_t *l,
                          const hali_vm_func_t *fn, const hali_value_t *args,
                          size_t nargs, hali_value_t *out) {
  hali_vm_fiber_t *fiber = NULL;
  hali_status_t s =
      hali_vm_scheduler_start_link(sched, l, fn, args, nargs, &fiber);
  if (!s) s = hali_vm_scheduler_run(sched, fiber);
  if (!s && hali_vm_fiber_status(fiber))
    s = hali_status_clone(hali_vm_fiber_status(fiber));
  if (!s) {
    size_t n = 0;
    const hali_value_t *r = hali_vm_fiber_results(fiber, &n);
    *out = r[0];
    hali_ref_retain(out->ref);
  }
  if (fiber) hali_vm_fiber_release(fiber);
  return s;
}

static hali_status_t run(hali_hal_device_kind_t kind, int *out_bad) {
  hali_ir_module_t *ir = NULL;
  hali_vm_module_t *m = NULL;
  hali_vm_link_t *l = NULL; /* what this program loaded for |m| */
  hali_hal_device_t *dev = NULL;
  hali_vm_scheduler_t *sched = NULL;
  hali_hal_buffer_t *buf = NULL;
  hali_hal_buffer_view_t *x = NULL;
  hali_hal_fence_t *none = NULL, *s1 = NULL, *s2 = NULL;
  hali_value_t y1 = {0}, y2 = {0};
  hali_executable_registry_t *registry = NULL;

  hali_status_t s = hali_load_bytes((const uint8_t *)module_text,
                                    sizeof(module_text) - 1, "pipeline.hasm",
                                    &ir);
  if (!s) s = hali_vm_module_create(ir, &m); /* takes |ir| */
  if (!s) s = hali_executable_registry_create(&registry);
  if (!s) s = hali_vm_link_create(m, &l);
  if (!s) s = hali_executable_registry_load_link(registry, l, NULL, NULL, 0);
  hali_executable_registry_free(registry);
  const hali_vm_func_t *fn = m ? hali_vm_module_lookup(m, "f$async") : NULL;
  if (!s && !fn)
    s = hali_status_make(HALI_STATUS_NOT_FOUND, "no @f$async after the passes");

  hali_hal_device_params_t dp;
  hali_hal_device_params_initialize(&dp);
  dp.kind = kind;
  dp.worker_count = 2;
  if (!s) s = hali_hal_device_create(&dp, &dev);
  if (!s) s = hali_vm_scheduler_create(dev, NULL, &sched);

  /* The input x = [0, 1, ..., N-1] in a host-visible buffer. */
  hali_hal_buffer_params_t bp = {
      HALI_HAL_MEMORY_TYPE_HOST_VISIBLE | HALI_HAL_MEMORY_TYPE_DEVICE_VISIBLE,
      HALI_HAL_BUFFER_USAGE_TRANSFER | HALI_HAL_BUFFER_USAGE_DISPATCH |
          HALI_HAL_BUFFER_USAGE_MAPPING};
  float host[N];
  for (int i = 0; i < N; ++i) host[i] = (float)i;
  if (!s)
    s = hali_hal_allocator_allocate_buffer(hali_hal_device_allocator(dev), bp,
                                           sizeof(host), &buf);
  if (!s) s = hali_hal_buffer_write(buf, 0, host, sizeof(host));
  hali_hal_dim_t shape[1] = {N};
  if (!s)
    s = hali_hal_buffer_view_create(buf, 1, shape, HALI_HAL_ELEMENT_TYPE_FLOAT_32,
                                    HALI_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR, &x);
  if (!s) s = hali_hal_fence_create(&none); /* empty: already reached */
  if (!s) s = hali_hal_fence_create_pending(&s1);
  if (!s) s = hali_hal_fence_create_pending(&s2);

  /* Two invocations, chained: no host wait between them. */
  if (!s) {
    hali_value_t args[4] = {ref_value(HALI_TYPE_BUFFER_VIEW, x),
                            hali_value_i64(N), ref_value(HALI_TYPE_FENCE, none),
                            ref_value(HALI_TYPE_FENCE, s1)};
    s = call(sched, l, fn, args, 4, &y1);
  }
  if (!s) {
    hali_value_t args[4] = {y1, hali_value_i64(N),
                            ref_value(HALI_TYPE_FENCE, s1),
                            ref_value(HALI_TYPE_FENCE, s2)};
    s = call(sched, l, fn, args, 4, &y2);
  }
  /* One wait, for the end of the chain. */
  if (!s) s = hali_hal_fence_await(s2, HALI_INFINITE);
  if (!s) {
    hali_hal_buffer_t *out =
        hali_hal_buffer_view_buffer((hali_hal_buffer_view_t *)y2.ref);
    float got[N];
    s = hali_hal_buffer_read(out, 0, got, sizeof(got));
    for (int i = 0; !s && i < N; ++i) {
      float want = 4.0f * (float)i + 3.0f;
      printf("y[%d] = %g%s\n", i, (double)got[i],
             got[i] == want ? "" : "  (wrong)");
      *out_bad += got[i] != want;
    }
  }

  hali_value_release(&y1);
  hali_value_release(&y2);
  if (s1) hali_hal_fence_release(s1);
  if (s2) hali_hal_fence_release(s2);
  if (none) hali_hal_fence_release(none);
  if (x) hali_hal_buffer_view_release(x);
  if (buf) hali_hal_buffer_release(buf);
  hali_vm_scheduler_free(sched);
  hali_vm_link_free(l);
  if (dev && s) hali_hal_device_abandon(dev);
  if (dev) hali_hal_device_release(dev);
  hali_vm_module_release(m);
  return s;
}

int main(int argc, char **argv) {
  hali_hal_device_kind_t kind = HALI_HAL_DEVICE_LOCAL_TASK;
  if (argc > 1 && strcmp(argv[1], "local-sync") == 0)
    kind = HALI_HAL_DEVICE_LOCAL_SYNC;
  int bad = 0;
  hali_status_t s = run(kind, &bad);
  if (s) {
    char *text = hali_status_to_string(s);
    fprintf(stderr, "pipeline: %s\n", text ? text : "error");
    free(text);
    hali_status_free(s);
    return 1;
  }
  return bad ? 1 : 0;
}
