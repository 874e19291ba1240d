/* backends/cpu_flash/arch/avx512_unchecked.c — sanitizer builds only: the avx512 kernel once more,
 * compiled without the sanitizers' instrumentation, as modattn__flash_isa_avx512_unchecked (core/internal_core.h:
 * kernel twins; MODATTN_ASAN_KERNELS=entry runs it, cpu_flash.c checking each call's ranges first). */
#define MODATTN_KERNEL_UNCHECKED 1
#include "backends/cpu_flash/arch/avx512.c"
