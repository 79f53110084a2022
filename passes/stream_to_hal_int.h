/* hali — what the two halves of stream-to-hal share (private to
 * passes/stream_to_hal.c and passes/schedule.c): the per-tensor facts the
 * analysis finds, the lowering state, and the helpers each half calls in
 * the other.
 */
#ifndef HALI_PASSES_STREAM_TO_HAL_INT_H
#define HALI_PASSES_STREAM_TO_HAL_INT_H

#include "base/hal_bits.h"
#include "passes/pass_util.h"
#include "passes/tensor_cfg.h"

#define PASS "stream-to-hal"

typedef enum {
  LT_NONE = 0,
  LT_TRANSIENT,
  LT_IMPORTED,
  LT_CONSTANT,
  LT_RETURNED,
  LT_ALIAS, /* storage of |alias| */
  /* The variable lifetime: a tensor global's storage (|global|), made once
   * per context by the storage initializer; loaded, never allocated. */
  LT_GLOBAL,
  /* A slice that is a view: a subspan of |alias|'s storage, in its own
   * register (bindings and copies use it); fences are |alias|'s
   * (doc/passes.md, "Slices, updates and traces"). */
  LT_VIEW,
  /* A variable (passes/tensor_cfg.h): a tensor carried across blocks in
   * fixed registers; its storage is one of its two own buffers. */
  LT_VAR,
  /* The last version of variable |carry| in its block, made in place in
   * the variable's spare buffer (hal.allocator.reuse). */
  LT_CARRY,
} lifetime_t;

/* How a block's last version of a variable becomes its value (lw_t.fin). */
enum { FIN_IN_PLACE = 0, FIN_CARRY, FIN_COPY };

typedef struct {
  uint8_t lifetime;
  uint32_t alias;
  uint32_t writes;
  uint32_t size;                   /* i64 register, bytes */
  uint32_t dims[HALI_HAL_MAX_RANK]; /* i64 registers */
  int64_t static_bytes;            /* -1: dynamic size */
  uint32_t def, last;              /* liveness interval (positions) */
  bool defined;
  bool const_returned; /* a constant's storage is returned to the caller */
  uint32_t global;     /* LT_GLOBAL: the global's index */
  uint32_t carry;      /* LT_CARRY: the variable */
} tinfo_t;

/* Transients are packed into one slab per region by liveness (see pack). */
enum { SLAB_ALIGN = 64 };

/* A growable list of pairs of u32 (oom: pushes are dropped, |oom| set). */
typedef struct {
  uint32_t (*v)[2];
  uint32_t n, cap;
} hali_u32_pairs_t;

/* Regions recorded once (passes/record_once.c, doc/passes.md "Commands
 * recorded once"): what the storage initializer records for each, in
 * operands that do not name the lowered function's registers. */
enum {
  RO_IMM = 1, /* |v| as an immediate */
  RO_I32,     /* an i32 register holding |v| */
  RO_I64,     /* an i64 register holding |v| */
  RO_SLOT,    /* the placeholder of binding slot |v| */
  RO_EXE,     /* executable |v| (hal.executable.get) */
  RO_RODATA,  /* rodata |v| */
  RO_CMD,     /* the command buffer being recorded */
  RO_GLOBAL,  /* the buffer immutable global |v| holds (loaded once) */
};
typedef struct {
  uint8_t kind;
  int64_t v;
} ro_operand_t;
typedef struct {
  uint16_t op;
  uint32_t n, line;
  ro_operand_t *o;
} ro_insn_t;
typedef struct {
  uint64_t length;
  uint32_t usage;
} ro_slot_t;
typedef struct {
  uint32_t global; /* the !hal.command_buffer global it is kept in */
  uint32_t cats, line;
  ro_slot_t *slots;
  uint32_t nslots;
  ro_insn_t *insns;
  uint32_t ninsns;
} ro_recording_t;
typedef struct {
  ro_recording_t *v;
  uint32_t n, cap;
  uint32_t first_global; /* the globals are added after lowering, in order */
  char **names;          /* their names, one per recording */
  bool oom;
} ro_state_t;

typedef struct {
  hali_ir_module_t *m;
  hali_ir_func_t *f;
  uint32_t nregs; /* registers before lowering (tinfo size) */
  /* The function asks for its regions to be recorded once
   * (HALI_ATTR_RECORD_ONCE, one block); the module's recordings; the
   * function's regions so far. */
  bool record_once;
  ro_state_t *ro;
  uint32_t regions;
  tinfo_t *t;
  uint32_t device, allocator, *exes;
  uint32_t cur; /* fence the next submission waits on; UINT32_MAX = none */
  hali_insn_list_t pre, cmds, out;
  bool open, concurrent, pending_barrier, any_cmd;
  uint32_t cmd, cats, line;
  uint32_t index;       /* instruction being lowered (block position) */
  hali_status_t err;    /* sticky: the first error found while emitting */
  /* Per module global: the !hal.fence global holding the timepoint of its
   * last store (tensor globals), else UINT32_MAX. */
  const uint32_t *ready;
  /* The constant pool (doc/passes.md, "Constants uploaded once"): per
   * rodata its offset in the pool (UINT64_MAX: not pooled), the pool's
   * global and its upload fence's, and the register holding the pool in
   * the function being lowered (UINT32_MAX until its first constant). */
  const uint64_t *pool_offset;
  uint32_t pool_global, pool_ready;
  uint32_t pool;
  /* Fence wiring (doc/passes.md, "Independent regions"): a region waits
   * only for the regions whose storage it reads or overwrites.  Storage is
   * named by a key: a storage root (< nregs), or nregs + g for tensor
   * global g (every load of g shares its storage). */
  uint32_t base;       /* the tensor.wait fence; UINT32_MAX: none (null) */
  uint32_t nkeys;
  uint32_t *wf;        /* per key: the fence of its last writer, or none */
  uint8_t *accw;       /* per key, this region: 1 read, 2 written */
  uint32_t *acc;       /* the keys this region touched */
  uint32_t nacc;
  hali_u32_pairs_t rd;   /* (key, fence of a region reading it since) */
  hali_u32_pairs_t tips; /* (fence, 0): fences no later one waits on */
  hali_u32_pairs_t fb;   /* (region fence, the base it waited for) */
  bool sealed;         /* an `execute {}` ended: no more commands join it */
  uint32_t pool_fence; /* the constant pool's upload fence register */
  uint32_t *pending;    /* static-size transients awaiting the region's slab */
  uint32_t npending;
  /* Control flow (doc/passes.md, "Control flow"): the analysis, the
   * fence every block after the entry starts from (the join of all work
   * before it), each variable's spare buffer register (per register,
   * UINT32_MAX: none), and per fin entry how it lands (FIN_*). */
  const hali_tcfg_t *cfg;
  uint32_t tl;
  uint32_t *spare;
  uint8_t *fin_kind;
  uint32_t block; /* the block being lowered */
  hali_insn_list_t init; /* set-up the entry's end runs for later blocks */
  /* Per register below nregs: the epoch of the last region whose recorded
   * commands read it (rewrites_recorded); commands [0, cmd_scanned) of
   * the open region are marked already. */
  uint32_t *cmd_read;
  uint32_t cmd_epoch, cmd_scanned;
  /* Constants already materialized (registers are never rewritten). */
  uint32_t nconst;
  struct {
    hali_type_t type;
    int64_t v;
    uint32_t reg;
  } consts[256];
} lw_t;

/* ---- Emission helpers (passes/stream_to_hal.c). */

/* The i32 / i64 register holding constant |v|, materialized once into
 * w->pre. */
uint32_t hali_s2h_c32(lw_t *w, int64_t v);
uint32_t hali_s2h_c64(lw_t *w, int64_t v);
/* Register |r|'s name, the stem of the registers derived from it ("t" if
 * none); messages name |r| with hali_ir_reg_name. */
const char *hali_s2h_rname(const lw_t *w, uint32_t r);
/* Emits `cond_fail %cond, OUT_OF_RANGE, "@f: message"`. */
void hali_s2h_fail_if(lw_t *w, uint32_t cond, const char *fmt, ...)
    HALI_PRINTF(3, 4);

/* ---- The analysis and storage (passes/schedule.c). */

/* The storage root of tensor |r| (following aliases; a view is a root of
 * its own: the register holding its subspan). */
uint32_t hali_s2h_root(const lw_t *w, uint32_t r);
/* The root whose storage |r|'s bytes are in (following views too). */
uint32_t hali_s2h_base_root(const lw_t *w, uint32_t r);
/* Lifetimes, single assignment, one block. */
HALI_MUST_USE hali_status_t hali_s2h_analyse(lw_t *w);
/* Liveness intervals of storage roots (tinfo_t def/last). */
void hali_s2h_liveness(lw_t *w);
/* Records tensor |r|'s dims and size, checking them (w->err). */
void hali_s2h_set_shape(lw_t *w, uint32_t r, const hali_ir_operand_t *dyn,
                        bool check_dims);
/* set_shape, then return its error, if any, from the calling lowering. */
#define SET_SHAPE(w, r, dyn, check)                                            \
  do {                                                                         \
    hali_s2h_set_shape(w, r, dyn, check);                                               \
    if ((w)->err) {                                                            \
      hali_status_t e_ = (w)->err;                                             \
      (w)->err = HALI_OK;                                                      \
      return e_;                                                               \
    }                                                                          \
  } while (0)

/* Buffer register |r| = variable buffer |spare| when it is exactly |size|
 * bytes (an i64 register), else a fresh one (hal.allocator.reuse). */
void hali_s2h_reuse(lw_t *w, uint32_t r, uint32_t spare, uint32_t size);
/* Gives tensor |r| storage according to its lifetime. */
void hali_s2h_allocate(lw_t *w, uint32_t r);
/* Storage for the transients of the region being closed at w->index. */
void hali_s2h_pack(lw_t *w);

/* ---- Regions recorded once (passes/record_once.c). */

/* The function attribute that asks for it. */
#define HALI_ATTR_RECORD_ONCE "record_once"
/* At the close of a region whose setup is in w->out and commands in
 * w->cmds: when every scalar the commands take is known at load (or is a
 * push constant or fill pattern, which become constant slots) and every
 * buffer range's length is, records them for the storage initializer on
 * binding slots (a buffer per slot; a run-time offset gets a slot of its
 * own, bound to a subspan), emits the bind of the kept recording into
 * w->out instead of w->cmd's create/commands/finalize, empties w->cmds
 * and returns true; else changes nothing and returns false. */
bool hali_s2h_record_once(lw_t *w);
/* Emits the recordings of |ro| into |l| of |f| (the storage initializer
 * of |m|, whose device register is |device|): each recorded on its
 * placeholders, finalized and stored to its global. */
void hali_s2h_emit_recordings(hali_ir_module_t *m, hali_ir_func_t *f,
                              hali_insn_list_t *l, uint32_t device,
                              const ro_state_t *ro);
/* Drops the pure instructions of |f|'s one block whose results nothing
 * reads (after its regions were bound: the per-call subspans of the slab
 * the recordings replaced, their sizes, ...). */
void hali_s2h_drop_unused(hali_ir_func_t *f);
void hali_s2h_ro_free(ro_state_t *ro);

#endif /* HALI_PASSES_STREAM_TO_HAL_INT_H */
