/* hali — the public C API (umbrella header).
 *
 * A host program embeds hali through this header alone (it includes
 * hali/base.h for statuses and hali/kernel.h for the kernel ABI) and links
 * libhali (`pkg-config --cflags --libs hali`).  doc/embedding.md is the
 * tutorial; this header is the contract.
 *
 * Lifecycle
 *
 *   instance   registries: executable loaders (built-in and the host's),
 *              static kernel tables, host import modules (C callbacks or
 *              C functions in shared libraries called through libffi),
 *              executable search paths and default context limits
 *   device     local-sync (no threads) or local-task (a queue thread and
 *              workers), with an optional memory limit
 *   module     a .hasm or .hbc module, loaded and verified
 *   context    a device plus one or more modules linked together with the
 *              host imports; limits (memory, call depth, fuel), tracing
 *   function   looked up by name in a context
 *   invoke     synchronous, or asynchronous with caller-provided fences
 *
 * Errors.  Every fallible call returns a hali_status_t: NULL (HALI_OK) on
 * success, otherwise an owned status the caller must free (or pass on) —
 * see hali/base.h.  All of them are marked warn-unused-result.  A NULL
 * handle where one is required is INVALID_ARGUMENT; non-fallible getters
 * given NULL return 0/NULL.
 *
 * Ownership.  Objects are reference counted: *_create / *_load return a
 * handle with one reference the caller owns; *_retain adds one; *_release
 * drops one and the last frees the object.  A released handle must not be
 * used again (that is undefined behaviour; the library cannot detect it).
 * Objects retain what they depend on, so the host may release them in any
 * order: a context keeps its instance, device and modules alive, an
 * invocation keeps its context alive.  Parameters documented as
 * "borrowed" are only used during the call; strings are copied.
 *
 * Threads.
 *   - Instances and modules are immutable once set up and may be shared by
 *     any number of threads and contexts.  Instance registration calls
 *     (hali_instance_register_*) must all happen before the first context
 *     is created from it and not concurrently with each other.
 *   - Devices may be used from any thread.
 *   - A context (and its invocations) is used by one thread at a time:
 *     invoke, run, await and result calls must not overlap.  The exceptions
 *     are hali_context_cancel and hali_invocation_cancel, which may be
 *     called from any thread at any time while the handle is alive.
 *   - Buffer views are immutable after creation (their bytes are not
 *     synchronized: order host access against device work with fences).
 *   - Fences (and the semaphores behind them) are thread-safe: any thread
 *     may signal, fail, query or await them.
 *   - Host import callbacks run on the thread that runs the invocation.
 *   - The functions that hold no handle (hali_element_*,
 *     hali_module_print_file, hali_instruction_set_markdown,
 *     hali_device_kind_parse) may be called from any thread.
 */
#ifndef HALI_HALI_H
#define HALI_HALI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hali/base.h"
#include "hali/kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HALI_VERSION_STRING "0.1.0"

/* "0.1.0": the version of the library actually loaded. */
HALI_API const char *hali_version(void);
/* Whether this library can trace (false when it was configured with
 * --disable-tracing: a context asking for a trace then fails with
 * UNIMPLEMENTED). */
HALI_API bool hali_trace_available(void);

typedef struct hali_instance_s hali_instance_t;
typedef struct hali_device_s hali_device_t;
typedef struct hali_module_s hali_module_t;
typedef struct hali_context_s hali_context_t;
typedef struct hali_function_s hali_function_t;
typedef struct hali_invocation_s hali_invocation_t;
typedef struct hali_parameters_s hali_parameters_t;
/* HAL objects, shared with modules' !hal.buffer_view and !hal.fence. */
typedef struct hali_hal_buffer_view_t hali_buffer_view_t;
typedef struct hali_hal_fence_t hali_fence_t;

/* Relative timeouts in nanoseconds: 0 polls, HALI_TIMEOUT_INFINITE (or any
 * negative value) waits forever. */
#define HALI_TIMEOUT_INFINITE ((int64_t)-1)

/* ======================================================================== */
/* Values crossing the boundary                                              */
/* ======================================================================== */

/* The numbers are those of the module format (doc/format.md). */
typedef enum hali_variant_type_e {
  HALI_VARIANT_NONE = 0,
  HALI_VARIANT_I32 = 1,
  HALI_VARIANT_I64 = 2,
  HALI_VARIANT_F32 = 3,
  HALI_VARIANT_F64 = 4,
  /* References.  Views and fences have helpers below; the others can be
   * passed through (e.g. a result handed back as an argument) and
   * released. */
  HALI_VARIANT_DEVICE = 16,
  HALI_VARIANT_ALLOCATOR = 17,
  HALI_VARIANT_BUFFER = 18,
  HALI_VARIANT_BUFFER_VIEW = 19,
  HALI_VARIANT_COMMAND_BUFFER = 20,
  HALI_VARIANT_FENCE = 21,
  HALI_VARIANT_EXECUTABLE = 22,
} hali_variant_type_t;

/* An argument or result: a scalar or a reference.  For arguments, refs are
 * borrowed (the runtime retains what it keeps).  Ref results written by
 * hali are owned by the caller: free them with hali_variant_release. */
typedef struct hali_variant_s {
  hali_variant_type_t type;
  union {
    int32_t i32;
    int64_t i64;
    float f32;
    double f64;
    hali_buffer_view_t *view; /* HALI_VARIANT_BUFFER_VIEW */
    hali_fence_t *fence;      /* HALI_VARIANT_FENCE */
    void *ref;                /* any reference type */
  } u;
} hali_variant_t;

static inline hali_variant_t hali_variant_i32(int32_t v) {
  hali_variant_t x;
  x.type = HALI_VARIANT_I32;
  x.u.i64 = 0;
  x.u.i32 = v;
  return x;
}
static inline hali_variant_t hali_variant_i64(int64_t v) {
  hali_variant_t x;
  x.type = HALI_VARIANT_I64;
  x.u.i64 = v;
  return x;
}
static inline hali_variant_t hali_variant_f32(float v) {
  hali_variant_t x;
  x.type = HALI_VARIANT_F32;
  x.u.i64 = 0;
  x.u.f32 = v;
  return x;
}
static inline hali_variant_t hali_variant_f64(double v) {
  hali_variant_t x;
  x.type = HALI_VARIANT_F64;
  x.u.f64 = v;
  return x;
}
/* |view| is borrowed by the variant (not retained). */
static inline hali_variant_t hali_variant_view(hali_buffer_view_t *view) {
  hali_variant_t x;
  x.type = HALI_VARIANT_BUFFER_VIEW;
  x.u.view = view;
  return x;
}
/* |fence| is borrowed by the variant (not retained). */
static inline hali_variant_t hali_variant_fence(hali_fence_t *fence) {
  hali_variant_t x;
  x.type = HALI_VARIANT_FENCE;
  x.u.fence = fence;
  return x;
}

/* Releases the reference |*v| holds (no-op for scalars and NULL refs) and
 * sets |v| to HALI_VARIANT_NONE.  |v| may be NULL. */
HALI_API void hali_variant_release(hali_variant_t *v);
/* "i32", "!hal.buffer_view", ...; "?" for an unknown type. */
HALI_API const char *hali_variant_type_name(hali_variant_type_t type);

/* ======================================================================== */
/* Limits and tracing (per context)                                          */
/* ======================================================================== */

typedef enum hali_trace_bits_e {
  HALI_TRACE_BITS_NONE = 0,
  HALI_TRACE_BITS_VM = 1u << 0,  /* every executed instruction */
  HALI_TRACE_BITS_HAL = 1u << 1, /* every HAL operation */
} hali_trace_bits_t;

/* Receives one trace line (no newline), or one JSON event of a Chrome
 * trace; |line| is borrowed for the call.  May run on device threads (HAL
 * lines): make it thread-safe. */
typedef void (*hali_trace_line_callback_t)(void *user, const char *line);

typedef enum hali_trace_output_format_e {
  HALI_TRACE_FORMAT_TEXT = 0,   /* one line per event (doc/tracing.md) */
  HALI_TRACE_FORMAT_CHROME = 1, /* trace-event JSON (Perfetto): HAL
                                 * operations, dispatches, fibers and
                                 * awaits as timed slices; no per-
                                 * instruction events */
} hali_trace_output_format_t;

typedef struct hali_context_params_s {
  /* Bytes of device memory the context's programs may hold at once; 0 =
   * the device's limit.  Allocations beyond it fail with
   * RESOURCE_EXHAUSTED.  A context with a limit (or HAL tracing) runs on
   * a private device of the same kind and worker count. */
  uint64_t max_memory_bytes;
  /* Maximum call depth of each invocation, counting every fiber it
   * spawns from where it was spawned (a spawn is a call); 0 = the default
   * (4096).  Deeper calls fail with RESOURCE_EXHAUSTED. */
  uint32_t max_call_depth;
  /* Instruction budget of each invocation; 0 = unlimited.  Running out
   * fails the invocation with RESOURCE_EXHAUSTED ("instruction budget
   * (fuel) of N exhausted").  A fiber the invocation spawns takes half of
   * what its spawner has left, and its bytecode kernels draw from a pool
   * it keeps at half of what it has left, so the invocation, all it spawns
   * and all its kernels share this one budget.  Independently of fuel, at
   * most 16,384 fibers of one invocation and 65,536 of a context are live
   * at once; a spawn beyond that fails with RESOURCE_EXHAUSTED. */
  uint64_t fuel;
  /* Wall-clock limit of each invocation, from its start; 0 = none.  Past
   * it, the invocation and every fiber it spawned fail with
   * DEADLINE_EXCEEDED (VM code at its next call or branch, an await at
   * once, within ~5 ms), and its device work is abandoned: a bytecode
   * kernel at its next branch, a native one at its next workgroup, queued
   * work before it starts; their fences fail with DEADLINE_EXCEEDED. */
  uint64_t max_duration_ns;
  /* Tracing: which events (0 = off) and where each line goes (NULL callback
   * = stderr).  |trace_user| is passed to the callback. */
  uint32_t trace_bits; /* hali_trace_bits_t */
  hali_trace_line_callback_t trace_callback;
  void *trace_user;
  /* Glob on function names limiting VM trace lines; NULL = all.  Copied. */
  const char *trace_filter;
  /* Text lines or Chrome JSON.  A Chrome trace records the device's work
   * (a private device, as for HAL tracing) even without
   * HALI_TRACE_BITS_HAL. */
  hali_trace_output_format_t trace_format;
  /* Where the trace goes when |trace_callback| is NULL; NULL = stderr.
   * Borrowed: it must stay open until the context is released, which
   * completes a Chrome trace's JSON and flushes it (the host closes the
   * file afterwards).  Writes are serialized. */
  FILE *trace_file;
  /* Buffer view elements shown in trace lines; 0 = the default (8). */
  size_t trace_max_values;
  /* Weight files for the modules' `parameter "scope"::"key"` globals
   * (hali_parameters_create); NULL = none.  Borrowed by the call: the
   * context (and an instance, for its default_context_params) retains it,
   * and from then on no file may be added to it. */
  hali_parameters_t *parameters;
  /* Threads that run the context's fibers while the host is inside
   * hali_context_run, hali_invocation_await* or hali_context_invoke: the
   * host's thread plus |fiber_threads| - 1 workers of the context (started
   * when fibers wait for a thread, at most 64).  0 = one per core, the
   * default; 1 = the host's thread alone (fibers then take turns in 10 ms
   * slices).  With workers, import callbacks may run on a worker
   * (doc/embedding.md, "Threads"). */
  uint32_t fiber_threads;
  /* Where the trace goes, by path, when neither |trace_callback| nor
   * |trace_file| is set: the context creates (or truncates) the file when
   * it is created and closes it when it is released, after completing a
   * Chrome trace's JSON.  The string is read when each context is
   * created (in an instance's default_context_params it must outlive the
   * instance).  INVALID_ARGUMENT when |trace_file| is
   * set too; a file that cannot be created fails the context with the
   * path and the reason. */
  const char *trace_path;
} hali_context_params_t;

/* No limits, no tracing. */
HALI_API void hali_context_params_initialize(hali_context_params_t *out_params);

/* ======================================================================== */
/* Instance                                                                  */
/* ======================================================================== */

/* Allocator hooks: where the storage of every device buffer comes from
 * (tensors, weights, scratch the programs allocate).  |alloc| returns
 * |size| bytes aligned to |alignment| (a power of two, 64) or NULL (the
 * allocation then fails with RESOURCE_EXHAUSTED); |free| gets back the
 * pointer and the same |size|.  Both are called from any thread that
 * allocates or frees, queue threads included, so they must be
 * thread-safe.  Leave both NULL for the C library. */
typedef struct hali_allocator_hooks_s {
  void *(*alloc)(void *user, size_t size, size_t alignment);
  void (*free)(void *user, void *ptr, size_t size);
  void *user;
} hali_allocator_hooks_t;

/* Validation mode (doc/validation.md): checks HAL programs for missing
 * barriers and fence waits, host access to buffers queue work still uses,
 * out-of-bounds and forbidden accesses by C kernels and reads of bytes
 * nothing wrote.  Off by default and free when off.  FAIL makes a finding
 * an error (a FAILED_PRECONDITION whose message starts "validation: ");
 * WARN prints it to stderr and carries on. */
typedef enum hali_validation_e {
  HALI_VALIDATION_OFF = 0,
  HALI_VALIDATION_FAIL = 1,
  HALI_VALIDATION_WARN = 2,
} hali_validation_t;

/* "fail" (also "on", "error"), "warn" or "off"; INVALID_ARGUMENT naming
 * them otherwise. */
HALI_API HALI_MUST_USE hali_status_t hali_validation_parse(
    const char *name, hali_validation_t *out_mode);

typedef struct hali_instance_options_s {
  /* Directories searched (after the module's own directory) for kernel
   * libraries named by modules' executables, before $HALI_EXECUTABLE_PATH.
   * The strings are copied. */
  const char *const *executable_paths;
  size_t executable_path_count;
  /* Limits used by hali_context_create when it is given no params. */
  hali_context_params_t default_context_params;
  /* Buffer storage for every device created with this instance. */
  hali_allocator_hooks_t allocator;
  /* Validation mode of every device created with this instance whose own
   * params leave it off. */
  hali_validation_t validation;
} hali_instance_options_t;

HALI_API void hali_instance_options_initialize(
    hali_instance_options_t *out_options);

/* Creates an instance with the built-in executable loaders (native, ffi,
 * static, bytecode).  |options| may be NULL (defaults); it is copied.  The
 * caller owns |*out_instance|. */
HALI_API HALI_MUST_USE hali_status_t hali_instance_create(
    const hali_instance_options_t *options, hali_instance_t **out_instance);
HALI_API void hali_instance_retain(hali_instance_t *instance);
HALI_API void hali_instance_release(hali_instance_t *instance);

/* Registers a table of C kernels for modules' `format "static"`
 * executables, found by |library->name| (the executable's `library`
 * string, else its name).  |library| and its kernels are borrowed: they
 * must outlive the instance.  ALREADY_EXISTS for a duplicate name. */
HALI_API HALI_MUST_USE hali_status_t hali_instance_register_static_library(
    hali_instance_t *instance, const hali_kernel_library_t *library);

/* What a custom loader is asked to load: one executable declaration of a
 * module (`executable @name format "F" library "L" { export ... }`).
 * Everything is borrowed for the duration of the load call. */
typedef struct hali_executable_request_s {
  const char *name;       /* the executable's name in the module */
  const char *format;     /* "F" */
  const char *library;    /* "L", or NULL when not given */
  const char *module_dir; /* the module file's directory, or NULL */
} hali_executable_request_t;

/* A custom executable loader: the interface the built-in loaders use,
 * reduced to what a host needs.  |load| produces a kernel table (the
 * kernel ABI of hali/kernel.h); the runtime matches the module's exports
 * to it by name (or `symbol`) and checks binding and constant counts, as
 * for `static` and `native` executables. */
typedef struct hali_executable_loader_s {
  /* Called with |self| when the instance is destroyed; may be NULL. */
  void (*destroy)(void *self);
  /* Whether this loader loads |format|. */
  bool (*supports)(void *self, const char *format);
  /* Loads |request|.  The returned table (and its kernels) is borrowed:
   * it must stay valid until |destroy| runs.  Errors are annotated with
   * the executable and format. */
  hali_status_t (*load)(void *self, const hali_executable_request_t *request,
                        const hali_kernel_library_t **out_library);
  /* The formats it loads, for error messages ("myformat").  Copied. */
  const char *formats;
} hali_executable_loader_t;

/* Adds |loader| (copied) with |self| (owned by the loader: passed to
 * destroy).  Loaders are asked in registration order, built-ins first.
 * On failure |destroy| is not called. */
HALI_API HALI_MUST_USE hali_status_t hali_instance_register_executable_loader(
    hali_instance_t *instance, const hali_executable_loader_t *loader,
    void *self);

/* A host import callback.  |args| (|arg_count| of them, typed as the
 * module declares) are borrowed; |results| arrive with their types set
 * and must be filled in; ref results are handed over owned (e.g. a view
 * from hali_buffer_view_create).  A returned error fails the invocation,
 * annotated with the import's name. */
typedef hali_status_t (*hali_import_callback_t)(void *user,
                                                const hali_variant_t *args,
                                                size_t arg_count,
                                                hali_variant_t *results,
                                                size_t result_count);

typedef struct hali_import_function_s {
  /* The function's name within its module: "add" for `@env.add`. */
  const char *name;
  /* The expected signature, e.g. "(i32, i32) -> i32", "(f64)" or
   * "(!hal.buffer_view) -> (!hal.buffer_view, i32)"; checked against the
   * module's declaration at link (INVALID_ARGUMENT naming both on a
   * mismatch).  NULL = not checked. */
  const char *signature;
  hali_import_callback_t callback;
  void *user; /* passed to |callback|; must outlive the instance */
} hali_import_function_t;

/* Registers host import module |module_name| ("env"): a module's import
 * `@env.NAME` binds to the function whose name is NAME when a context
 * links it.  |functions| (|count|) and the strings are copied.
 * ALREADY_EXISTS when the module name is taken, INVALID_ARGUMENT for a
 * malformed signature. */
HALI_API HALI_MUST_USE hali_status_t hali_instance_register_import_module(
    hali_instance_t *instance, const char *module_name,
    const hali_import_function_t *functions, size_t count);

/* Registers |module_name| as plain C functions of the shared library
 * |library_path| (a path for dlopen: absolute, or found by the dynamic
 * linker): an import `@MODULE.SYM` calls the C function SYM through
 * libffi with its declared scalar types (i32 -> int32_t, i64 -> int64_t,
 * f32 -> float, f64 -> double; at most one result, none = void).  The
 * library is opened and each call interface prepared once, when a context
 * links a module using it; a missing library or symbol or a non-scalar
 * signature is then a link error.  Strings are copied. */
HALI_API HALI_MUST_USE hali_status_t hali_instance_register_ffi_library(
    hali_instance_t *instance, const char *module_name,
    const char *library_path);

/* ======================================================================== */
/* Device                                                                    */
/* ======================================================================== */

typedef enum hali_device_kind_e {
  HALI_DEVICE_LOCAL_SYNC = 0, /* no threads: work runs inline */
  HALI_DEVICE_LOCAL_TASK = 1, /* a queue thread plus worker threads */
} hali_device_kind_t;

typedef struct hali_device_params_s {
  hali_device_kind_t kind;
  uint32_t worker_count;     /* local-task: 0 = one per core */
  uint64_t max_memory_bytes; /* 0 = unlimited */
  /* Collectives (doc/collectives.md): how long one waits for every rank to
   * arrive before failing with DEADLINE_EXCEEDED; 0 = 10 s, negative =
   * forever. */
  int64_t collective_timeout_ns;
  /* A host that runs its own MPI: points at an MPI_Comm (borrowed; hali
   * duplicates it) over which the device's default channel runs.  NULL: the
   * MPI world when an MPI launcher started the process, else one rank. */
  const void *mpi_comm;
  hali_validation_t validation; /* OFF: the instance's mode */
} hali_device_params_t;

/* |*out_kind| for a device name: "local-sync" or "local-task".  NOT_FOUND
 * naming the known ones otherwise (|*out_kind| is then local-sync). */
HALI_API HALI_MUST_USE hali_status_t hali_device_kind_parse(
    const char *name, hali_device_kind_t *out_kind);

/* This process's rank in the MPI world and the number of ranks: 0 and 1
 * unless an MPI launcher (mpirun) started it and hali was built with MPI.
 * Initializes MPI in that case (hali finalizes it at exit); every rank
 * should call it early, as MPI's start-up is collective. */
HALI_API HALI_MUST_USE hali_status_t hali_world_rank(int32_t *out_rank,
                                                    int32_t *out_count);

/* local-sync, one worker per core, unlimited memory. */
HALI_API void hali_device_params_initialize(hali_device_params_t *out_params);

/* Creates a device.  |instance| is borrowed (it may be NULL); |params| may
 * be NULL for defaults.  INVALID_ARGUMENT for an unknown kind.  The caller
 * owns |*out_device|.  Releasing the last reference waits for the
 * device's queued work. */
HALI_API HALI_MUST_USE hali_status_t hali_device_create(
    hali_instance_t *instance, const hali_device_params_t *params,
    hali_device_t **out_device);
HALI_API void hali_device_retain(hali_device_t *device);
HALI_API void hali_device_release(hali_device_t *device);
/* Gives up on the device's queued work that waits on fences: every
 * submission not yet running fails its signal fence with CANCELLED.  For
 * shutting down after an invocation failed, when work it queued may wait
 * on fences nothing will signal any more (releasing the device would
 * otherwise wait for that work forever).  Work of every context using the
 * device is affected.  Any thread; NULL is a no-op. */
HALI_API void hali_device_abandon(hali_device_t *device);

/* The memory statistics of a device's allocator: every buffer the device
 * holds for programs (arguments created with hali_buffer_view_create,
 * results, the storage the load-time passes allocate: transient slabs,
 * constant pools, tensor globals) is counted from its allocation until its
 * last reference goes.  A snapshot; any thread. */
typedef struct hali_device_memory_statistics_s {
  uint64_t bytes_live;       /* bytes allocated now */
  uint64_t bytes_peak;       /* the most bytes_live has been since the device
                                was created (or the last reset) */
  uint64_t allocation_count; /* allocations ever made */
  uint64_t allocations_live; /* allocations not yet freed */
} hali_device_memory_statistics_t;
/* Fills |out_statistics|; INVALID_ARGUMENT when an argument is NULL. */
HALI_API HALI_MUST_USE hali_status_t hali_device_query_memory_statistics(
    hali_device_t *device, hali_device_memory_statistics_t *out_statistics);
/* Starts a new peak: bytes_peak becomes bytes_live (so a host measures the
 * peak of one call).  NULL is a no-op. */
HALI_API void hali_device_reset_memory_peak(hali_device_t *device);

/* ======================================================================== */
/* Modules                                                                   */
/* ======================================================================== */

/* Loads a module file (.hasm text or .hbc binary, told apart by content):
 * reads it, runs the load-time passes, verifies and encodes it, once.  The
 * module is immutable afterwards: any number of contexts, on any threads,
 * share it without reading it again (each context keeps its own link
 * table: loaded executables and bound imports).  Relative kernel library
 * paths of its executables are looked up in the file's directory first.
 * |instance| is borrowed.  The caller owns |*out_module|.  Errors name the
 * file, line and column. */
HALI_API HALI_MUST_USE hali_status_t hali_module_load_file(
    hali_instance_t *instance, const char *path, hali_module_t **out_module);
/* Same for |size| bytes at |data| (copied); |name| names it in errors. */
HALI_API HALI_MUST_USE hali_status_t hali_module_load_bytes(
    hali_instance_t *instance, const void *data, size_t size, const char *name,
    hali_module_t **out_module);

/* How a module is lowered when it is loaded. */
typedef struct hali_module_load_options_s {
  /* Comma-separated names of the load-time passes to run, in pipeline
   * order (doc/passes.md); NULL = all of them.  INVALID_ARGUMENT, listing
   * the known passes, for an unknown name.  Copied. */
  const char *passes;
  /* Run no pass at all (tensor-level modules then fail verification). */
  bool no_passes;
} hali_module_load_options_t;

/* The whole pipeline. */
HALI_API void hali_module_load_options_initialize(
    hali_module_load_options_t *out_options);

/* hali_module_load_file with |options| (NULL = defaults): the passes run
 * here, once; contexts link the module as it was lowered. */
HALI_API HALI_MUST_USE hali_status_t hali_module_load_file_ex(
    hali_instance_t *instance, const char *path,
    const hali_module_load_options_t *options, hali_module_t **out_module);
/* Any thread.  A context retains its modules, so a module may be released
 * before the contexts that link it. */
HALI_API void hali_module_retain(hali_module_t *module);
HALI_API void hali_module_release(hali_module_t *module);
/* The module's name (`module @name`); borrowed, valid while |module| is. */
HALI_API const char *hali_module_name(const hali_module_t *module);
/* The number of functions of the loaded (lowered) module, imports and
 * functions the load-time passes added included; 0 for NULL. */
HALI_API size_t hali_module_function_count(const hali_module_t *module);
/* The name of function |i| (imports as "env.add"); borrowed, valid while
 * |module| is; NULL when |i| is out of range. */
HALI_API const char *hali_module_function_name(const hali_module_t *module,
                                               size_t i);

/* Serialises |module| as written (before the load-time passes) into .hbc
 * bytes that load back to the same module (doc/format.md).  With |strip|
 * the names and source lines are left out (errors and traces then show
 * positions only).  |*out_data| is the caller's, to release with
 * hali_free(). */
HALI_API HALI_MUST_USE hali_status_t hali_module_write_binary(
    const hali_module_t *module, bool strip, void **out_data,
    size_t *out_size);

/* What hali_module_print_file prints. */
typedef struct hali_module_print_options_s {
  /* Leave out loc(...) annotations and the module's source string. */
  bool no_locs;
  /* Print the IR after the load-time passes instead of the module as
   * written: |passes| (comma-separated) selects which run, |after| stops
   * after one ("all": after each pass in turn, each copy headed by a
   * comment line "# after pass N of M: NAME"); either one non-NULL selects
   * this form, which shows the interfaces materialize-interfaces records
   * and is verified only when the whole pipeline ran.  Unknown pass
   * names are INVALID_ARGUMENT listing the known ones. */
  const char *passes;
  const char *after;
  /* Run no pass (as written: the check that the module loads then skips
   * the verifier). */
  bool no_passes;
} hali_module_print_options_t;

/* Prints the module file |path| (.hasm or .hbc) as .hasm text into
 * |*out_text| (the caller's, to release with hali_free()).  As written,
 * the text assembles back to the same binary; it is printed only when
 * the module loads (passes and verifier, as for hali_module_load_file).
 * |options| may be NULL (as written, with locations).  Errors name the
 * file, line and column. */
HALI_API HALI_MUST_USE hali_status_t hali_module_print_file(
    const char *path, const hali_module_print_options_t *options,
    char **out_text);

/* The instruction set reference (markdown, doc/isa.md), generated from
 * the op table; the caller releases it with hali_free(), NULL when out
 * of memory. */
HALI_API char *hali_instruction_set_markdown(void);

/* ======================================================================== */
/* Contexts                                                                  */
/* ======================================================================== */

/* Links |modules| (|module_count| >= 1; borrowed array, each module
 * retained) on |device| (retained) into a new context.  |params| NULL uses
 * the instance's default_context_params.  Modules are not read or lowered
 * again: the context makes a link table per module, which it owns.
 * Linking, per module: its executables are loaded with the instance's
 * loaders; each import
 * `@M.F` is bound to, in order, host import module M (function F), an
 * ffi library registered as M, or function F of another module of this
 * context named M.  A required import left unbound is NOT_FOUND naming
 * it; optional ones may stay unbound (calling one then fails).  The
 * instance is frozen: later registrations fail.  The caller owns
 * |*out_context|. */
HALI_API HALI_MUST_USE hali_status_t hali_context_create(
    hali_instance_t *instance, hali_device_t *device,
    hali_module_t *const *modules, size_t module_count,
    const hali_context_params_t *params, hali_context_t **out_context);
HALI_API void hali_context_retain(hali_context_t *context);
/* Drops a reference; the last one cancels invocations still pending and
 * frees the link tables.  Objects the programs handed out (buffer views,
 * fences, command buffers) stay valid: what they use of the context's
 * executables and modules they keep alive themselves. */
HALI_API void hali_context_release(hali_context_t *context);

/* Finds function |name| ("main", or "module.main" to pick a module) in
 * the context's modules, in link order.  |*out_function| is borrowed from
 * the context (valid while it lives; never released).  NOT_FOUND for an
 * unknown name or an import. */
HALI_API HALI_MUST_USE hali_status_t hali_context_lookup_function(
    hali_context_t *context, const char *name, hali_function_t **out_function);

/* The function's name (borrowed), argument and result counts and types
 * (HALI_VARIANT_NONE when |i| is out of range). */
HALI_API const char *hali_function_name(const hali_function_t *function);
HALI_API size_t hali_function_argument_count(const hali_function_t *function);
HALI_API size_t hali_function_result_count(const hali_function_t *function);
HALI_API hali_variant_type_t hali_function_argument_type(
    const hali_function_t *function, size_t i);
HALI_API hali_variant_type_t hali_function_result_type(
    const hali_function_t *function, size_t i);

/* Runs |function| of |context| with |args| to completion on the calling
 * thread and stores its results in |results| (|result_count| must equal
 * the function's).  INVALID_ARGUMENT when a count or type differs from
 * the signature or a ref argument is NULL or of another type.  A failing
 * program returns its status with a backtrace, one annotation per line,
 * innermost first, repeated frames collapsed into one line with a count
 * (doc/tracing.md, "Backtraces"); cancellation returns
 * CANCELLED; limits return RESOURCE_EXHAUSTED.  An await on a fence that
 * nothing in the context can signal is reported as a deadlock
 * (FAILED_PRECONDITION), also inside a function marked ["blocking"]
 * (doc/fibers.md, "Blocking awaits") — use hali_context_invoke_async for
 * functions that wait on fences the host signals.  The caller owns ref
 * results. */
HALI_API HALI_MUST_USE hali_status_t hali_context_invoke(
    hali_context_t *context, const hali_function_t *function,
    const hali_variant_t *args, size_t arg_count, hali_variant_t *results,
    size_t result_count);

/* Starts |function| with |args| (checked as for invoke) without running
 * it.  This is how `f$async`-style functions, which take a wait fence and
 * a signal fence among their arguments, are chained: start several, then
 * drive them with hali_context_run or hali_invocation_await; a program
 * suspended on a fence resumes when it is signalled (by the host, the
 * device, or another invocation).  The caller owns |*out_invocation|,
 * which retains the context. */
HALI_API HALI_MUST_USE hali_status_t hali_context_invoke_async(
    hali_context_t *context, const hali_function_t *function,
    const hali_variant_t *args, size_t arg_count,
    hali_invocation_t **out_invocation);

/* Runs the context's ready invocations until none can make progress
 * without the host (every one finished or waiting on a fence).  Returns
 * OK; invocation failures are reported by the invocations. */
HALI_API HALI_MUST_USE hali_status_t hali_context_run(hali_context_t *context);

/* Cancels every invocation of |context| running or pending now: each
 * stops at its next call, branch or await and fails with CANCELLED.  Any
 * thread may call it. */
HALI_API void hali_context_cancel(hali_context_t *context);

/* Runs the context until |invocation| finishes, waiting (blocking) for
 * fences the host or the device will signal, then returns OK — the
 * invocation's own outcome is hali_invocation_status. */
HALI_API HALI_MUST_USE hali_status_t hali_invocation_await(
    hali_invocation_t *invocation);
/* hali_invocation_await for at most |timeout_ns| (HALI_TIMEOUT_INFINITE:
 * no limit; 0 runs at most one slice of ready work).  Returns
 * DEADLINE_EXCEEDED if the invocation has not finished by then: it stays
 * pending, and the host may await it again or cancel it (cancel, then
 * await, before releasing one that may never finish).  The deadline stops
 * VM code at its next call or branch, a few ms late at most.  Work that
 * holds the thread is not interrupted and delays the return until it
 * ends: a host import callback, an await inside a function marked
 * ["blocking"], or a call into another module of the context (which runs
 * to completion on a blocking stack). */
HALI_API HALI_MUST_USE hali_status_t hali_invocation_await_for(
    hali_invocation_t *invocation, int64_t timeout_ns);
/* Whether it has finished (successfully or not). */
HALI_API bool hali_invocation_is_done(const hali_invocation_t *invocation);
/* Its outcome once done: OK, or an owned copy of its failure;
 * FAILED_PRECONDITION while it has not finished. */
HALI_API HALI_MUST_USE hali_status_t hali_invocation_status(
    const hali_invocation_t *invocation);
/* Copies its results (owned by the caller; refs retained) once it
 * finished successfully; |result_count| must equal the function's. */
HALI_API HALI_MUST_USE hali_status_t hali_invocation_results(
    const hali_invocation_t *invocation, hali_variant_t *results,
    size_t result_count);
/* A fence signalled when the invocation returns, failed when it fails;
 * borrowed (retain it to keep it past the invocation). */
HALI_API hali_fence_t *hali_invocation_fence(
    const hali_invocation_t *invocation);
/* Cancels it (see hali_context_cancel); any thread may call it. */
HALI_API void hali_invocation_cancel(hali_invocation_t *invocation);
/* The host is done with it; a pending invocation still runs to the end
 * (or is cancelled when the context goes). */
HALI_API void hali_invocation_release(hali_invocation_t *invocation);

/* ======================================================================== */
/* Parameters                                                                */
/* ======================================================================== */

/* Parameters are tensors kept in files beside a module (weights), named
 * by scope and key (`global @w : tensor<64x32xf32> = parameter
 * "model"::"w"`) and bound when a context is created with them
 * (hali_context_params_t.parameters).  Formats: .safetensors (every tensor
 * of the file, by its name) and .npy (one tensor, keyed by the file name
 * without directory and extension).  Files are memory-mapped read-only;
 * a tensor whose data is 64-byte aligned in the file is used in place,
 * without a copy, others are copied once when the context is created.
 * See doc/embedding.md "Parameters". */

/* An empty, ref-counted set of parameter files; the caller owns it. */
HALI_API HALI_MUST_USE hali_status_t hali_parameters_create(
    hali_parameters_t **out_parameters);
HALI_API void hali_parameters_retain(hali_parameters_t *parameters);
HALI_API void hali_parameters_release(hali_parameters_t *parameters);

/* Maps the file at |path| and adds its tensors under |scope| (repeatable:
 * a scope may hold several files; "" is a scope too).  The whole index is
 * checked now.  Errors: NOT_FOUND when the file cannot be opened;
 * INVALID_ARGUMENT for an extension other than .safetensors and .npy, or
 * a key already in |scope| from another file (naming both); DATA_LOSS for
 * a corrupt or truncated file (naming it and, where there is one, the
 * key); OUT_OF_RANGE for a tensor's bytes outside the file;
 * FAILED_PRECONDITION once a context was created with |parameters|.  On
 * error |parameters| is unchanged.  Not thread-safe: add every file
 * before sharing the set. */
HALI_API HALI_MUST_USE hali_status_t hali_parameters_add_file(
    hali_parameters_t *parameters, const char *scope, const char *path);

/* The number of files added so far (all scopes). */
HALI_API size_t hali_parameters_file_count(
    const hali_parameters_t *parameters);

/* A .npy file's header: its element type, shape and where its data is.
 * (hali's one .npy reader: parameter files and `hali run --input=@x.npy`
 * use it.) */
typedef struct hali_npy_info_s {
  uint32_t element_type; /* a hali_element_type_t */
  size_t rank;
  int64_t shape[64];
  size_t data_offset; /* of the data in the file */
  size_t data_length; /* bytes: exactly what the shape needs */
} hali_npy_info_t;

/* Reads the header of the |size| bytes at |data| (a whole .npy file;
 * |name| names it in errors): format 1.0 to 3.0, little-endian, C order.
 * INVALID_ARGUMENT "NAME: not a valid .npy file: WHY" otherwise. */
HALI_API HALI_MUST_USE hali_status_t hali_npy_parse(const void *data,
                                                   size_t size,
                                                   const char *name,
                                                   hali_npy_info_t *out_info);
/* The .npy descr code of element type |type| ("f4", "i1", "b1", "V2" for
 * bf16), or NULL when numpy has none. */
HALI_API const char *hali_npy_descr(uint32_t type);

/* ======================================================================== */
/* Buffer views                                                              */
/* ======================================================================== */

/* Element types: (numerical type << 24) | bits, as in doc/hal.md. */
typedef uint32_t hali_element_type_t;
#define HALI_ELEMENT_TYPE_I1 0x10000001u
#define HALI_ELEMENT_TYPE_I8 0x10000008u
#define HALI_ELEMENT_TYPE_I16 0x10000010u
#define HALI_ELEMENT_TYPE_I32 0x10000020u
#define HALI_ELEMENT_TYPE_I64 0x10000040u
#define HALI_ELEMENT_TYPE_SI8 0x11000008u
#define HALI_ELEMENT_TYPE_SI16 0x11000010u
#define HALI_ELEMENT_TYPE_SI32 0x11000020u
#define HALI_ELEMENT_TYPE_SI64 0x11000040u
#define HALI_ELEMENT_TYPE_U8 0x12000008u
#define HALI_ELEMENT_TYPE_U16 0x12000010u
#define HALI_ELEMENT_TYPE_U32 0x12000020u
#define HALI_ELEMENT_TYPE_U64 0x12000040u
#define HALI_ELEMENT_TYPE_BOOL 0x13000008u
#define HALI_ELEMENT_TYPE_F16 0x21000010u
#define HALI_ELEMENT_TYPE_F32 0x21000020u
#define HALI_ELEMENT_TYPE_F64 0x21000040u
#define HALI_ELEMENT_TYPE_BF16 0x22000010u

/* Element type |i| of the list above (0 <= i < 18, in that order), 0
 * past the end: for a binding that builds its own table of types (numpy
 * dtypes) without copying the list.  Any thread. */
HALI_API hali_element_type_t hali_element_type_at(size_t i);

/* Bytes one element occupies: ceil(bits / 8) (i1 takes a byte). */
static inline size_t hali_element_type_byte_size(hali_element_type_t type) {
  return ((type & 0xFFu) + 7) / 8;
}
/* The name hali prints for |type| ("f32", "si8", "bool"); NULL for an
 * unknown code.  Static storage. */
HALI_API const char *hali_element_type_name(hali_element_type_t type);
/* Parses a name of |length| bytes of |text| (as printed by
 * hali_element_type_name; "ui8" is accepted for "u8").  INVALID_ARGUMENT
 * naming the text for an unknown name; |*out_type| is then 0. */
HALI_API HALI_MUST_USE hali_status_t hali_element_type_parse(
    const char *text, size_t length, hali_element_type_t *out_type);
/* Writes the text of one element of |type| (its byte_size bytes at
 * |element|, little-endian) into |buffer| of |capacity| bytes (64 always
 * suffice), NUL-terminated, as hali prints values: integers in decimal
 * (signless ones as signed), bool as 0/1, floats in the shortest text that
 * reads back to the same value of |type| ("nan", "inf", "-inf" by name).
 * "?" for an unknown type. */
HALI_API void hali_element_format(hali_element_type_t type,
                                  const void *element, char *buffer,
                                  size_t capacity);
/* Parses one element of |type| from |length| bytes of |text| into
 * |out_element| (byte_size bytes): integers in decimal or 0x hex, never
 * octal, within the type's range (signless integers also take the
 * unsigned spelling, 0xffffffff for an i32 -1); bool and unsigned take
 * true/false too; floats as strtod reads them, rounded to the type.
 * INVALID_ARGUMENT ("'300' is not a valid i8") otherwise. */
HALI_API HALI_MUST_USE hali_status_t hali_element_parse(
    hali_element_type_t type, const char *text, size_t length,
    void *out_element);
/* The value of one element of |type| as a double (integers converted,
 * unsigned ones as unsigned); NaN for an unknown type. */
HALI_API double hali_element_to_f64(hali_element_type_t type,
                                    const void *element);

/* Bytes a dense row-major view of |rank| dims |shape| (borrowed) and
 * |element_type| holds.  INVALID_ARGUMENT for an unknown element type, a
 * negative dim or a rank above 64; OUT_OF_RANGE when the element count or
 * byte size overflows 64 bits (naming the dim).  Any thread. */
HALI_API HALI_MUST_USE hali_status_t hali_buffer_view_compute_size(
    hali_element_type_t element_type, size_t rank, const int64_t *shape,
    uint64_t *out_byte_length);

/* Creates a dense row-major view of |rank| dims |shape| (borrowed) and
 * |element_type| in new host-visible memory of |device|'s allocator (its
 * memory limit applies), filled with |data_size| bytes copied from |data|
 * (which must be exactly the view's byte size), or zeroed when |data| is
 * NULL.  INVALID_ARGUMENT for an unknown element type, a negative dim or a
 * size mismatch; RESOURCE_EXHAUSTED beyond the memory limit.  The caller
 * owns |*out_view|. */
HALI_API HALI_MUST_USE hali_status_t hali_buffer_view_create(
    hali_device_t *device, hali_element_type_t element_type, size_t rank,
    const int64_t *shape, const void *data, size_t data_size,
    hali_buffer_view_t **out_view);
HALI_API void hali_buffer_view_retain(hali_buffer_view_t *view);
HALI_API void hali_buffer_view_release(hali_buffer_view_t *view);
HALI_API size_t hali_buffer_view_rank(const hali_buffer_view_t *view);
/* Dim |i|; 0 when out of range. */
HALI_API int64_t hali_buffer_view_dim(const hali_buffer_view_t *view,
                                      size_t i);
HALI_API hali_element_type_t hali_buffer_view_element_type(
    const hali_buffer_view_t *view);
HALI_API uint64_t hali_buffer_view_element_count(
    const hali_buffer_view_t *view);
HALI_API uint64_t hali_buffer_view_byte_length(const hali_buffer_view_t *view);
/* Copies the view's bytes (byte_length of them) into |target| of
 * |target_size| bytes; OUT_OF_RANGE if it is too small.  The bytes must
 * not be written by device work at the same time (await its fence). */
HALI_API HALI_MUST_USE hali_status_t hali_buffer_view_read(
    const hali_buffer_view_t *view, void *target, size_t target_size);

/* ======================================================================== */
/* Fences                                                                    */
/* ======================================================================== */

/* Creates an unsignalled fence (a new timeline semaphore at 0, the fence
 * at 1).  The caller owns |*out_fence|. */
HALI_API HALI_MUST_USE hali_status_t hali_fence_create(
    hali_fence_t **out_fence);
HALI_API void hali_fence_retain(hali_fence_t *fence);
HALI_API void hali_fence_release(hali_fence_t *fence);
/* Signals it (waking invocations and device work waiting on it).  Returns
 * the failure of a failed fence.  Any thread. */
HALI_API HALI_MUST_USE hali_status_t hali_fence_signal(hali_fence_t *fence);
/* Fails it with |status| (consumed; OK becomes UNKNOWN).  Any thread. */
HALI_API void hali_fence_fail(hali_fence_t *fence, hali_status_t status);
/* |*out_ready| = signalled (or failed); returns an owned copy of the
 * failure, if any.  Never blocks. */
HALI_API HALI_MUST_USE hali_status_t hali_fence_query(hali_fence_t *fence,
                                                      bool *out_ready);
/* Blocks until signalled, for at most |timeout_ns|; OK, the failure, or
 * DEADLINE_EXCEEDED. */
HALI_API HALI_MUST_USE hali_status_t hali_fence_await(hali_fence_t *fence,
                                                      int64_t timeout_ns);

/* ======================================================================== */
/* Inspection (api/introspect.c)                                             */
/* ======================================================================== */

/* Blocks until every submission the context's programs made to its device
 * queue so far has executed, for at most |timeout_ns| (negative: no
 * limit); DEADLINE_EXCEEDED naming the number still pending.  For a host
 * about to read results a program returned without awaiting the work
 * that writes them (hali run does it before printing). */
HALI_API HALI_MUST_USE hali_status_t hali_context_wait_idle(
    hali_context_t *context, int64_t timeout_ns);

typedef enum hali_describe_format_e {
  HALI_DESCRIBE_TEXT = 0, /* for people (hali dump) */
  HALI_DESCRIBE_JSON = 1, /* one JSON object (hali dump --json) */
} hali_describe_format_t;

/* Describes |module| into |*out_text| (the caller's, to release with
 * hali_free()): its name, file, format and version, size, whether it
 * carries debug info, every function with its signature as written
 * (tensor types included) and after the load-time passes (f$async forms
 * included), imports, globals as written (type, mutable, parameter scope
 * and key, bytes of a static tensor), executables with format, library,
 * exports, workgroup sizes and interface layouts, and rodata with sizes.
 * The JSON keys: module, file, format, format_version, bytes, debug_info,
 * source, functions_as_written, functions, imports ([{name, signature,
 * arguments, results, ...}]), globals ([{name, type, mutable, parameter:
 * {scope, key} or null, bytes}]), parameter_bytes, executables ([{name, format, library, exports:
 * [{name, signature, symbol, workgroup_size, bindings, constants}]}]),
 * rodata ([{name, kind, bytes}]), rodata_bytes. */
HALI_API HALI_MUST_USE hali_status_t hali_module_describe(
    const hali_module_t *module, hali_describe_format_t format,
    char **out_text);

/* For each function of the loaded module (|count| must be
 * hali_module_function_count), whether the load-time passes made it (an
 * f$async form, say) rather than the module's author: |out_generated[i]|
 * for function i.  INVALID_ARGUMENT for another |count|. */
HALI_API HALI_MUST_USE hali_status_t hali_module_generated_functions(
    const hali_module_t *module, bool *out_generated, size_t count);

/* ======================================================================== */
/* Host memory without copies (api/values.c)                                 */
/* ======================================================================== */

/* What hali may do to host memory imported with hali_buffer_view_import. */
typedef enum hali_import_access_e {
  /* Read only: every write into it fails with PERMISSION_DENIED — host
   * writes through hali, fills, copies and updates, hal.buffer.store, and
   * passing it to a mutable tensor parameter (which the function would
   * write its result into).  Immutable tensor parameters are never written
   * (copy-on-write copies before a kernel writes in place), so a read-only
   * import may be passed to any of them. */
  HALI_IMPORT_READ_ONLY = 0,
  /* Read and write: programs may write into it like into any buffer. */
  HALI_IMPORT_READ_WRITE = 1,
} hali_import_access_t;

/* Called once, with |user|, when hali's last reference to imported
 * memory goes away (a buffer view, or any buffer or view a program made
 * of it).  May run on any thread that drops a reference, a device queue
 * thread included. */
typedef void (*hali_release_callback_t)(void *user);

/* Makes a dense row-major view of |rank| dims |shape| (borrowed) and
 * |element_type| over |data_size| bytes of the caller's memory at |data|,
 * without copying them: programs read (and, with HALI_IMPORT_READ_WRITE,
 * write) that memory in place.  |data_size| must be exactly the view's
 * byte size (hali_buffer_view_compute_size) and |data| aligned to the
 * element's byte size (64-byte alignment, as hali's own allocations have,
 * is best for kernels); |data| may be NULL only for an empty view.  The
 * caller keeps ownership of the memory and must keep it valid, and not
 * free or reuse it, until |release(user)| runs (|release| may be NULL);
 * the bytes are not synchronized (do not write them while device work
 * reads them).  Errors: INVALID_ARGUMENT for an unknown element type or
 * access, a negative dim, a rank above 64, a size mismatch or a
 * misaligned pointer; OUT_OF_RANGE when the size overflows 64 bits.  On
 * error nothing is created and |release| is not called.  The caller owns
 * |*out_view|.  Any thread. */
HALI_API HALI_MUST_USE hali_status_t hali_buffer_view_import(
    hali_element_type_t element_type, size_t rank, const int64_t *shape,
    void *data, size_t data_size, hali_import_access_t access,
    hali_release_callback_t release, void *user,
    hali_buffer_view_t **out_view);

/* Whether writes into |view|'s storage are allowed (false for read-only
 * imports, module constants, parameter mappings and NULL). */
HALI_API bool hali_buffer_view_is_writable(const hali_buffer_view_t *view);

/* The storage of |view| in place, without copying: |*out_data| points at
 * its |*out_size| (= byte_length) bytes, dense row-major.  The pointer is
 * valid while the caller holds a reference to |view| (and its storage is
 * committed: a program's hal.device.queue.dealloca of it ends it).  With
 * |writable| the caller may write through it, which fails with
 * PERMISSION_DENIED for read-only storage.  Other errors:
 * PERMISSION_DENIED for storage the host cannot map (not host-visible or
 * without mapping usage), FAILED_PRECONDITION for uncommitted storage.
 * As for hali_buffer_view_read, device work that writes the view must
 * have finished (await its fence, or hali_context_wait_idle). */
HALI_API HALI_MUST_USE hali_status_t hali_buffer_view_map(
    hali_buffer_view_t *view, bool writable, void **out_data,
    size_t *out_size);

#ifdef __cplusplus
}
#endif

#endif /* HALI_HALI_H */
