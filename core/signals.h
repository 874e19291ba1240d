/* core/signals.h — asynchronous signals held off while a third-party JIT kernel runs.
 *
 * oneDNN's JIT f32 GEMM kernels for AVX2 and AVX-512 (jit_avx2_gemm_f32, jit_avx512_common_gemm_f32,
 * what dnnl_sgemm and matmul's gemm:jit run where brgemm does not apply, e.g. on AVX2-only CPUs)
 * point the stack pointer into a heap buffer while they run. A signal handled on that thread then
 * writes its frame over the heap: glibc aborts later ("corrupted size vs. prev_size"). Reported as
 * oneDNN issue #4845, fixed by PR #4855 (2026) after the oneDNN in Debian 12 (2.7). Reproduced here:
 * a no-op SIGUSR1 handler, SIGUSR1 every 10 ms, 400 texts embedded: 2 crashes in 4 runs on an AVX2
 * host; and Ctrl-C in a Python program that installs its SIGINT handler. So the calling thread holds
 * asynchronous signals (all but the synchronous faults) for the length of each such call, and they are
 * delivered right after: a few hundred nanoseconds per call of ~1 ms. The thread's mask is restored
 * exactly. Our pool's own threads block asynchronous signals for their whole life (core/pool.c). */
#ifndef MODATTN_CORE_SIGNALS_H
#define MODATTN_CORE_SIGNALS_H

#include <pthread.h>
#include <signal.h>

/* Every signal except those a fault raises synchronously on the faulting thread (blocking those
 * would turn a crash into a hang or undefined behaviour). */
static inline void modattn__async_signals(sigset_t *s) {
    sigfillset(s);
    sigdelset(s, SIGSEGV);
    sigdelset(s, SIGBUS);
    sigdelset(s, SIGFPE);
    sigdelset(s, SIGILL);
    sigdelset(s, SIGTRAP);
    sigdelset(s, SIGABRT);
}

static inline void modattn__signals_hold(sigset_t *old) {
    sigset_t s;
    modattn__async_signals(&s);
    pthread_sigmask(SIG_BLOCK, &s, old);
}

static inline void modattn__signals_release(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

#endif
