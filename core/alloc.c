/* core/alloc.c — the one allocator hook of modattn.
 *
 * Every block carries a 64-byte header (size, category, offset back to the malloc'ed pointer) so
 * that free() can un-count it. Counters are atomics: allocations may come from any thread.
 * A budget caps the total in use; fault injection fails the Nth attempt (tests). */
#include "modattn/core.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "core/alloc_internal.h"
#include "core/env.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define HDR 64u
#define MAGIC 0x6d6f6461u /* "moda" */

typedef struct hdr {
    size_t size;
    uint32_t magic;
    uint32_t cat;
} hdr;
_Static_assert(sizeof(hdr) <= HDR, "header fits");

static _Atomic int64_t g_cur[MODATTN_MEM_CATEGORY_COUNT];
static _Atomic int64_t g_peak[MODATTN_MEM_CATEGORY_COUNT];
static _Atomic int64_t g_cur_total;
static _Atomic int64_t g_peak_total;
static _Atomic uint64_t g_allocs;
static _Atomic uint64_t g_failures;
static _Atomic int64_t g_budget;
static _Atomic uint64_t g_fail_nth;    /* 0 = off */
static _Atomic uint64_t g_fail_count;  /* attempts since armed */
static _Thread_local int g_last_status;

const char *modattn_mem_category_name(modattn_mem_category cat) {
    static const char *names[] = {
#define X(name, text) text,
        MODATTN_MEM_CATEGORY_MAP(X)
#undef X
    };
    if ((unsigned)cat >= MODATTN_MEM_CATEGORY_COUNT) return "unknown";
    return names[cat];
}

static void update_peak(_Atomic int64_t *peak, int64_t v) {
    int64_t p = atomic_load_explicit(peak, memory_order_relaxed);
    while (v > p && !atomic_compare_exchange_weak_explicit(peak, &p, v, memory_order_relaxed,
                                                           memory_order_relaxed)) {
    }
}

/* Reserve `bytes` in category `cat` against the budget; returns 0 or an error status. */
static int reserve(modattn_mem_category cat, size_t bytes) {
    uint64_t nth = atomic_load_explicit(&g_fail_nth, memory_order_relaxed);
    if (nth) {
        uint64_t k = atomic_fetch_add(&g_fail_count, 1) + 1;
        if (k == nth) {
            atomic_fetch_add(&g_failures, 1);
            g_last_status = MODATTN_ENOMEM;
            return modattn__error(MODATTN_ENOMEM,
                                 "allocation of %zu bytes (%s) failed: injected failure #%llu",
                                 bytes, modattn_mem_category_name(cat), (unsigned long long)k);
        }
    }
    if (bytes > (size_t)INT64_MAX / 2) {
        atomic_fetch_add(&g_failures, 1);
        g_last_status = MODATTN_ENOMEM;
        return modattn__error(MODATTN_ENOMEM, "allocation of %zu bytes (%s) is too large", bytes,
                             modattn_mem_category_name(cat));
    }
    int64_t b = (int64_t)bytes;
    int64_t total = atomic_fetch_add(&g_cur_total, b) + b;
    int64_t budget = atomic_load_explicit(&g_budget, memory_order_relaxed);
    if (budget > 0 && total > budget) {
        atomic_fetch_sub(&g_cur_total, b);
        atomic_fetch_add(&g_failures, 1);
        g_last_status = MODATTN_EBUDGET;
        return modattn__error(MODATTN_EBUDGET,
                             "memory budget of %lld bytes exceeded: request of %zu bytes for %s "
                             "with %lld bytes already in use",
                             (long long)budget, bytes, modattn_mem_category_name(cat),
                             (long long)(total - b));
    }
    int64_t c = atomic_fetch_add(&g_cur[cat], b) + b;
    update_peak(&g_peak[cat], c);
    update_peak(&g_peak_total, total);
    return 0;
}

static void release(modattn_mem_category cat, size_t bytes) {
    atomic_fetch_sub(&g_cur[cat], (int64_t)bytes);
    atomic_fetch_sub(&g_cur_total, (int64_t)bytes);
}

/* For the other allocators of the library (core/json.c): the same accounting, their own blocks. */
int modattn__mem_reserve(modattn_mem_category cat, size_t bytes) { return reserve(cat, bytes); }

void modattn__mem_reserve_forced(modattn_mem_category cat, size_t bytes) {
    int64_t b = (int64_t)bytes;
    int64_t total = atomic_fetch_add(&g_cur_total, b) + b;
    int64_t c = atomic_fetch_add(&g_cur[cat], b) + b;
    update_peak(&g_peak[cat], c);
    update_peak(&g_peak_total, total);
}

void modattn__mem_release(modattn_mem_category cat, size_t bytes) { release(cat, bytes); }

int modattn__mem_inject(modattn_mem_category cat, size_t bytes, const char *where) {
    uint64_t nth = atomic_load_explicit(&g_fail_nth, memory_order_relaxed);
    if (!nth) return 0;
    uint64_t k = atomic_fetch_add(&g_fail_count, 1) + 1;
    if (k != nth) return 0;
    atomic_fetch_add(&g_failures, 1);
    g_last_status = MODATTN_ENOMEM;
    return modattn__error(MODATTN_ENOMEM, "allocation of %zu bytes (%s) on %s failed: injected failure #%llu", bytes,
                         modattn_mem_category_name(cat), where, (unsigned long long)k);
}

void modattn__mem_note_success(void) { atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed); }

void modattn__mem_note_failure(int status) {
    atomic_fetch_add(&g_failures, 1);
    g_last_status = status;
}

/* Large long-lived blocks (packed weights, activation arenas and attention caches, a store's
 * vectors: the weights, activations and index categories) are read in long streams: asked for on
 * 2 MiB pages where the kernel's transparent huge pages are "madvise" (Debian's default), so their
 * reads do not miss the TLB every 4 KiB. Only the whole 2 MiB pages inside the block are marked;
 * workspace (short-lived, per call) is left alone. MODATTN_HUGEPAGES=0 turns it off. */
#define HUGE_PAGE ((uintptr_t)2 << 20)
#define HUGE_MIN ((size_t)8 << 20)
static void advise_huge(void *raw, size_t total) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    static _Atomic int off = -1; /* -1: not read yet (several first callers read the same) */
    int o = atomic_load_explicit(&off, memory_order_relaxed);
    if (o < 0) {
        o = !modattn__env_bool("MODATTN_HUGEPAGES", true);
        atomic_store_explicit(&off, o, memory_order_relaxed);
    }
    if (o) return;
    const uintptr_t a = ((uintptr_t)raw + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1), e = ((uintptr_t)raw + total) & ~(HUGE_PAGE - 1);
    if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE); /* advice: its failure changes nothing */
#else
    (void)raw, (void)total;
#endif
}

void *modattn__malloc(size_t bytes, modattn_mem_category cat) {
    if ((unsigned)cat >= MODATTN_MEM_CATEGORY_COUNT) cat = MODATTN_MEM_OTHER;
    if (reserve(cat, bytes) != 0) return NULL;
    void *raw = NULL;
    size_t total = bytes + HDR;
    /* round up to the alignment, as aligned_alloc asks */
    total = (total + MODATTN_ALIGN - 1) & ~(size_t)(MODATTN_ALIGN - 1);
    if (total < bytes || posix_memalign(&raw, MODATTN_ALIGN, total) != 0) raw = NULL;
    if (!raw) {
        release(cat, bytes);
        atomic_fetch_add(&g_failures, 1);
        g_last_status = MODATTN_ENOMEM;
        modattn__error(MODATTN_ENOMEM, "out of memory: allocation of %zu bytes for %s failed", bytes,
                      modattn_mem_category_name(cat));
        return NULL;
    }
    if (total >= HUGE_MIN && (cat == MODATTN_MEM_WEIGHTS || cat == MODATTN_MEM_ACTIVATIONS || cat == MODATTN_MEM_INDEX))
        advise_huge(raw, total);
    hdr *h = (hdr *)raw;
    h->size = bytes;
    h->magic = MAGIC;
    h->cat = (uint32_t)cat;
    atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
    return (char *)raw + HDR;
}

void *modattn__calloc(size_t count, size_t size, modattn_mem_category cat) {
    if (size && count > SIZE_MAX / size) {
        atomic_fetch_add(&g_failures, 1);
        g_last_status = MODATTN_ENOMEM;
        modattn__error(MODATTN_ENOMEM, "allocation of %zu x %zu bytes for %s overflows", count, size,
                      modattn_mem_category_name(cat));
        return NULL;
    }
    void *p = modattn__malloc(count * size, cat);
    if (p) memset(p, 0, count * size);
    return p;
}

static hdr *header_of(const void *p) { return (hdr *)((char *)(uintptr_t)p - HDR); }

size_t modattn__mem_block_size(const void *ptr) { return ptr ? header_of(ptr)->size : 0; }

void modattn_free(void *ptr) {
    if (!ptr) return;
    hdr *h = header_of(ptr);
    if (h->magic != MAGIC) {
        /* our own bug: a pointer that did not come from modattn__malloc */
        fprintf(stderr, "modattn: modattn_free of a foreign or already freed pointer %p\n", ptr);
        abort();
    }
    h->magic = 0;
    release((modattn_mem_category)h->cat, h->size);
    free(h);
}

void *modattn__realloc(void *ptr, size_t bytes, modattn_mem_category cat) {
    if (!ptr) return modattn__malloc(bytes, cat);
    size_t old = header_of(ptr)->size;
    if (bytes <= old && bytes >= old / 2) return ptr; /* keep: not worth moving */
    void *n = modattn__malloc(bytes, cat);
    if (!n) return NULL; /* the old block is untouched */
    memcpy(n, ptr, old < bytes ? old : bytes);
    modattn_free(ptr);
    return n;
}

char *modattn__strndup(const char *s, size_t n, modattn_mem_category cat) {
    size_t len = strnlen(s, n);
    char *d = modattn__malloc(len + 1, cat);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

char *modattn__strdup(const char *s, modattn_mem_category cat) {
    return modattn__strndup(s, SIZE_MAX, cat);
}

int modattn__mem_last_status(void) { return g_last_status ? g_last_status : MODATTN_ENOMEM; }

int modattn__mem_account(modattn_mem_category cat, int64_t delta) {
    if ((unsigned)cat >= MODATTN_MEM_CATEGORY_COUNT) cat = MODATTN_MEM_OTHER;
    if (delta >= 0) return reserve(cat, (size_t)delta);
    release(cat, (size_t)(-delta));
    return 0;
}

void modattn_mem_get_stats(modattn_mem_stats *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < MODATTN_MEM_CATEGORY_COUNT; i++) {
        out->current[i] = atomic_load(&g_cur[i]);
        out->peak[i] = atomic_load(&g_peak[i]);
    }
    out->current_total = atomic_load(&g_cur_total);
    out->peak_total = atomic_load(&g_peak_total);
    out->allocations = atomic_load(&g_allocs);
    out->failures = atomic_load(&g_failures);
    out->budget = atomic_load(&g_budget);
}

void modattn__mem_reset_peak(void) {
    for (int i = 0; i < MODATTN_MEM_CATEGORY_COUNT; i++) atomic_store(&g_peak[i], atomic_load(&g_cur[i]));
    atomic_store(&g_peak_total, atomic_load(&g_cur_total));
}

void modattn_mem_set_budget(int64_t bytes) { atomic_store(&g_budget, bytes > 0 ? bytes : 0); }

void modattn__mem_fail_nth(uint64_t n) {
    atomic_store(&g_fail_count, 0);
    atomic_store(&g_fail_nth, n);
}

uint64_t modattn__mem_fail_counter(void) { return atomic_load(&g_fail_count); }

int modattn__parse_bytes(const char *text, int64_t *out) {
    if (!text || !*text) return modattn__error(MODATTN_EINVAL, "empty byte count");
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || errno == ERANGE || text[0] == '-')
        return modattn__error(MODATTN_EINVAL, "'%s' is not a byte count (expected e.g. 512M)", text);
    unsigned long long mul = 1;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': mul = 1ull << 10; break;
        case 'm': case 'M': mul = 1ull << 20; break;
        case 'g': case 'G': mul = 1ull << 30; break;
        case 't': case 'T': mul = 1ull << 40; break;
        default:
            return modattn__error(MODATTN_EINVAL, "'%s': unknown unit '%c' (use K, M, G or T)", text, *end);
        }
        end++;
        if (*end == 'i') end++;
        if (*end == 'B' || *end == 'b') end++;
        if (*end) return modattn__error(MODATTN_EINVAL, "'%s' is not a byte count (expected e.g. 512M)", text);
    }
    if (v > (unsigned long long)INT64_MAX / mul)
        return modattn__error(MODATTN_EINVAL, "'%s' is too large", text);
    *out = (int64_t)(v * mul);
    return 0;
}
