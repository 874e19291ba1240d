/* backends/cpu/cpu_rowops_unchecked.c — sanitizer builds only: the row kernels (and the direct GEMM
 * of few-row plans) once more, compiled without the sanitizers' instrumentation, as modattn__*_unchecked
 * (core/internal_core.h: kernel twins; MODATTN_ASAN_KERNELS=entry runs them after checking each
 * call's ranges, cpu_rowops.c). */
#define MODATTN_KERNEL_UNCHECKED 1
#include "backends/cpu/cpu_rowops.c"
