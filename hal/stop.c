/* hali HAL — stop requests (see hal/stop.h). */
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/alloc.h"
#include "hal/stop.h"

struct hali_hal_stop_t {
  /* hali_hal_stop_head_t (hal/stop.h), member for member. */
  atomic_uint refs;
  _Atomic(hali_status_code_t) code; /* 0 until requested */
  int64_t deadline_ns;              /* INT64_MAX: none */
  atomic_bool fuel_enabled;
  atomic_uint_fast64_t fuel;
  pthread_mutex_t mutex; /* guards |watchers| */
  hali_hal_stop_watch_t *watchers;
};

hali_status_t hali_hal_stop_create(int64_t deadline_ns,
                                   hali_hal_stop_t **out_stop) {
  *out_stop = NULL;
  hali_hal_stop_t *s = hali_calloc(1, sizeof(*s));
  if (!s) return hali_status_annotate(hali_status_oom(), "creating a stop");
  atomic_init(&s->refs, 1);
  atomic_init(&s->code, HALI_STATUS_OK);
  atomic_init(&s->fuel_enabled, false);
  atomic_init(&s->fuel, 0);
  s->deadline_ns = deadline_ns;
  pthread_mutex_init(&s->mutex, NULL);
  *out_stop = s;
  return HALI_OK;
}

void hali_hal_stop_retain(hali_hal_stop_t *stop) {
  if (stop) atomic_fetch_add_explicit(&stop->refs, 1, memory_order_relaxed);
}

void hali_hal_stop_release(hali_hal_stop_t *stop) {
  if (!stop || atomic_fetch_sub_explicit(&stop->refs, 1,
                                         memory_order_acq_rel) != 1)
    return;
  pthread_mutex_destroy(&stop->mutex);
  hali_free(stop);
}

void hali_hal_stop_request(hali_hal_stop_t *stop, hali_status_code_t code) {
  if (!stop || code == HALI_STATUS_OK) return;
  pthread_mutex_lock(&stop->mutex);
  hali_status_code_t none = HALI_STATUS_OK;
  if (atomic_compare_exchange_strong(&stop->code, &none, code)) {
    for (hali_hal_stop_watch_t *w = stop->watchers; w; w = w->next) {
      atomic_store_explicit(w->code, code, memory_order_relaxed);
      atomic_store_explicit(w->flag, true, memory_order_release);
    }
  }
  pthread_mutex_unlock(&stop->mutex);
}

_Static_assert(offsetof(struct hali_hal_stop_t, refs) ==
                   offsetof(hali_hal_stop_head_t, refs) &&
               offsetof(struct hali_hal_stop_t, code) ==
                   offsetof(hali_hal_stop_head_t, code) &&
               offsetof(struct hali_hal_stop_t, deadline_ns) ==
                   offsetof(hali_hal_stop_head_t, deadline_ns),
               "hal/stop.h's hali_hal_stop_head_t is the stop's first members");

hali_status_code_t hali_hal_stop_check_slow(hali_hal_stop_t *stop) {
  if (!stop) return HALI_STATUS_OK;
  hali_status_code_t code =
      atomic_load_explicit(&stop->code, memory_order_acquire);
  if (HALI_LIKELY(code == HALI_STATUS_OK && stop->deadline_ns == INT64_MAX))
    return HALI_STATUS_OK;
  if (code == HALI_STATUS_OK && hali_clock_now_ns() >= stop->deadline_ns) {
    hali_hal_stop_request(stop, HALI_STATUS_DEADLINE_EXCEEDED);
    code = atomic_load_explicit(&stop->code, memory_order_acquire);
  }
  return code;
}

int64_t hali_hal_stop_deadline(const hali_hal_stop_t *stop) {
  return stop ? stop->deadline_ns : INT64_MAX;
}

hali_status_t hali_hal_stop_status(hali_status_code_t code) {
  switch (code) {
    case HALI_STATUS_OK:
      return HALI_OK;
    case HALI_STATUS_CANCELLED:
      return hali_status_make(code, "the invocation that submitted this work "
                                    "was cancelled");
    case HALI_STATUS_DEADLINE_EXCEEDED:
      return hali_status_make(code, "the invocation that submitted this work "
                                    "exceeded its deadline");
    default:
      return hali_status_make(code, "the invocation that submitted this work "
                                    "was stopped (%s)",
                              hali_status_code_name(code));
  }
}

bool hali_hal_stop_watch(hali_hal_stop_t *stop, hali_hal_stop_watch_t *watch) {
  pthread_mutex_lock(&stop->mutex);
  bool ok = atomic_load(&stop->code) == HALI_STATUS_OK;
  if (ok) {
    watch->prev = NULL;
    watch->next = stop->watchers;
    if (stop->watchers) stop->watchers->prev = watch;
    stop->watchers = watch;
  }
  pthread_mutex_unlock(&stop->mutex);
  return ok;
}

void hali_hal_stop_unwatch(hali_hal_stop_t *stop,
                           hali_hal_stop_watch_t *watch) {
  pthread_mutex_lock(&stop->mutex);
  if (watch->prev) watch->prev->next = watch->next;
  else stop->watchers = watch->next;
  if (watch->next) watch->next->prev = watch->prev;
  watch->prev = watch->next = NULL;
  pthread_mutex_unlock(&stop->mutex);
}

void hali_hal_stop_add_fuel(hali_hal_stop_t *stop, uint64_t fuel) {
  if (!stop) return;
  /* A pool never holds more than one invocation's budget (a uint64):
   * saturate rather than wrap all the same. */
  uint_fast64_t old = atomic_load(&stop->fuel), sum;
  do {
    sum = old > UINT64_MAX - fuel ? UINT64_MAX : old + fuel;
  } while (!atomic_compare_exchange_weak(&stop->fuel, &old, sum));
  atomic_store(&stop->fuel_enabled, true);
}

bool hali_hal_stop_fuel_enabled(const hali_hal_stop_t *stop) {
  return stop && atomic_load_explicit(&stop->fuel_enabled,
                                      memory_order_relaxed);
}

uint64_t hali_hal_stop_take_fuel(hali_hal_stop_t *stop, uint64_t max) {
  uint_fast64_t old = atomic_load(&stop->fuel), take;
  do {
    take = old < max ? old : max;
    if (!take) return 0;
  } while (!atomic_compare_exchange_weak(&stop->fuel, &old, old - take));
  return take;
}

uint64_t hali_hal_stop_fuel(const hali_hal_stop_t *stop) {
  return stop ? atomic_load(&stop->fuel) : 0;
}
