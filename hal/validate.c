/* hali HAL — validation mode (see hal/validate.h and doc/validation.md).
 *
 * State, all under |g_mu|:
 *  - per command buffer (at finalize): one access record per buffer range a
 *    command reads or writes, with its barrier segment and a description;
 *  - per allocated buffer: the accesses of submissions the host has not
 *    seen complete ("pending"), and for fresh buffers the written ranges;
 *  - the submissions the host has not seen complete (|g_subs|), each with
 *    its wait and signal points, so that "B waits (through fences) for A"
 *    is a walk over them.
 * The host "sees" a submission complete when it awaits (or queries ready)
 * a fence with one of its signal points, or waits for the device to be
 * idle; a submission the host sees complete makes the ones it waited for
 * complete too.  Deciding on what the host has *seen* instead of what has
 * happened to finish keeps every finding deterministic on both devices: a
 * program that reads a result without awaiting it is reported even on
 * local-sync, where the work ran inline.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* REG_ERR: whether a fault was a write */
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "base/alloc.h"
#include "hal/binding_table.h"
#include "hal/buffer.h"
#include "hal/semaphore.h"
#include "hal/validate.h"

_Atomic int hali_hal_validate_devices;
_Atomic int hali_hal_validate_guards_active;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------------------ */
/* Reporting. */

hali_status_t hali_hal_validate_report(hali_hal_validate_mode_t mode,
                                       hali_status_t status) {
  if (!status || mode != HALI_HAL_VALIDATE_WARN) return status;
  fprintf(stderr, "hali: warning: %s\n", hali_status_message(status));
  hali_status_free(status);
  return HALI_OK;
}

static hali_status_t finding(const char *fmt, ...) HALI_PRINTF(1, 2);
static hali_status_t finding(const char *fmt, ...) {
  char text[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  return hali_status_make(HALI_STATUS_FAILED_PRECONDITION, "validation: %s",
                          text);
}

/* ------------------------------------------------------------------------ */
/* Command buffers: labels and access lists. */

typedef struct hali_hal_validate_access_t {
  hali_hal_buffer_t *root;  /* the allocated buffer (the cb retains it) */
  uint64_t offset, length;  /* in |root| */
  bool write;               /* false: read */
  bool check_init;          /* a read that must see written bytes */
  uint32_t command;         /* index in the command buffer */
  uint32_t segment;         /* execution barriers before it */
  char what[200];           /* "command 2 (dispatch @k::@f binding 0, ...)" */
} hali_hal_validate_access_t;

typedef struct hali_hal_validate_cb_t {
  char *pending_label;
  char **labels; /* per command; NULL entries = no label */
  size_t label_capacity;
  hali_hal_validate_access_t *accesses;
  size_t access_count;
} hali_hal_validate_cb_t;

static hali_hal_validate_cb_t *cb_state(hali_hal_command_buffer_t *cb) {
  if (!cb->validate_state)
    cb->validate_state = hali_calloc(1, sizeof(hali_hal_validate_cb_t));
  return cb->validate_state;
}

void hali_hal_validate_set_label(hali_hal_command_buffer_t *cb,
                                 const char *label) {
  hali_hal_validate_cb_t *v = cb_state(cb);
  if (!v) return;
  hali_free(v->pending_label);
  v->pending_label = label ? hali_strdup(label) : NULL;
}

hali_status_t hali_hal_validate_on_record(hali_hal_command_buffer_t *cb,
                                          size_t index) {
  hali_hal_validate_cb_t *v = cb_state(cb);
  if (!v) return hali_status_oom();
  if (index >= v->label_capacity) {
    size_t cap = v->label_capacity ? v->label_capacity * 2 : 16;
    while (cap <= index) cap *= 2;
    char **grown = hali_realloc(v->labels, cap * sizeof(char *));
    if (!grown) return hali_status_oom();
    memset(grown + v->label_capacity, 0,
           (cap - v->label_capacity) * sizeof(char *));
    v->labels = grown;
    v->label_capacity = cap;
  }
  hali_free(v->labels[index]);
  v->labels[index] = v->pending_label;
  v->pending_label = NULL;
  return HALI_OK;
}

void hali_hal_validate_command_buffer_free(hali_hal_command_buffer_t *cb) {
  hali_hal_validate_cb_t *v = cb->validate_state;
  if (!v) return;
  hali_free(v->pending_label);
  for (size_t i = 0; i < v->label_capacity; ++i) hali_free(v->labels[i]);
  hali_free(v->labels);
  hali_free(v->accesses);
  hali_free(v);
  cb->validate_state = NULL;
}

static const char *label_of(const hali_hal_validate_cb_t *v, size_t index) {
  return index < v->label_capacity && v->labels[index] ? v->labels[index]
                                                       : NULL;
}

static hali_status_t add_access(hali_hal_validate_cb_t *v, size_t *cap,
                                hali_hal_buffer_t *buffer, uint64_t offset,
                                uint64_t length, bool write, bool check_init,
                                uint32_t command, uint32_t segment,
                                const char *op) {
  if (!length) return HALI_OK;
  if (v->access_count == *cap) {
    size_t n = *cap ? *cap * 2 : 16;
    hali_hal_validate_access_t *grown =
        hali_realloc(v->accesses, n * sizeof(*grown));
    if (!grown) return hali_status_oom();
    v->accesses = grown;
    *cap = n;
  }
  hali_hal_validate_access_t *a = &v->accesses[v->access_count++];
  a->root = hali_hal_buffer_allocated_buffer(buffer);
  a->offset = hali_hal_buffer_byte_offset(buffer) + offset;
  a->length = length;
  a->write = write;
  a->check_init = check_init;
  a->command = command;
  a->segment = segment;
  const char *label = label_of(v, command);
  snprintf(a->what, sizeof(a->what), "command %u (%s%s%s)", command, op,
           label ? ", " : "", label ? label : "");
  return HALI_OK;
}

static const char *hazard_name(bool earlier_write, bool later_write) {
  if (earlier_write && later_write) return "write-after-write";
  return earlier_write ? "read-after-write" : "write-after-read";
}

/* Intersection of two ranges; false when they do not overlap. */
static bool overlap(uint64_t a, uint64_t al, uint64_t b, uint64_t bl,
                    uint64_t *lo, uint64_t *hi) {
  uint64_t s = a > b ? a : b;
  uint64_t ea = a + al, eb = b + bl; /* validated ranges: no wrap */
  uint64_t e = ea < eb ? ea : eb;
  if (s >= e) return false;
  *lo = s;
  *hi = e;
  return true;
}

hali_status_t hali_hal_validate_finalize(hali_hal_command_buffer_t *cb) {
  hali_hal_validate_cb_t *v = cb_state(cb);
  if (!v) return hali_status_oom();
  hali_free(v->accesses);
  v->accesses = NULL;
  v->access_count = 0;
  size_t cap = 0;
  hali_hal_command_binding_t bindings[HALI_HAL_MAX_BINDINGS];
  uint32_t bound = 0, segment = 0, index = 0;
  hali_status_t s = HALI_OK;
  for (const hali_hal_command_header_t *h = hali_hal_command_list_first(cb);
       h && !s; h = hali_hal_command_list_next(cb, h), ++index) {
    switch ((hali_hal_command_type_t)h->type) {
      case HALI_HAL_COMMAND_FILL: {
        const hali_hal_command_fill_t *c = (const void *)h;
        s = add_access(v, &cap, c->target, c->offset, c->length, true, false,
                       index, segment, "fill");
        break;
      }
      case HALI_HAL_COMMAND_COPY: {
        const hali_hal_command_copy_t *c = (const void *)h;
        s = add_access(v, &cap, c->source, c->source_offset, c->length, false,
                       true, index, segment, "copy source");
        if (!s)
          s = add_access(v, &cap, c->target, c->target_offset, c->length, true,
                         false, index, segment, "copy target");
        break;
      }
      case HALI_HAL_COMMAND_UPDATE: {
        const hali_hal_command_update_t *c = (const void *)h;
        s = add_access(v, &cap, c->target, c->offset, c->length, true, false,
                       index, segment, "update");
        break;
      }
      case HALI_HAL_COMMAND_PUSH_DESCRIPTOR_SET: {
        const hali_hal_command_push_descriptor_set_t *c = (const void *)h;
        for (uint32_t i = 0; i < c->count; ++i) {
          bindings[c->bindings[i].ordinal] = c->bindings[i];
          bound |= 1u << c->bindings[i].ordinal;
        }
        break;
      }
      case HALI_HAL_COMMAND_DISPATCH: {
        const hali_hal_command_dispatch_t *c = (const void *)h;
        const hali_hal_executable_export_t *e =
            hali_hal_executable_export(c->executable, c->ordinal);
        /* An empty grid runs nothing, so it touches nothing. */
        if (!e || !c->workgroup_count[0] || !c->workgroup_count[1] ||
            !c->workgroup_count[2])
          break;
        for (uint32_t i = 0; i < e->binding_count && !s; ++i) {
          if (!(bound & (1u << i))) continue;
          bool ro = (e->read_only_bindings >> i) & 1u;
          char op[120];
          snprintf(op, sizeof(op), "dispatch %s::%s binding %u%s",
                   hali_hal_executable_name(c->executable), e->name, i,
                   ro ? "" : " (written)");
          s = add_access(v, &cap, bindings[i].buffer, bindings[i].offset,
                         bindings[i].length, !ro, ro, index, segment, op);
        }
        break;
      }
      case HALI_HAL_COMMAND_COLLECTIVE: {
        /* Reads what this rank sends, writes what it receives. */
        const hali_hal_command_collective_t *c = (const void *)h;
        char op[64];
        snprintf(op, sizeof(op), "collective %s",
                 hali_hal_collective_kind_name(c->op.kind));
        if (c->send)
          s = add_access(v, &cap, c->send, c->send_offset, c->send_length,
                         false, true, index, segment, op);
        if (!s && c->recv)
          s = add_access(v, &cap, c->recv, c->recv_offset, c->recv_length,
                         true, false, index, segment, op);
        break;
      }
      case HALI_HAL_COMMAND_BARRIER:
        segment++;
        break;
      default:
        break;
    }
  }
  if (s) return s;
  /* Check 1: two accesses of different commands in one barrier segment,
   * overlapping, at least one a write. */
  for (size_t j = 0; j < v->access_count; ++j) {
    const hali_hal_validate_access_t *b = &v->accesses[j];
    for (size_t i = j; i-- > 0;) {
      const hali_hal_validate_access_t *a = &v->accesses[i];
      if (a->segment != b->segment) break;
      if (a->command == b->command || a->root != b->root ||
          !(a->write || b->write))
        continue;
      uint64_t lo, hi;
      if (!overlap(a->offset, a->length, b->offset, b->length, &lo, &hi))
        continue;
      return finding(
          "%s hazard in !hal.command_buffer#%u: %s %s bytes [%" PRIu64
          ", %" PRIu64 ") of !hal.buffer#%u, which %s %s, with no "
          "execution_barrier between them (record "
          "hal.command_buffer.execution_barrier after command %u)",
          hazard_name(a->write, b->write), cb->ref.id, b->what,
          b->write ? "writes" : "reads", lo, hi, hali_hal_trace_id(b->root), a->what,
          a->write ? "writes" : "reads", a->command);
    }
  }
  return HALI_OK;
}

/* ------------------------------------------------------------------------ */
/* Submissions and what the host has seen complete. */

typedef struct vpoint_t {
  hali_hal_semaphore_t *semaphore; /* retained */
  uint64_t value;
} vpoint_t;

typedef struct vsub_t {
  struct vsub_t *next; /* in g_subs while not seen complete */
  int refs;            /* g_subs + the device's token */
  bool complete;
  uint32_t mark;       /* walk generation */
  hali_hal_device_t *device; /* borrowed: identity only */
  uint64_t id;
  vpoint_t *waits, *signals;
  size_t wait_count, signal_count;
  hali_hal_command_buffer_t **cbs; /* retained */
  size_t cb_count;
  /* queue_alloca / queue_dealloca: one write of the whole buffer (retained
   * in |own.root|); |own.length| 0 otherwise. */
  hali_hal_validate_access_t own;
  /* Every access of the submission, in order: its command buffers', then
   * |own|. */
  struct vref_t {
    const hali_hal_validate_access_t *access;
    uint32_t cb_id; /* 0 for |own| */
  } *accesses;
  size_t access_count;
  /* The accesses of bound command buffers (hal/binding_table.h): their
   * recording's, with each slot's placeholder replaced by the table
   * entry's buffer (owned; |accesses| points into it). */
  hali_hal_validate_access_t *mapped;
  size_t mapped_count;
} vsub_t;

typedef struct vpending_t {
  const hali_hal_validate_access_t *access; /* in a cb of |sub| */
  uint32_t cb_id;
  vsub_t *sub;
} vpending_t;

struct hali_hal_validate_buffer_t {
  hali_hal_validate_mode_t mode;
  vpending_t *pending;
  size_t pending_count, pending_capacity;
  /* Fresh buffers: sorted, disjoint, non-adjacent written ranges. */
  bool track_init;
  uint64_t *init; /* pairs [lo, hi) */
  size_t init_count, init_capacity;
};

static vsub_t *g_subs;
static uint32_t g_mark;

hali_hal_validate_buffer_t *hali_hal_validate_buffer_create_fresh(
    hali_hal_validate_mode_t mode) {
  hali_hal_validate_buffer_t *b = hali_calloc(1, sizeof(*b));
  if (b) {
    b->mode = mode;
    b->track_init = true;
  }
  return b;
}

void hali_hal_validate_buffer_free(hali_hal_validate_buffer_t *state) {
  if (!state) return;
  hali_free(state->pending);
  hali_free(state->init);
  hali_free(state);
}

static hali_hal_validate_buffer_t *buffer_state(hali_hal_buffer_t *root,
                                                hali_hal_validate_mode_t mode) {
  hali_hal_validate_buffer_t *b = hali_hal_buffer_validate_state(root);
  if (!b) {
    b = hali_calloc(1, sizeof(*b));
    if (b) b->mode = mode;
    hali_hal_buffer_set_validate_state(root, b);
  }
  return b;
}

/* The first unwritten byte range inside [lo, hi), if any. */
static bool first_unwritten(const hali_hal_validate_buffer_t *b, uint64_t lo,
                            uint64_t hi, uint64_t *out_lo, uint64_t *out_hi) {
  uint64_t at = lo;
  for (size_t i = 0; i < b->init_count && at < hi; ++i) {
    uint64_t s = b->init[2 * i], e = b->init[2 * i + 1];
    if (e <= at) continue;
    if (s > at) {
      *out_lo = at;
      *out_hi = s < hi ? s : hi;
      return true;
    }
    at = e;
  }
  if (at < hi) {
    *out_lo = at;
    *out_hi = hi;
    return true;
  }
  return false;
}

static void mark_written(hali_hal_validate_buffer_t *b, uint64_t lo,
                         uint64_t hi) {
  if (!b->track_init || lo >= hi) return;
  /* Merge every range touching [lo, hi) into one. */
  size_t i = 0;
  while (i < b->init_count && b->init[2 * i + 1] < lo) ++i;
  size_t j = i;
  while (j < b->init_count && b->init[2 * j] <= hi) {
    if (b->init[2 * j] < lo) lo = b->init[2 * j];
    if (b->init[2 * j + 1] > hi) hi = b->init[2 * j + 1];
    ++j;
  }
  size_t removed = j - i;
  if (removed == 0) {
    if (b->init_count == b->init_capacity) {
      size_t cap = b->init_capacity ? b->init_capacity * 2 : 4;
      uint64_t *grown = hali_realloc(b->init, cap * 2 * sizeof(uint64_t));
      if (!grown) {
        b->track_init = false; /* out of memory: stop judging this buffer */
        return;
      }
      b->init = grown;
      b->init_capacity = cap;
    }
    memmove(&b->init[2 * (i + 1)], &b->init[2 * i],
            (b->init_count - i) * 2 * sizeof(uint64_t));
    b->init_count++;
  } else if (removed > 1) {
    memmove(&b->init[2 * (i + 1)], &b->init[2 * j],
            (b->init_count - j) * 2 * sizeof(uint64_t));
    b->init_count -= removed - 1;
  }
  b->init[2 * i] = lo;
  b->init[2 * i + 1] = hi;
}

static void sub_release(vsub_t *s) {
  if (--s->refs) return;
  if (s->own.root) hali_hal_buffer_release(s->own.root);
  hali_free(s->accesses);
  hali_free(s->mapped);
  for (size_t i = 0; i < s->wait_count; ++i)
    hali_hal_semaphore_release(s->waits[i].semaphore);
  for (size_t i = 0; i < s->signal_count; ++i)
    hali_hal_semaphore_release(s->signals[i].semaphore);
  for (size_t i = 0; i < s->cb_count; ++i)
    hali_hal_command_buffer_release(s->cbs[i]);
  hali_free(s->waits);
  hali_free(s->signals);
  hali_free(s->cbs);
  hali_free(s);
}

/* Drops every pending entry of |s| (complete for the host now). */
static void sub_forget_accesses(vsub_t *s) {
  for (size_t k = 0; k < s->access_count; ++k) {
    hali_hal_validate_buffer_t *b =
        hali_hal_buffer_validate_state(s->accesses[k].access->root);
    if (!b) continue;
    size_t n = 0;
    for (size_t i = 0; i < b->pending_count; ++i)
      if (b->pending[i].sub != s) b->pending[n++] = b->pending[i];
    b->pending_count = n;
  }
}

/* "!hal.command_buffer#5 command 2 (fill, ...)" or "queue_dealloca". */
static void describe_access(const hali_hal_validate_access_t *a, uint32_t cb_id,
                            char *buf, size_t n) {
  if (cb_id)
    snprintf(buf, n, "!hal.command_buffer#%u %s", cb_id, a->what);
  else
    snprintf(buf, n, "%s", a->what);
}

static void observe_point(hali_hal_semaphore_t *sem, uint64_t value);

static void sub_complete(vsub_t *s) {
  if (s->complete) return;
  s->complete = true;
  for (vsub_t **p = &g_subs; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  sub_forget_accesses(s);
  for (size_t i = 0; i < s->wait_count; ++i)
    observe_point(s->waits[i].semaphore, s->waits[i].value);
  sub_release(s);
}

static void observe_point(hali_hal_semaphore_t *sem, uint64_t value) {
  for (bool again = true; again;) {
    again = false;
    for (vsub_t *s = g_subs; s; s = s->next) {
      bool hit = false;
      for (size_t i = 0; i < s->signal_count && !hit; ++i)
        hit = s->signals[i].semaphore == sem && s->signals[i].value <= value;
      if (hit) {
        sub_complete(s); /* changes the list: walk it again */
        again = true;
        break;
      }
    }
  }
}

void hali_hal_validate_observe_fence(hali_hal_fence_t *fence) {
  if (!fence || !atomic_load_explicit(&hali_hal_validate_devices,
                                      memory_order_relaxed))
    return;
  pthread_mutex_lock(&g_mu);
  size_t n = hali_hal_fence_point_count(fence);
  for (size_t i = 0; i < n; ++i) {
    hali_hal_semaphore_t *sem;
    uint64_t value;
    hali_hal_fence_point(fence, i, &sem, &value);
    observe_point(sem, value);
  }
  pthread_mutex_unlock(&g_mu);
}

void hali_hal_validate_observe_device(hali_hal_device_t *device) {
  pthread_mutex_lock(&g_mu);
  for (bool again = true; again;) {
    again = false;
    for (vsub_t *s = g_subs; s; s = s->next)
      if (s->device == device) {
        sub_complete(s);
        again = true;
        break;
      }
  }
  pthread_mutex_unlock(&g_mu);
}

void hali_hal_validate_device_created(void) {
  atomic_fetch_add(&hali_hal_validate_devices, 1);
}

void hali_hal_validate_device_destroyed(hali_hal_device_t *device) {
  hali_hal_validate_observe_device(device);
  atomic_fetch_sub(&hali_hal_validate_devices, 1);
}

/* Marks (generation |g_mark|) every submission |s|'s wait points reach. */
static void mark_predecessors(const vpoint_t *waits, size_t count) {
  for (size_t w = 0; w < count; ++w)
    for (vsub_t *p = g_subs; p; p = p->next) {
      if (p->mark == g_mark) continue;
      bool hit = false;
      for (size_t i = 0; i < p->signal_count && !hit; ++i)
        hit = p->signals[i].semaphore == waits[w].semaphore &&
              p->signals[i].value <= waits[w].value;
      if (!hit) continue;
      p->mark = g_mark;
      mark_predecessors(p->waits, p->wait_count);
    }
}

static bool copy_points(hali_hal_fence_t *fence, vpoint_t **out,
                        size_t *out_count) {
  *out = NULL;
  *out_count = 0;
  size_t n = fence ? hali_hal_fence_point_count(fence) : 0;
  if (!n) return true;
  vpoint_t *p = hali_calloc(n, sizeof(*p));
  if (!p) return false;
  for (size_t i = 0; i < n; ++i) {
    hali_hal_fence_point(fence, i, &p[i].semaphore, &p[i].value);
    hali_hal_semaphore_retain(p[i].semaphore);
  }
  *out = p;
  *out_count = n;
  return true;
}

/* The recorded accesses a submission of |cb| makes: a bound command
 * buffer's are its recording's (then |*out_table| is its table). */
static const hali_hal_validate_cb_t *cb_accesses(
    const hali_hal_command_buffer_t *cb,
    const hali_hal_binding_table_t **out_table) {
  *out_table = cb->base ? &cb->table : NULL;
  return cb->base ? cb->base->validate_state : cb->validate_state;
}

/* |a| as |table| makes it: a slot placeholder's access becomes one of the
 * entry's buffer (false: the slot has no entry, which the submit-time
 * check refuses before anything runs). */
static bool map_access(const hali_hal_validate_access_t *a,
                       const hali_hal_binding_table_t *table,
                       hali_hal_validate_access_t *out) {
  *out = *a;
  uint32_t slot = hali_hal_buffer_slot(a->root);
  if (!slot) return true;
  if (!table || slot - 1 >= table->binding_count ||
      !table->bindings[slot - 1].buffer)
    return false;
  const hali_hal_binding_table_entry_t *e = &table->bindings[slot - 1];
  out->root = hali_hal_buffer_allocated_buffer(e->buffer);
  out->offset += e->offset + hali_hal_buffer_byte_offset(e->buffer);
  return true;
}

static hali_status_t add_pending(hali_hal_validate_buffer_t *b,
                                 const hali_hal_validate_access_t *a,
                                 uint32_t cb_id, vsub_t *sub) {
  if (b->pending_count == b->pending_capacity) {
    size_t cap = b->pending_capacity ? b->pending_capacity * 2 : 4;
    vpending_t *grown = hali_realloc(b->pending, cap * sizeof(*grown));
    if (!grown) return hali_status_oom();
    b->pending = grown;
    b->pending_capacity = cap;
  }
  b->pending[b->pending_count++] = (vpending_t){a, cb_id, sub};
  return HALI_OK;
}

hali_status_t hali_hal_validate_submit(
    hali_hal_device_t *device, hali_hal_validate_mode_t mode, uint64_t id,
    hali_hal_fence_t *wait_fence, hali_hal_fence_t *signal_fence,
    hali_hal_command_buffer_t *const *command_buffers, size_t count,
    hali_hal_buffer_t *buffer, const char *buffer_op, void **out_token) {
  *out_token = NULL;
  vsub_t *s = hali_calloc(1, sizeof(*s));
  if (!s) return hali_status_oom();
  s->refs = 1;
  s->device = device;
  s->id = id;
  if (!copy_points(wait_fence, &s->waits, &s->wait_count) ||
      !copy_points(signal_fence, &s->signals, &s->signal_count) ||
      (count && !(s->cbs = hali_calloc(count, sizeof(*s->cbs))))) {
    sub_release(s);
    return hali_status_oom();
  }
  size_t total = 0, bound = 0;
  for (size_t i = 0; i < count; ++i) {
    s->cbs[i] = command_buffers[i];
    hali_hal_command_buffer_retain(command_buffers[i]);
    s->cb_count = i + 1;
    const hali_hal_binding_table_t *table;
    const hali_hal_validate_cb_t *v = cb_accesses(command_buffers[i], &table);
    if (v) total += v->access_count;
    if (v && table) bound += v->access_count;
  }
  if (bound && !(s->mapped = hali_calloc(bound, sizeof(*s->mapped)))) {
    sub_release(s);
    return hali_status_oom();
  }
  if (buffer) {
    hali_hal_buffer_retain(buffer);
    s->own.root = buffer;
    s->own.offset = 0;
    s->own.length = hali_hal_buffer_length(buffer);
    s->own.write = true;
    snprintf(s->own.what, sizeof(s->own.what), "%s", buffer_op);
    total += s->own.length ? 1 : 0;
  }
  if (total && !(s->accesses = hali_calloc(total, sizeof(*s->accesses)))) {
    sub_release(s);
    return hali_status_oom();
  }
  for (size_t i = 0; i < count; ++i) {
    const hali_hal_binding_table_t *table;
    const hali_hal_validate_cb_t *v = cb_accesses(command_buffers[i], &table);
    for (size_t k = 0; v && k < v->access_count; ++k) {
      const hali_hal_validate_access_t *a = &v->accesses[k];
      if (table) {
        hali_hal_validate_access_t *m = &s->mapped[s->mapped_count];
        if (!map_access(a, table, m)) continue;
        s->mapped_count++;
        a = m;
      }
      s->accesses[s->access_count++] =
          (struct vref_t){a, command_buffers[i]->ref.id};
    }
  }
  if (buffer && s->own.length)
    s->accesses[s->access_count++] = (struct vref_t){&s->own, 0};
  pthread_mutex_lock(&g_mu);
  /* Check 2 against every pending access of another submission that is
   * not among this one's predecessors. */
  ++g_mark;
  mark_predecessors(s->waits, s->wait_count);
  hali_status_t found = HALI_OK;
  for (size_t k = 0; k < s->access_count && !found; ++k) {
    const hali_hal_validate_access_t *a = s->accesses[k].access;
    hali_hal_validate_buffer_t *b = hali_hal_buffer_validate_state(a->root);
    for (size_t i = 0; b && i < b->pending_count && !found; ++i) {
      const vpending_t *p = &b->pending[i];
      uint64_t lo, hi;
      if (p->sub->mark == g_mark || !(p->access->write || a->write) ||
          !overlap(p->access->offset, p->access->length, a->offset,
                   a->length, &lo, &hi))
        continue;
      char later[256], earlier[256];
      describe_access(a, s->accesses[k].cb_id, later, sizeof(later));
      describe_access(p->access, p->cb_id, earlier, sizeof(earlier));
      found = finding(
          "%s hazard between submissions: %s in submission #%" PRIu64
          " %s bytes [%" PRIu64 ", %" PRIu64 ") of !hal.buffer#%u, which %s "
          "in submission #%" PRIu64 " %s, and submission #%" PRIu64
          " is not ordered after it: its wait fence does not reach "
          "(through a chain of fence waits) the signal fence of "
          "submission #%" PRIu64 ", and the host has not awaited that fence",
          hazard_name(p->access->write, a->write), later, id,
          a->write ? "writes" : "reads", lo, hi, hali_hal_trace_id(a->root),
          earlier, p->sub->id, p->access->write ? "writes" : "reads", id,
          p->sub->id);
    }
  }
  found = hali_hal_validate_report(mode, found);
  if (found) {
    pthread_mutex_unlock(&g_mu);
    sub_release(s);
    return found;
  }
  /* Record: pending entries, and the submission itself. */
  hali_status_t oom = HALI_OK;
  for (size_t k = 0; k < s->access_count && !oom; ++k) {
    hali_hal_validate_buffer_t *b =
        buffer_state(s->accesses[k].access->root, mode);
    oom = b ? add_pending(b, s->accesses[k].access, s->accesses[k].cb_id, s)
            : hali_status_oom();
  }
  if (oom) {
    sub_forget_accesses(s);
    pthread_mutex_unlock(&g_mu);
    sub_release(s);
    return oom;
  }
  s->refs = 2;
  s->next = g_subs;
  g_subs = s;
  pthread_mutex_unlock(&g_mu);
  *out_token = s;
  return HALI_OK;
}

hali_status_t hali_hal_validate_submission_run(
    void *token, hali_hal_command_buffer_t *const *command_buffers,
    size_t count) {
  (void)token;
  hali_status_t found = HALI_OK;
  hali_hal_validate_mode_t mode = HALI_HAL_VALIDATE_FAIL;
  pthread_mutex_lock(&g_mu);
  for (size_t c = 0; c < count && !found; ++c) {
    /* A bound command buffer (hal/binding_table.h) makes its recording's
     * accesses, slots read through its table. */
    const hali_hal_binding_table_t *table;
    const hali_hal_validate_cb_t *v = cb_accesses(command_buffers[c], &table);
    for (size_t k = 0; v && k < v->access_count && !found; ++k) {
      hali_hal_validate_access_t mapped;
      const hali_hal_validate_access_t *a = &mapped;
      if (!map_access(&v->accesses[k], table, &mapped))
        continue; /* the submit-time check refused it already */
      hali_hal_validate_buffer_t *b = hali_hal_buffer_validate_state(a->root);
      if (!b || !b->track_init) continue;
      uint64_t lo, hi;
      if (a->check_init &&
          first_unwritten(b, a->offset, a->offset + a->length, &lo, &hi)) {
        mode = b->mode;
        found = hali_hal_validate_report(
            mode,
            finding("uninitialized read: !hal.command_buffer#%u %s reads "
                    "bytes [%" PRIu64 ", %" PRIu64 ") of !hal.buffer#%u, "
                    "which nothing has written (no fill, copy, update, "
                    "dispatch or host write before it)",
                    command_buffers[c]->ref.id, a->what, lo, hi,
                    hali_hal_trace_id(a->root)));
        if (!found) mark_written(b, lo, hi); /* warn once per range */
      }
      if (a->write) mark_written(b, a->offset, a->offset + a->length);
    }
  }
  pthread_mutex_unlock(&g_mu);
  return found;
}

void hali_hal_validate_submission_release(void *token) {
  if (!token) return;
  pthread_mutex_lock(&g_mu);
  sub_release(token);
  pthread_mutex_unlock(&g_mu);
}

/* ------------------------------------------------------------------------ */
/* Host access (check 3). */

hali_status_t hali_hal_validate_host_access(hali_hal_buffer_t *root,
                                            hali_hal_validate_buffer_t *b,
                                            uint64_t offset, uint64_t length,
                                            bool write, const char *what) {
  hali_status_t found = HALI_OK;
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < b->pending_count && !found; ++i) {
    const vpending_t *p = &b->pending[i];
    uint64_t lo, hi;
    if (!(p->access->write || write) ||
        !overlap(p->access->offset, p->access->length, offset,
                 length ? length : 1, &lo, &hi))
      continue;
    char who[256];
    describe_access(p->access, p->cb_id, who, sizeof(who));
    found = finding(
        "host %s of bytes [%" PRIu64 ", %" PRIu64 ") of !hal.buffer#%u while "
        "submission #%" PRIu64 " (%s) %s them and the host has not awaited "
        "its signal fence (hal.fence.await it before touching the buffer)",
        what, lo, hi, hali_hal_trace_id(root), p->sub->id, who,
        p->access->write ? "writes" : "reads");
  }
  hali_hal_validate_mode_t mode = b->mode;
  /* Warning: the access goes ahead, and the submission counts as seen
   * complete from now on (one warning, not one per load of a loop). */
  if (found && mode == HALI_HAL_VALIDATE_WARN) {
    for (size_t i = 0; i < b->pending_count; ++i) {
      const vpending_t *p = &b->pending[i];
      uint64_t lo, hi;
      if ((p->access->write || write) &&
          overlap(p->access->offset, p->access->length, offset,
                  length ? length : 1, &lo, &hi)) {
        sub_complete(p->sub);
        break;
      }
    }
  }
  if ((!found || mode == HALI_HAL_VALIDATE_WARN) &&
      (write || strcmp(what, "map") == 0))
    mark_written(b, offset, offset + length);
  pthread_mutex_unlock(&g_mu);
  return hali_hal_validate_report(mode, found);
}

/* ------------------------------------------------------------------------ */
/* Guarded dispatches (check 4). */

/* One binding's mapping: [map, map + map_size) with a guard page at each
 * end; the binding's bytes end |slack| bytes before the trailing guard. */
typedef struct vguard_t {
  _Atomic(uintptr_t) lo, hi; /* the whole mapping; 0 = free slot */
  uintptr_t data;            /* first byte of the binding */
  size_t length;             /* binding bytes */
  uint32_t binding;
  bool read_only;
} vguard_t;

#define VGUARD_SLOTS 256
static vguard_t g_guards[VGUARD_SLOTS];
static int g_handler_users; /* under g_mu */
static struct sigaction g_previous;

static _Thread_local sigjmp_buf *t_jump;
static _Thread_local volatile uintptr_t t_fault;
static _Thread_local volatile int t_fault_write; /* 1 write, 0 read, -1 ? */

static void on_segv(int sig, siginfo_t *info, void *uctx) {
  uintptr_t addr = (uintptr_t)info->si_addr;
#if defined(__x86_64__) && defined(REG_ERR)
  /* The page-fault error code: bit 1 is set for a write. */
  t_fault_write =
      (((ucontext_t *)uctx)->uc_mcontext.gregs[REG_ERR] & 2) ? 1 : 0;
#else
  (void)uctx;
  t_fault_write = -1;
#endif
  if (t_jump) {
    for (int i = 0; i < VGUARD_SLOTS; ++i) {
      uintptr_t lo = atomic_load_explicit(&g_guards[i].lo, memory_order_acquire);
      uintptr_t hi = atomic_load_explicit(&g_guards[i].hi, memory_order_acquire);
      if (lo && addr >= lo && addr < hi) {
        t_fault = addr;
        siglongjmp(*t_jump, 1);
      }
    }
  }
  /* Not ours: put the previous handler back and let the access fault
   * again under it (the default action ends the process as before). */
  sigaction(sig, &g_previous, NULL);
}

#define VGUARD_CANARY 0xA5

static hali_status_t describe_fault(uintptr_t addr, int write) {
  const char *verb = write > 0 ? "wrote" : write == 0 ? "read" : "accessed";
  for (int i = 0; i < VGUARD_SLOTS; ++i) {
    const vguard_t *g = &g_guards[i];
    uintptr_t lo = atomic_load(&g->lo), hi = atomic_load(&g->hi);
    if (!lo || addr < lo || addr >= hi) continue;
    const char *ro = g->read_only ? " (an input)" : "";
    if (addr >= g->data && addr < g->data + g->length)
      return finding("kernel wrote to read-only binding %u (an input) at "
                     "offset %" PRIuPTR " (the binding is %zu bytes)",
                     g->binding, addr - g->data, g->length);
    if (addr < g->data)
      return finding("kernel %s before the start of binding %u%s at offset "
                     "-%" PRIuPTR " (the binding is %zu bytes)",
                     verb, g->binding, ro, g->data - addr, g->length);
    /* A write that ran on past the end: the first byte it changed in the
     * slack before the guard page is where it began to go wrong. */
    for (const uint8_t *p = (const uint8_t *)(g->data + g->length);
         !g->read_only && (uintptr_t)p < addr; ++p)
      if (*p != VGUARD_CANARY)
        return finding("kernel wrote past the end of binding %u: from "
                       "offset %" PRIuPTR " up to offset %" PRIuPTR
                       ", where it faulted (the binding is %zu bytes)",
                       g->binding, (uintptr_t)p - g->data, addr - g->data,
                       g->length);
    return finding("kernel %s past the end of binding %u%s at offset "
                   "%" PRIuPTR " (the binding is %zu bytes)",
                   verb, g->binding, ro, addr - g->data, g->length);
  }
  return finding("kernel faulted at address %p", (void *)addr);
}

hali_status_t hali_hal_validate_guarded_workgroup(
    hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch,
    const hali_kernel_workgroup_state_t *workgroup, hali_hal_stop_t *stop) {
  sigjmp_buf jump;
  sigjmp_buf *volatile saved = t_jump;
  /* No signal mask to save: the handler runs with SA_NODEFER, so SIGSEGV
   * is not blocked when it jumps back here. */
  if (sigsetjmp(jump, 0)) {
    t_jump = saved;
    return describe_fault(t_fault, t_fault_write);
  }
  t_jump = &jump;
  hali_status_t s = hali_hal_executable_run_workgroup(executable, ordinal,
                                                      dispatch, workgroup, stop);
  t_jump = saved;
  return s;
}

static bool is_c_format(const hali_hal_executable_t *executable) {
  return strcmp(hali_hal_executable_format(executable), "bytecode") != 0;
}

#define VGUARD_SLACK_ALIGN 16

hali_status_t hali_hal_validate_guarded_dispatch(
    hali_hal_dispatch_runner_t run, void *self,
    hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch, hali_hal_stop_t *stop) {
  if (!is_c_format(executable) || !dispatch->binding_count)
    return run(self, executable, ordinal, dispatch, stop);
  const hali_hal_executable_export_t *e =
      hali_hal_executable_export(executable, ordinal);
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const uint32_t n = dispatch->binding_count;
  void *ptrs[HALI_HAL_MAX_BINDINGS];
  int slots[HALI_HAL_MAX_BINDINGS];
  hali_status_t s = HALI_OK;
  bool canary = false;
  uint32_t mapped = 0;
  pthread_mutex_lock(&g_mu);
  for (; mapped < n && !s; ++mapped) {
    uint32_t i = mapped;
    size_t len = dispatch->binding_lengths[i];
    size_t padded = (len + VGUARD_SLACK_ALIGN - 1) & ~(size_t)(VGUARD_SLACK_ALIGN - 1);
    size_t data_pages = (padded + page - 1) / page;
    if (!data_pages) data_pages = 1;
    size_t size = (data_pages + 2) * page;
    uint8_t *map = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
    int slot = -1;
    for (int k = 0; k < VGUARD_SLOTS && slot < 0; ++k)
      if (!atomic_load(&g_guards[k].lo)) slot = k;
    if (map == MAP_FAILED || slot < 0) {
      if (map != MAP_FAILED) munmap(map, size);
      s = hali_status_make(HALI_STATUS_RESOURCE_EXHAUSTED,
                           "validation: cannot map binding %u (%zu bytes) "
                           "with guard pages",
                           i, len);
      break;
    }
    uint8_t *body = map + page;
    mprotect(body, data_pages * page, PROT_READ | PROT_WRITE);
    uint8_t *data = body + data_pages * page - padded;
    memset(body, VGUARD_CANARY, data_pages * page);
    if (len) memcpy(data, dispatch->binding_ptrs[i], len);
    bool ro = (e->read_only_bindings >> i) & 1u;
    if (ro) mprotect(body, data_pages * page, PROT_READ);
    vguard_t *g = &g_guards[slot];
    g->data = (uintptr_t)data;
    g->length = len;
    g->binding = i;
    g->read_only = ro;
    atomic_store(&g->hi, (uintptr_t)map + size);
    atomic_store(&g->lo, (uintptr_t)map);
    ptrs[i] = data;
    slots[i] = slot;
  }
  if (!s && g_handler_users++ == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_previous);
  }
  pthread_mutex_unlock(&g_mu);
  if (!s) {
    hali_kernel_dispatch_state_t guarded = *dispatch;
    guarded.binding_ptrs = ptrs;
    atomic_fetch_add(&hali_hal_validate_guards_active, 1);
    s = run(self, executable, ordinal, &guarded, stop);
    atomic_fetch_sub(&hali_hal_validate_guards_active, 1);
  }
  pthread_mutex_lock(&g_mu);
  if (mapped == n && --g_handler_users == 0)
    sigaction(SIGSEGV, &g_previous, NULL);
  for (uint32_t i = 0; i < mapped; ++i) {
    vguard_t *g = &g_guards[slots[i]];
    uint8_t *map = (uint8_t *)atomic_load(&g->lo);
    size_t size = atomic_load(&g->hi) - (uintptr_t)map;
    uint8_t *data = (uint8_t *)g->data;
    size_t len = g->length;
    if (!s && !g->read_only) {
      /* Bytes past the binding's end, before the guard page. */
      uint8_t *end = map + size - page;
      /* ... and before its start, in the same pages (an underrun reaches
       * the leading guard page only past them). */
      for (uint8_t *p = map + page; p < data && !s; ++p)
        if (*p != VGUARD_CANARY && (canary = true))
          s = finding("kernel wrote before the start of binding %u: byte "
                      "at offset -%zu changed (the binding is %zu bytes)",
                      i, (size_t)(data - p), len);
      for (uint8_t *p = data + len; p < end && !s; ++p)
        if (*p != VGUARD_CANARY && (canary = true))
          s = finding("kernel wrote past the end of binding %u: byte at "
                      "offset %zu changed (the binding is %zu bytes)",
                      i, (size_t)(p - data), len);
      if (len) memcpy(dispatch->binding_ptrs[i], data, len);
    }
    atomic_store(&g->lo, 0);
    atomic_store(&g->hi, 0);
    munmap(map, size);
  }
  pthread_mutex_unlock(&g_mu);
  if (canary)
    s = hali_status_annotate(s, "in dispatch of executable '%s' export %u '%s'",
                             hali_hal_executable_name(executable), ordinal,
                             e->name);
  return s;
}

hali_status_t hali_hal_validate_runner(
    void *self, hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch, hali_hal_stop_t *stop) {
  const hali_hal_validate_runner_t *r = self;
  return hali_hal_validate_guarded_dispatch(r->run, r->self, executable,
                                            ordinal, dispatch, stop);
}
