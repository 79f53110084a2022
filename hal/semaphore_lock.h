/* hali HAL — the small lock of semaphores and fences (internal).
 *
 * Semaphores and fences hold their lock for a few loads and stores and
 * never wait on a condition under it, and a fan-out keeps one semaphore
 * per member alive in its group: a 4-byte lock that takes one atomic
 * instruction each way when nobody else holds it (a pthread mutex is 40
 * bytes and a few dozen instructions each way).  On Linux a contended lock
 * sleeps on a futex (the three-state lock: 0 free, 1 held, 2 held with
 * sleepers); elsewhere it is a pthread mutex.  The acquire / release
 * ordering of the lock word is what orders the data it guards (also for
 * ThreadSanitizer, which sees the atomics).
 */
#ifndef HALI_HAL_SEMAPHORE_LOCK_H
#define HALI_HAL_SEMAPHORE_LOCK_H

#if defined(__linux__)
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct {
  atomic_int word;
} hali_small_lock_t;

#define HALI_SMALL_LOCK_INIT {0}

static inline void hali_small_lock_init(hali_small_lock_t *l) {
  atomic_init(&l->word, 0);
}
static inline void hali_small_lock_destroy(hali_small_lock_t *l) { (void)l; }

static inline void hali_small_lock_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static inline void hali_small_lock(hali_small_lock_t *l) {
  int c = 0;
  if (atomic_compare_exchange_strong_explicit(&l->word, &c, 1,
                                              memory_order_acquire,
                                              memory_order_relaxed))
    return;
  /* Held, for a few dozen instructions at most: look again a little
   * while before sleeping (a futex wait and wake cost microseconds). */
  for (int spin = 0; spin < 64 && c != 2; ++spin) {
    hali_small_lock_pause();
    c = atomic_load_explicit(&l->word, memory_order_relaxed);
    if (c == 0 &&
        atomic_compare_exchange_strong_explicit(&l->word, &c, 1,
                                                memory_order_acquire,
                                                memory_order_relaxed))
      return;
  }
  /* Still held: mark it contended and sleep until it is free. */
  if (c != 2)
    c = atomic_exchange_explicit(&l->word, 2, memory_order_acquire);
  while (c != 0) {
    syscall(SYS_futex, &l->word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
    c = atomic_exchange_explicit(&l->word, 2, memory_order_acquire);
  }
}

static inline void hali_small_unlock(hali_small_lock_t *l) {
  if (atomic_exchange_explicit(&l->word, 0, memory_order_release) == 2)
    syscall(SYS_futex, &l->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
#else
#include <pthread.h>

typedef struct {
  pthread_mutex_t mutex;
} hali_small_lock_t;

static inline void hali_small_lock_init(hali_small_lock_t *l) {
  pthread_mutex_init(&l->mutex, NULL);
}
static inline void hali_small_lock_destroy(hali_small_lock_t *l) {
  pthread_mutex_destroy(&l->mutex);
}
static inline void hali_small_lock(hali_small_lock_t *l) {
  pthread_mutex_lock(&l->mutex);
}
static inline void hali_small_unlock(hali_small_lock_t *l) {
  pthread_mutex_unlock(&l->mutex);
}
#endif

#endif /* HALI_HAL_SEMAPHORE_LOCK_H */
