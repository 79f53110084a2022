/* hali — the interpreter's entry into the HAL instructions. */
#ifndef HALI_VM_HAL_OPS_H
#define HALI_VM_HAL_OPS_H

#include "base/status.h"
#include "vm/vm.h"

/* Executes the HAL instruction at |*pc| and advances |*pc| past it; on
 * failure leaves |*pc| at the instruction and returns the status.  An await
 * that suspends the fiber (st->can_suspend) returns HALI_STATUS_DEFERRED
 * (hali_status_deferred(), base/status.h) and leaves |*pc| at the await,
 * which runs again when the fiber resumes. */
hali_status_t hali_vm_hal_op(hali_vm_stack_t *st, const hali_cell_t **pc,
                             hali_slot_t *regs, hali_ref_t **refs);

#endif /* HALI_VM_HAL_OPS_H */
