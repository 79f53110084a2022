/* examples/embed: a host program that embeds hali.
 *
 *   cc main.c $(pkg-config --cflags --libs hali) -o embed && ./embed
 *
 * It registers a static kernel and a host import, loads embed.hasm (from
 * the current directory), runs @main on a vector and prints the result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hali/hali.h>

/* The kernel: out[i] = x[i] * x[i] + bias (one workgroup does it all). */
static int square_plus(const hali_kernel_dispatch_state_t *d,
                       const hali_kernel_workgroup_state_t *w) {
  float bias;
  const float *x = d->binding_ptrs[0];
  float *out = d->binding_ptrs[1];
  memcpy(&bias, &d->constants[0], sizeof(bias));
  for (size_t i = 0; i < d->binding_lengths[0] / sizeof(float); ++i)
    out[i] = x[i] * x[i] + bias;
  return 0;
}
static const hali_kernel_export_t exports[] = {
    /* name, function, bindings, push constants, workgroup size, scratch */
    {"square_plus", square_plus, 2, 1, {1, 1, 1}, 0},
};
static const hali_kernel_library_t kernels = {HALI_KERNEL_ABI_VERSION,
                                              "embed_kernels", 1, exports};

/* The import @env.bias: () -> f32. */
static hali_status_t bias(void *user, const hali_variant_t *args, size_t n,
                          hali_variant_t *results, size_t m) {
  results[0].u.f32 = *(const float *)user;
  return HALI_OK;
}

static int check(hali_status_t s) {
  if (!s) return 0;
  char *text = hali_status_to_string(s);
  fprintf(stderr, "embed: %s\n", text);
  free(text);
  hali_status_free(s);
  exit(1);
}

int main(void) {
  static const float half = 0.5f;
  hali_instance_t *instance;
  check(hali_instance_create(NULL, &instance));
  check(hali_instance_register_static_library(instance, &kernels));
  hali_import_function_t env[] = {{"bias", "() -> f32", bias, (void *)&half}};
  check(hali_instance_register_import_module(instance, "env", env, 1));

  hali_device_t *device;
  check(hali_device_create(instance, NULL, &device)); /* local-sync */
  hali_module_t *module;
  check(hali_module_load_file(instance, "embed.hasm", &module));
  hali_context_t *context;
  check(hali_context_create(instance, device, &module, 1, NULL, &context));

  float x[4] = {1, 2, 3, 4}, y[4];
  int64_t shape[1] = {4};
  hali_buffer_view_t *input;
  check(hali_buffer_view_create(device, HALI_ELEMENT_TYPE_F32, 1, shape, x,
                                sizeof(x), &input));
  hali_function_t *fn;
  check(hali_context_lookup_function(context, "main", &fn));
  hali_variant_t arg = hali_variant_view(input), result;
  check(hali_context_invoke(context, fn, &arg, 1, &result, 1));
  check(hali_buffer_view_read(result.u.view, y, sizeof(y)));
  printf("main([1 2 3 4]) with bias %g = [%g %g %g %g]\n", half, y[0], y[1],
         y[2], y[3]);

  hali_variant_release(&result);
  hali_buffer_view_release(input);
  hali_context_release(context);
  hali_module_release(module);
  hali_device_release(device);
  hali_instance_release(instance);
  return 0;
}
