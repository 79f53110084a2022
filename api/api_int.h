/* hali — what the parts of the C API share (private to api/): the
 * handle structures, argument checks and value conversions.  The API is
 * split by job: api/instance.c (instances, devices, modules), api/link.c
 * (import signatures and binding: host callbacks, libffi, other modules),
 * api/context.c (contexts and invocations), api/values.c (variants,
 * elements, buffer views, fences). */
#ifndef HALI_API_API_INT_H
#define HALI_API_API_INT_H

#include "base/alloc.h"
#include "hali/hali.h"

#include <dlfcn.h>
#include <errno.h>
#include <ffi.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/hal.h"
#include "loader/executables.h"
#include "loader/loader.h"
#include "loader/params.h"
#include "passes/pipeline.h"
#include "vm/fiber.h"
#include "vm/trace.h"
#include "vm/vm.h"

/* Imports and calls pass at most this many values (the interpreter's own
 * limit for imports). */
#define API_MAX_VALUES 64

hali_status_t hali_api_null_arg(const char *fn, const char *what);
#define CHECK_ARG(x)                                                           \
  do {                                                                         \
    if (HALI_UNLIKELY(!(x))) return hali_api_null_arg(__func__, #x);           \
  } while (0)

static inline hali_status_t oom(void) { return hali_status_oom(); }

static inline char *dup_or_null(const char *s) { return s ? hali_strdup(s) : NULL; }

/* Variants <-> VM values (api/values.c). */
void hali_api_value_to_variant(const hali_value_t *v, hali_variant_t *out);
hali_status_t hali_api_variants_to_values(const hali_ir_func_t *f,
                                          const hali_variant_t *args,
                                          size_t n, hali_value_t *out);

/* Import signatures: "(i32, i32) -> i32" (api/link.c). */
typedef struct {
  uint32_t param_count, result_count;
  hali_type_t types[2 * API_MAX_VALUES]; /* params, then results */
} signature_t;
bool hali_api_signature_parse(const char *text, signature_t *sig);
void hali_api_func_signature(const hali_ir_func_t *f, signature_t *sig);
bool hali_api_signature_equal(const signature_t *a, const signature_t *b);
void hali_api_signature_format(const signature_t *sig, char *buf, size_t n);

/* Instances. */
typedef struct {
  char *name;
  bool checked;
  signature_t sig;
  hali_import_callback_t callback;
  void *user;
} host_function_t;

typedef struct {
  char *name;
  host_function_t *functions;
  size_t count;
} host_module_t;

typedef struct {
  char *name;
  char *path;
} ffi_library_t;

struct hali_instance_s {
  atomic_uint_fast32_t count;
  atomic_bool frozen; /* a context was created: registries are read-only */
  hali_executable_registry_t *registry;
  char **paths;
  size_t path_count;
  host_module_t *hosts;
  size_t host_count;
  ffi_library_t *ffis;
  size_t ffi_count;
  hali_context_params_t defaults; /* .parameters retained */
  char *default_filter;
  hali_allocator_hooks_t allocator;
  hali_validation_t validation;
};

/* Parameters (api/params.c): a set of archive files by scope.  Frozen
 * (no more files) once a context was created with it, so contexts on any
 * thread read it without locks. */
struct hali_parameters_s {
  atomic_uint_fast32_t count;
  atomic_bool frozen;
  hali_param_set_t *set;
};

/* Devices. */
struct hali_device_s {
  atomic_uint_fast32_t count;
  hali_device_params_t params;
  hali_allocator_hooks_t allocator; /* the instance's, copied */
  hali_hal_device_t *hal;
};

/* Modules. */
/* Read, lowered, verified and encoded once, at load; immutable afterwards,
 * so contexts on any thread share it.  What a context loads and binds for
 * it lives in the context's link table (hali_vm_link_t), not here. */
struct hali_module_s {
  atomic_uint_fast32_t count;
  uint8_t *data; /* the bytes as written, for hali_module_write_binary */
  size_t size;
  char *name;    /* for errors: the path or the caller's name */
  char *path;    /* NULL when loaded from memory; where executables are */
  hali_vm_module_t *vm; /* the encoded module; one reference */
  const hali_ir_module_t *ir; /* vm->ir: verified, lowered; for names */
};

/* Contexts. */
typedef enum { BIND_HOST, BIND_FFI, BIND_MODULE } binding_kind_t;

/* What an import of a context's module is bound to; owned by the
 * context. */
typedef struct binding_s {
  struct binding_s *next;
  binding_kind_t kind;
  hali_context_t *context;
  const hali_ir_func_t *decl;
  /* BIND_HOST */
  hali_import_callback_t callback;
  void *user;
  /* BIND_FFI */
  void *dl;
  void (*fn)(void);
  ffi_cif cif;
  ffi_type *arg_types[API_MAX_VALUES];
  /* BIND_MODULE: the other module's link table in the same context */
  const hali_vm_link_t *target_link;
  const hali_vm_func_t *target;
  /* A register stack kept for the next call (NULL while one is running
   * it: a recursive call makes its own), so warm calls allocate nothing. */
  _Atomic(hali_vm_stack_t *) stack;
} binding_t;

struct hali_function_s {
  hali_context_t *context;
  const hali_vm_link_t *link; /* its module's, in |context| */
  const hali_vm_func_t *fn;
  /* Neither it nor anything it calls can suspend, spawn, submit device
   * work or call an import (api/context.c, "The direct invoke"): a
   * synchronous invoke may run it on the caller's thread. */
  bool direct;
};

/* One module of a context: the shared module and this context's link table
 * for it (its executables and bound imports). */
typedef struct {
  hali_module_t *module; /* retained */
  hali_vm_module_t *vm;  /* module->vm, shared */
  hali_vm_link_t *link;  /* owned */
  hali_function_t *functions;
} context_module_t;

struct hali_invocation_s {
  hali_context_t *context; /* retained (async invocations) */
  hali_vm_fiber_t *fiber;
  const hali_function_t *function;
  struct hali_invocation_s *prev, *next; /* the context's live list */
};

struct hali_context_s {
  atomic_uint_fast32_t count;
  hali_instance_t *instance;
  hali_device_t *device;
  hali_hal_device_t *hal; /* the device's, or a private one */
  bool private_device;
  context_module_t *modules;
  size_t module_count;
  binding_t *bindings;
  hali_trace_t *trace;
  char *trace_filter;
  FILE *trace_out; /* opened from hali_context_params_t.trace_path, or NULL */
  hali_vm_scheduler_t *scheduler;
  /* The parameter set of hali_context_params_t.parameters (retained), or
   * NULL: what `= parameter "scope"::"key"` globals resolve against
   * (hali_param_set_load). */
  hali_param_set_t *params;
  /* Guards |live| (cancellation comes from other threads). */
  pthread_mutex_t mutex;
  hali_invocation_t *live;
  /* The direct invoke (api/context.c): allowed by the parameters (no
   * trace, no max_duration_ns), its limits, the register stack it keeps
   * between calls (NULL while a call holds it) and the one running now
   * (for hali_context_cancel). */
  bool direct_ok;
  uint32_t direct_max_depth;
  uint64_t direct_fuel; /* 0: no fuel limit */
  _Atomic(hali_vm_stack_t *) direct_stack;
  _Atomic(hali_vm_stack_t *) direct_running;
};

/* A HAL device of |p|'s kind with |allocator|'s hooks and a memory limit
 * (0: none); api/instance.c. */
hali_status_t hali_api_make_hal_device(const hali_device_params_t *p,
                                       const hali_allocator_hooks_t *allocator,
                                       uint64_t limit, hali_hal_device_t **out);

/* Binds import |index| of context module |mi| (api/link.c). */
hali_status_t hali_api_link_import(hali_context_t *c, size_t mi, uint32_t index);

#endif /* HALI_API_API_INT_H */
