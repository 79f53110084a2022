/* hali HAL — umbrella header: everything needed to use the HAL from C
 * without the VM.  See doc/hal.md. */
#ifndef HALI_HAL_HAL_H
#define HALI_HAL_HAL_H

#include "hal/allocator.h"
#include "hal/buffer.h"
#include "hal/buffer_view.h"
#include "hal/channel.h"
#include "hal/command_buffer.h"
#include "hal/common.h"
#include "hal/device.h"
#include "hal/executable.h"
#include "hal/fence.h"
#include "hal/semaphore.h"
#include "hali/kernel.h"

#endif /* HALI_HAL_HAL_H */
