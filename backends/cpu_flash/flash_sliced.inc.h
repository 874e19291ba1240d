/* backends/cpu_flash/flash_sliced.inc.h — one sliced decode kernel: flash_kernel.inc.h with TS > 1,
 * included by an arch file once per slice count after it defines TS, vf_bcast_t, vf_group_sum and
 * FLASH_NAME (see flash_kernel.inc.h); undefines them after, for the next one. */
#include "backends/cpu_flash/flash_kernel.inc.h"
#undef TS
#undef vf_bcast_t
#undef vf_group_sum
#undef FLASH_NAME
