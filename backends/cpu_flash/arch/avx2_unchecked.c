/* backends/cpu_flash/arch/avx2_unchecked.c — sanitizer builds only: the avx2 kernel once more,
 * compiled without the sanitizers' instrumentation, as modattn__flash_isa_avx2_unchecked (core/internal_core.h:
 * kernel twins; MODATTN_ASAN_KERNELS=entry runs it, cpu_flash.c checking each call's ranges first). */
#define MODATTN_KERNEL_UNCHECKED 1
#include "backends/cpu_flash/arch/avx2.c"
