/* hali HAL — private: the worker pool behind the local-task device.
 *
 * N threads that split one dispatch's workgroups among themselves: each
 * worker repeatedly claims the next chunk of linear workgroup indices until
 * none are left (or a workgroup failed), so faster workers take more.
 *
 * Thread-safety: several threads may dispatch at once (the local-task
 * device's queue runners); their dispatches queue up, and a worker that
 * runs out of workgroups in one moves on to the next.
 */
#ifndef HALI_HAL_WORKER_POOL_H
#define HALI_HAL_WORKER_POOL_H

#include "hal/executable.h"

typedef struct hali_hal_worker_pool_t hali_hal_worker_pool_t;

/* Starts |worker_count| (>= 1) threads.  The caller owns |*out_pool|. */
HALI_MUST_USE hali_status_t hali_hal_worker_pool_create(
    uint32_t worker_count, hali_hal_worker_pool_t **out_pool);
/* Stops and joins every worker, then frees the pool.  NULL is fine. */
void hali_hal_worker_pool_destroy(hali_hal_worker_pool_t *pool);
uint32_t hali_hal_worker_pool_size(const hali_hal_worker_pool_t *pool);

/* Runs every workgroup of a validated dispatch on the workers and blocks
 * until all are done (even a single workgroup goes to a worker: callers
 * that want to save the round trip run it themselves).  Returns the first failure (the remaining workgroups
 * are skipped once one fails).  Each worker checks |stop| (NULL: none)
 * before each of its workgroups (hali_hal_dispatch_run_workgroups). */
HALI_MUST_USE hali_status_t hali_hal_worker_pool_dispatch(
    hali_hal_worker_pool_t *pool, hali_hal_executable_t *executable,
    uint32_t ordinal, const hali_kernel_dispatch_state_t *dispatch,
    const hali_hal_tracer_t *tracer, hali_hal_stop_t *stop);

/* A worker held by a dispatching thread across several dispatches (a
 * command buffer's): it sleeps meanwhile, and its id and scratch are the
 * holder's.  hali_hal_worker_pool_dispatch_held of a one-workgroup grid
 * then takes no lock at all; a larger grid is shared with the other idle
 * workers as hali_hal_worker_pool_dispatch shares it.  The holder must
 * not block on other dispatches while it holds (other dispatching
 * threads may be waiting for a worker): the local-task device holds none
 * across a collective.  NULL when no worker is idle. */
typedef struct hali_hal_worker_t hali_hal_worker_t;
hali_hal_worker_t *hali_hal_worker_pool_hold(hali_hal_worker_pool_t *pool);
void hali_hal_worker_pool_unhold(hali_hal_worker_pool_t *pool,
                                 hali_hal_worker_t *held);
/* The id and scratch of |held| for its holder to run kernels as that
 * worker itself (the local-task device's op loop: hal/command_list.h),
 * the scratch grown to at least |scratch_size| bytes first; false when it
 * cannot grow (the scratch is then unchanged). */
bool hali_hal_worker_pool_lend(hali_hal_worker_t *held, size_t scratch_size,
                               uint32_t *out_worker_id, void **out_scratch,
                               size_t *out_scratch_size);
/* hali_hal_worker_pool_dispatch with |held| (from hali_hal_worker_pool_hold;
 * NULL: as hali_hal_worker_pool_dispatch). */
HALI_MUST_USE hali_status_t hali_hal_worker_pool_dispatch_held(
    hali_hal_worker_pool_t *pool, hali_hal_worker_t *held,
    hali_hal_executable_t *executable, uint32_t ordinal,
    const hali_kernel_dispatch_state_t *dispatch,
    const hali_hal_tracer_t *tracer, hali_hal_stop_t *stop);

#endif /* HALI_HAL_WORKER_POOL_H */
