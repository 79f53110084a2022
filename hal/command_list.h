/* hali HAL — private: the recorded form of a command buffer, shared by the
 * recorder (hal/command_buffer.c) and the replay loop (hal/command_exec.c).
 *
 * A command list is one byte array of variable-size records, each starting
 * with a header and padded to 8 bytes:
 *
 *   +--------+--------+------------------------------------+
 *   | type:4 | size:4 | type-specific fields ...  (padding) |
 *   +--------+--------+------------------------------------+
 *   ^ record            ^ size bytes from the record start ^
 *
 * Buffers and executables named by records are retained by the command
 * buffer (its resource list) for as long as it lives.
 */
#ifndef HALI_HAL_COMMAND_LIST_H
#define HALI_HAL_COMMAND_LIST_H

#include <stdatomic.h>

#include "hal/binding_table.h"
#include "hal/channel.h"
#include "hal/command_buffer.h"

typedef enum hali_hal_command_type_e {
  HALI_HAL_COMMAND_FILL = 1,
  HALI_HAL_COMMAND_COPY,
  HALI_HAL_COMMAND_UPDATE,
  HALI_HAL_COMMAND_PUSH_CONSTANTS,
  HALI_HAL_COMMAND_PUSH_DESCRIPTOR_SET,
  HALI_HAL_COMMAND_DISPATCH,
  HALI_HAL_COMMAND_BARRIER,
  HALI_HAL_COMMAND_COLLECTIVE,
  /* push_constants whose values are constant slots (hal/binding_table.h):
   * the layout of hali_hal_command_push_constants_t, |values| slot
   * indices. */
  HALI_HAL_COMMAND_PUSH_CONSTANT_SLOTS,
} hali_hal_command_type_t;

typedef struct hali_hal_command_header_t {
  uint32_t type; /* hali_hal_command_type_t */
  uint32_t size; /* bytes of the whole record, a multiple of 8 */
} hali_hal_command_header_t;

typedef struct hali_hal_command_fill_t {
  hali_hal_command_header_t header;
  hali_hal_buffer_t *target;
  hali_hal_device_size_t offset;
  hali_hal_device_size_t length;
  uint32_t pattern;        /* masked to pattern_length bytes */
  uint32_t pattern_length; /* 1, 2 or 4 */
  /* hali_hal_command_buffer_fill_slot: constant slot + 1 whose value (then
   * masked) is the pattern; 0: |pattern|. */
  uint32_t pattern_slot;
} hali_hal_command_fill_t;

typedef struct hali_hal_command_copy_t {
  hali_hal_command_header_t header;
  hali_hal_buffer_t *source;
  hali_hal_device_size_t source_offset;
  hali_hal_buffer_t *target;
  hali_hal_device_size_t target_offset;
  hali_hal_device_size_t length;
} hali_hal_command_copy_t;

typedef struct hali_hal_command_update_t {
  hali_hal_command_header_t header;
  hali_hal_buffer_t *target;
  hali_hal_device_size_t offset;
  hali_hal_device_size_t length;
  uint8_t data[]; /* |length| bytes */
} hali_hal_command_update_t;

typedef struct hali_hal_command_push_constants_t {
  hali_hal_command_header_t header;
  uint32_t offset; /* in constants */
  uint32_t count;
  uint32_t values[];
} hali_hal_command_push_constants_t;

typedef struct hali_hal_command_binding_t {
  uint32_t ordinal;
  hali_hal_buffer_t *buffer;
  hali_hal_device_size_t offset;
  hali_hal_device_size_t length; /* resolved: never WHOLE_BUFFER */
} hali_hal_command_binding_t;

typedef struct hali_hal_command_push_descriptor_set_t {
  hali_hal_command_header_t header;
  uint32_t count;
  hali_hal_command_binding_t bindings[];
} hali_hal_command_push_descriptor_set_t;

typedef struct hali_hal_command_dispatch_t {
  hali_hal_command_header_t header;
  hali_hal_executable_t *executable;
  uint32_t ordinal;
  uint32_t workgroup_count[3];
} hali_hal_command_dispatch_t;

typedef struct hali_hal_command_collective_t {
  hali_hal_command_header_t header;
  hali_hal_channel_t *channel;
  hali_hal_collective_t op;
  hali_hal_buffer_t *send; /* NULL when this rank sends nothing */
  hali_hal_device_size_t send_offset;
  hali_hal_device_size_t send_length;
  hali_hal_buffer_t *recv; /* NULL when this rank receives nothing */
  hali_hal_device_size_t recv_offset;
  hali_hal_device_size_t recv_length;
} hali_hal_command_collective_t;

/* The replay program of a reusable command buffer (hal/command_exec.c,
 * hali_hal_command_list_compile): made once at finalize from the list, it
 * holds per command what a replay would otherwise recompute from the push
 * state each time: for a dispatch, its export, the constants and the
 * bindings it sees (each binding already reduced to an offset into its
 * root buffer's storage).  Read-only once made, so replays on several
 * queues share it. */
typedef struct hali_hal_replay_binding_t {
  hali_hal_buffer_t *buffer;     /* as bound (the command buffer holds it) */
  hali_hal_device_size_t offset; /* as bound, into |buffer| */
  hali_hal_device_size_t base;   /* into the root buffer's storage */
  size_t length;
} hali_hal_replay_binding_t;

typedef struct hali_hal_replay_step_t {
  const hali_hal_command_header_t *record;
  /* Dispatches only (else NULL). */
  const hali_hal_executable_export_t *e;
  const uint32_t *constants;                 /* e->constant_count values */
  const hali_hal_replay_binding_t *bindings; /* e->binding_count */
  /* Bit i: constants[i] is a constant slot index, its value the table's
   * (hal/binding_table.h); 0 for most dispatches. */
  uint64_t constant_slots;
} hali_hal_replay_step_t;

/* The replay program's flat form (hal/command_exec.c, "The op loop"):
 * one op per command that does something (a dispatch of a non-empty
 * grid, a fill, copy, update or collective; pushes, barriers and empty
 * grids have none), each dispatch with its kernel dispatch state built at
 * finalize.  A state's binding pointers are the program's |ptrs|, which
 * the replay holding |claimed| resolves once, before its first op, from
 * the bindings' storage; its lengths and constants never change. */
typedef struct hali_hal_replay_op_t {
  /* One-workgroup dispatch of a C kernel (hali_hal_executable_direct_
   * kernel): called directly when the device lends the replay a worker
   * (hali_hal_replay_worker_t).  NULL: through the dispatch runner. */
  hali_kernel_fn_t fn;
  /* Dispatches: the state (shared by consecutive equal dispatches);
   * NULL for the other commands. */
  const hali_kernel_dispatch_state_t *state;
  const hali_hal_command_header_t *record;
  uint32_t index : 31;   /* of the command in the list */
  uint32_t single : 1;   /* a one-workgroup dispatch (any executable) */
  uint32_t scratch_size; /* dispatches: the export's */
} hali_hal_replay_op_t;

/* A dispatch state whose constants come partly from a binding table's
 * constant slots: each replay fills |values| (what the state reads) from
 * |source| — slot indices where |mask| has a bit, values elsewhere. */
typedef struct hali_hal_replay_slotted_t {
  uint32_t *values;
  const uint32_t *source;
  uint64_t mask;
  uint32_t count;
} hali_hal_replay_slotted_t;

typedef struct hali_hal_replay_program_t {
  hali_hal_replay_step_t *steps; /* one per command, in order */
  hali_hal_replay_binding_t *bindings;
  uint32_t *constants;
  size_t binding_count; /* entries of |bindings| (and |ptrs|, |lengths|) */
  /* The op loop (NULL |ops|: out of memory at finalize, or more than
   * 2^31 - 1 commands; replays take the steps). */
  hali_hal_replay_op_t *ops;
  size_t op_count;
  hali_kernel_dispatch_state_t *states;
  void **ptrs;          /* per binding: resolved by the claiming replay */
  size_t *lengths;      /* per binding */
  uint32_t max_scratch; /* the largest scratch_size among the ops */
  hali_hal_replay_slotted_t *slotted; /* states with constant slots */
  size_t slotted_count;
  uint32_t *slot_values; /* what those states read, per replay */
  /* Held by the replay that resolves and reads |ptrs|; a replay that
   * finds it held (the same command buffer replayed on two queues at
   * once) takes the steps. */
  atomic_bool claimed;
} hali_hal_replay_program_t;

/* What a device lends a replay to call one-workgroup C kernels directly:
 * the worker id they run as and its scratch (|scratch_size| bytes, 64-byte
 * aligned).  A kernel needing more scratch goes through the runner. */
typedef struct hali_hal_replay_worker_t {
  uint32_t worker_id;
  void *scratch;
  size_t scratch_size;
} hali_hal_replay_worker_t;

struct hali_hal_command_buffer_t {
  hali_ref_t ref;
  hali_hal_command_buffer_mode_bits_t mode;
  hali_hal_command_category_bits_t categories;
  bool finalized;
  /* Set by finalize once every dispatch passed the checks a replay would
   * make (hali_hal_command_list_check_dispatches): replays skip them. */
  bool dispatches_checked;
  /* Reusable command buffers: the replay program (NULL: replays walk the
   * records; one-shot buffers, or out of memory at finalize). */
  hali_hal_replay_program_t *program;
  atomic_bool submitted; /* one-shot: set by the first submission */
  /* The records. */
  uint8_t *data;
  size_t size;
  size_t capacity;
  size_t command_count;
  size_t collective_count; /* collective records among them */
  /* Retained refs (buffers, executables) named by the records. */
  hali_ref_t **resources;
  size_t resource_count;
  size_t resource_capacity;
  /* The executable of the last dispatch recorded, and the root of the last
   * subspan push_binding recorded (both among the resources). */
  const hali_hal_executable_t *last_executable;
  const hali_hal_buffer_t *last_root;
  /* Recording-time view of the dispatch state, to validate dispatches. */
  uint64_t constants_set;   /* bit i: constant i pushed */
  uint32_t bindings_set;    /* bit i: binding i pushed */
  hali_hal_command_binding_t bindings[HALI_HAL_MAX_BINDINGS];
  /* Where recorded commands are reported ([hal] lines); |line| NULL = off. */
  hali_hal_tracer_t tracer;
  /* Where this command buffer goes when it is destroyed (retained; NULL:
   * freed). */
  hali_hal_command_buffer_cache_t *cache;
  /* Validation mode (hal/validate.h; 0 = off) and its per-command-buffer
   * state (labels, access list), owned. */
  uint8_t validate;
  void *validate_state;
  /* Binding tables (hal/binding_table.h), set by finalize: one past the
   * highest binding and constant slot recorded (0, 0: a plain command
   * buffer), and per binding slot what its table entry must give (owned,
   * |slot_count| entries). */
  uint32_t slot_count;
  uint32_t constant_slot_count;
  struct hali_hal_slot_info_t *slots;
  /* A bound command buffer (hali_hal_command_buffer_bind): the recording
   * it runs (retained; NULL for every other command buffer) and its table,
   * whose arrays it owns and whose buffers it retains. */
  hali_hal_command_buffer_t *base;
  hali_hal_binding_table_t table;
  hali_hal_binding_table_entry_t *table_entries;
  uint32_t *table_constants;
};

/* What a binding slot's table entry must give: at least |length| bytes,
 * |usage|, and writable bytes when a transfer writes the slot. */
typedef struct hali_hal_slot_info_t {
  hali_hal_device_size_t length;
  hali_hal_buffer_usage_bits_t usage;
  bool used;    /* some command names the slot */
  bool written;
} hali_hal_slot_info_t;

/* Finalize: fills |cb|'s slot fields from its records and resources. */
HALI_MUST_USE hali_status_t hali_hal_command_list_collect_slots(
    hali_hal_command_buffer_t *cb);

/* hali_hal_buffer_resolve for a buffer that may be a slot placeholder:
 * its bytes are then |table|'s entry's (which passed
 * hali_hal_binding_table_check). */
HALI_MUST_USE hali_status_t hali_hal_binding_table_resolve(
    const hali_hal_binding_table_t *table, hali_hal_buffer_t *buffer,
    hali_hal_device_size_t offset, hali_hal_device_size_t length,
    uint8_t **out_ptr);

/* Iteration: for (h = first; h; h = next(cb, h)). */
static inline const hali_hal_command_header_t *hali_hal_command_list_first(
    const hali_hal_command_buffer_t *cb) {
  return cb->size ? (const hali_hal_command_header_t *)(const void *)cb->data
                  : NULL;
}
static inline const hali_hal_command_header_t *hali_hal_command_list_next(
    const hali_hal_command_buffer_t *cb, const hali_hal_command_header_t *h) {
  const uint8_t *next = (const uint8_t *)h + h->size;
  return next < cb->data + cb->size
             ? (const hali_hal_command_header_t *)(const void *)next
             : NULL;
}

/* The dispatch state both recording and replay keep while walking the list
 * and validate a dispatch against: set masks plus the bound ranges. */
typedef struct hali_hal_dispatch_bindings_t {
  uint64_t constants_set;
  uint32_t bindings_set;
  const hali_hal_command_binding_t *bindings; /* HALI_HAL_MAX_BINDINGS */
} hali_hal_dispatch_bindings_t;

/* Checks a dispatch of |executable| export |ordinal| against the state:
 * ordinal in range, every declared constant and binding set, every bound
 * range inside its buffer, every bound buffer with DISPATCH usage. */
HALI_MUST_USE hali_status_t hali_hal_dispatch_validate(
    const hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_hal_dispatch_bindings_t *state);

/* Checks a dispatch's workgroup count |x| x |y| x |z| against
 * HALI_HAL_MAX_WORKGROUP_COUNT and HALI_HAL_MAX_WORKGROUPS; OUT_OF_RANGE
 * naming the executable, the export (|ordinal| must be valid) and the
 * dimension or product that is too large (or overflows 64 bits). */
HALI_MUST_USE hali_status_t hali_hal_dispatch_validate_workgroup_count_slow(
    const hali_hal_executable_t *executable, uint32_t ordinal, uint32_t x,
    uint32_t y, uint32_t z);
static inline HALI_MUST_USE hali_status_t
hali_hal_dispatch_validate_workgroup_count(
    const hali_hal_executable_t *executable, uint32_t ordinal, uint32_t x,
    uint32_t y, uint32_t z) {
  /* Inline when every dimension is below 2^16 (the product cannot wrap and
   * only its bound is left to compare). */
  if (HALI_LIKELY((x | y | z) < 65536u &&
                  (uint64_t)x * y * z <= HALI_HAL_MAX_WORKGROUPS))
    return HALI_OK;
  return hali_hal_dispatch_validate_workgroup_count_slow(executable, ordinal,
                                                         x, y, z);
}

/* Workgroups in the grid of a dispatch that passed
 * hali_hal_dispatch_validate_workgroup_count: at most
 * HALI_HAL_MAX_WORKGROUPS, so the product cannot wrap. */
static inline uint64_t hali_hal_dispatch_workgroup_total(
    const hali_kernel_dispatch_state_t *dispatch) {
  return (uint64_t)dispatch->workgroup_count_x * dispatch->workgroup_count_y *
         dispatch->workgroup_count_z;
}

/* Marks a finalized command buffer as submitted: FAILED_PRECONDITION if it
 * is not finalized or is one-shot and was submitted before. */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_begin_submit(
    hali_hal_command_buffer_t *command_buffer);

/* Replays |command_buffer| (hal/command_exec.c) and runs dispatches
 * through |run_dispatch|, which runs every workgroup of one validated
 * dispatch and returns the first failure.  |stop| (NULL: none) is checked
 * before every command and every workgroup (the op loop: before every op,
 * which for a one-workgroup dispatch is before its workgroup): once it is
 * requested the replay ends with its status (hali_hal_stop_status),
 * annotated with where it stopped. */
typedef hali_status_t (*hali_hal_dispatch_runner_t)(
    void *self, hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch, hali_hal_stop_t *stop);
/* Runs, over the whole list, the checks a replay makes before each
 * dispatch (interface: constants and bindings set, binding usage; the
 * workgroup count), with the push state the replay would have: once, at
 * finalize, so that replays need not (the list never changes after). */
HALI_MUST_USE hali_status_t hali_hal_command_list_check_dispatches(
    const hali_hal_command_buffer_t *cb);
/* Makes |cb|'s replay program (after the checks above passed); out of
 * memory leaves none, and replays walk the records instead. */
void hali_hal_command_list_compile(hali_hal_command_buffer_t *cb);
void hali_hal_command_list_program_free(hali_hal_replay_program_t *program);
HALI_MUST_USE hali_status_t hali_hal_command_buffer_execute(
    hali_hal_command_buffer_t *command_buffer,
    hali_hal_dispatch_runner_t run_dispatch, void *runner_self,
    const hali_hal_tracer_t *tracer, hali_hal_stop_t *stop);
/* The same with |table| (checked at submit; NULL: none) supplying the
 * slots, and with |worker| (NULL: none) the one-workgroup C kernels of
 * a reusable command buffer's op loop are called on the calling thread as
 * that worker, with no runner in between.  Only without a tracer (NULL)
 * and with the device's own runner (not validation mode's, which wraps
 * each dispatch); while a guarded dispatch (hal/validate.h) runs anywhere,
 * each dispatch goes through |run_dispatch| as before. */
HALI_MUST_USE hali_status_t hali_hal_command_buffer_execute_lent(
    hali_hal_command_buffer_t *command_buffer,
    const hali_hal_binding_table_t *table,
    const hali_hal_replay_worker_t *worker,
    hali_hal_dispatch_runner_t run_dispatch, void *runner_self,
    const hali_hal_tracer_t *tracer, hali_hal_stop_t *stop);
/* The scratch a worker lent to |command_buffer|'s replay needs so that
 * every direct call can use it (0: none, or no op loop). */
static inline size_t hali_hal_command_buffer_replay_scratch(
    const hali_hal_command_buffer_t *command_buffer) {
  const hali_hal_replay_program_t *p = command_buffer->program;
  return p && p->ops ? p->max_scratch : 0;
}
/* Whether |command_buffer| replays through the op loop. */
static inline bool hali_hal_command_buffer_has_op_loop(
    const hali_hal_command_buffer_t *command_buffer) {
  const hali_hal_replay_program_t *p = command_buffer->program;
  return p && p->ops;
}

/* Reports workgroups [begin, end) of a dispatch, run on |tid| since |t0|. */
void hali_hal_trace_dispatch(const hali_hal_tracer_t *t,
                             hali_hal_executable_t *executable,
                             uint32_t ordinal, uint32_t tid, uint64_t begin,
                             uint64_t end, int64_t t0);

/* Runs workgroups with linear index [begin, end) of a dispatch (x fastest)
 * on the calling thread as worker |worker_id|, with |scratch| of
 * |scratch_size| bytes.  Returns the first failure, annotated with the
 * executable, export and workgroup.  Before each workgroup it checks
 * |stop| (NULL: none): a requested stop (or a passed deadline) abandons
 * the rest of the dispatch with the stop's status (CANCELLED,
 * DEADLINE_EXCEEDED, ...) naming the workgroup it did not start. */
HALI_MUST_USE hali_status_t hali_hal_dispatch_run_workgroups(
    hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch, uint64_t begin, uint64_t end,
    uint32_t worker_id, void *scratch, size_t scratch_size,
    hali_hal_stop_t *stop);

#endif /* HALI_HAL_COMMAND_LIST_H */
