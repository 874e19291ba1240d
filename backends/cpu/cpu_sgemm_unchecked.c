/* backends/cpu/cpu_sgemm_unchecked.c — sanitizer builds only: our AVX2 GEMM's loops once more,
 * compiled without the sanitizers' instrumentation, as modattn__sgemm_run_unchecked (core/internal_core.h:
 * kernel twins; MODATTN_ASAN_KERNELS=entry runs it after checking the call's ranges). */
#define MODATTN_KERNEL_UNCHECKED 1
#include "backends/cpu/cpu_sgemm.c"
