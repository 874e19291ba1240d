/* tests/core/test_core.c — status codes, the allocator's accounting, budget and fault injection,
 * byte parsing, the thread pool, CPU features and tracing. */
#include "modattn/modattn.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "test_util.h"

#include <stdatomic.h>
#include <unistd.h>

static void sum_task(void *ctx, int64_t i, int thread) {
    (void)thread;
    atomic_fetch_add((_Atomic int64_t *)ctx, i);
}

int main(void) {
    /* status */
    CHECK(strcmp(modattn_strerror(MODATTN_OK), "ok") == 0);
    CHECK(strcmp(modattn_strerror(MODATTN_EBUDGET), "memory budget exceeded") == 0);
    CHECK(strcmp(modattn_status_name(MODATTN_EINVAL), "MODATTN_EINVAL") == 0);
    CHECK(strcmp(modattn_strerror(12345), "unknown status") == 0);
    CHECK_ERR(modattn__error(MODATTN_EIO, "file %s", "x.json"), MODATTN_EIO, "file x.json");
    modattn__error_prefix(MODATTN_EIO, "loading");
    CHECK(strcmp(modattn_last_error(), "loading: file x.json") == 0);

    /* allocator accounting */
    modattn_mem_stats a, b;
    modattn_mem_get_stats(&a);
    void *p = modattn__malloc(1000, MODATTN_MEM_WEIGHTS);
    CHECK(p != NULL && ((uintptr_t)p % MODATTN_ALIGN) == 0);
    modattn_mem_get_stats(&b);
    CHECK(b.current[MODATTN_MEM_WEIGHTS] - a.current[MODATTN_MEM_WEIGHTS] == 1000);
    CHECK(b.current_total - a.current_total == 1000);
    CHECK(modattn__mem_block_size(p) == 1000);
    p = modattn__realloc(p, 5000, MODATTN_MEM_WEIGHTS);
    CHECK(p != NULL);
    modattn_mem_get_stats(&b);
    CHECK(b.current[MODATTN_MEM_WEIGHTS] - a.current[MODATTN_MEM_WEIGHTS] == 5000);
    CHECK(b.peak[MODATTN_MEM_WEIGHTS] >= b.current[MODATTN_MEM_WEIGHTS]);
    modattn_free(p);
    modattn_mem_get_stats(&b);
    CHECK(b.current_total == a.current_total);
    CHECK(modattn__calloc(SIZE_MAX / 2, 4, MODATTN_MEM_OTHER) == NULL);

    /* budget */
    modattn_mem_set_budget(a.current_total + 4096);
    void *ok = modattn__malloc(1024, MODATTN_MEM_ACTIVATIONS);
    CHECK(ok != NULL);
    void *no = modattn__malloc(8192, MODATTN_MEM_ACTIVATIONS);
    CHECK(no == NULL);
    CHECK(modattn__mem_last_status() == MODATTN_EBUDGET);
    CHECK(strstr(modattn_last_error(), "budget") && strstr(modattn_last_error(), "activations") &&
          strstr(modattn_last_error(), "8192"));
    CHECK(modattn__mem_account(MODATTN_MEM_WEIGHTS, 1 << 20) == MODATTN_EBUDGET);
    modattn_free(ok);
    modattn_mem_set_budget(0);
    CHECK(modattn__mem_account(MODATTN_MEM_WEIGHTS, 1 << 20) == 0);
    CHECK(modattn__mem_account(MODATTN_MEM_WEIGHTS, -(1 << 20)) == 0);

    /* fault injection: the 2nd allocation fails, the others succeed */
    modattn__mem_fail_nth(2);
    void *x1 = modattn__malloc(10, MODATTN_MEM_OTHER);
    void *x2 = modattn__malloc(10, MODATTN_MEM_OTHER);
    void *x3 = modattn__malloc(10, MODATTN_MEM_OTHER);
    modattn__mem_fail_nth(0);
    CHECK(x1 && !x2 && x3);
    CHECK(strstr(modattn_last_error(), "injected"));
    modattn_free(x1), modattn_free(x3);

    /* byte counts */
    int64_t v;
    CHECK(modattn__parse_bytes("512M", &v) == 0 && v == 512ll << 20);
    CHECK(modattn__parse_bytes("2G", &v) == 0 && v == 2ll << 30);
    CHECK(modattn__parse_bytes("64k", &v) == 0 && v == 64 << 10);
    CHECK(modattn__parse_bytes("123", &v) == 0 && v == 123);
    CHECK(modattn__parse_bytes("1.5G", &v) == MODATTN_EINVAL);
    CHECK(modattn__parse_bytes("-5", &v) == MODATTN_EINVAL);
    CHECK(modattn__parse_bytes("12X", &v) == MODATTN_EINVAL);
    CHECK(modattn__parse_bytes("99999999999999999999", &v) == MODATTN_EINVAL);

    /* pool */
    for (int threads = 1; threads <= 4; threads++) {
        modattn_pool *pool;
        CHECK(modattn__pool_create(threads, &pool) == 0);
        CHECK(modattn__pool_threads(pool) == threads);
        for (int rep = 0; rep < 50; rep++) {
            _Atomic int64_t sum = 0;
            modattn__pool_run(pool, 1000, sum_task, &sum);
            CHECK(sum == 999 * 1000 / 2);
        }
        modattn__pool_free(pool);
    }
    modattn_pool *bad;
    CHECK(modattn__pool_create(5000, &bad) == MODATTN_EINVAL);

    /* CPU features: described consistently; masking works */
    const modattn_cpu_features *f = modattn__cpu_get();
    CHECK(f->logical_cpus >= 1);
    CHECK(!f->avx512f || f->avx); /* never AVX-512 without the OS saving AVX state */
    char desc[256];
    modattn__cpu_describe(desc, sizeof desc);
    CHECK(!f->avx2 || strstr(desc, "avx2"));

    /* tracing: off records nothing; on records spans */
    CHECK(modattn__trace_begin() == 0);
    modattn__trace_enable(true);
    uint64_t t0 = modattn__trace_begin();
    CHECK(t0 != 0);
    modattn__trace_end(t0, "unit", "test", "1x2", 8, 16);
    CHECK(modattn__trace_count() == 1);
    modattn_trace_span s;
    CHECK(modattn__trace_get(0, &s) == 0 && strcmp(s.name, "unit") == 0 && s.flops == 16 && s.t1_ns >= s.t0_ns);
    char path[] = "/tmp/modattn_trace_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK(modattn__trace_write_json(path) == 0);
    FILE *tf = fopen(path, "r");
    char buf[512] = "";
    size_t nr = tf ? fread(buf, 1, sizeof buf - 1, tf) : 0;
    buf[nr] = '\0';
    if (tf) fclose(tf);
    unlink(path);
    CHECK(strstr(buf, "\"traceEvents\"") && strstr(buf, "\"name\":\"unit\""));
    /* names that go away after the call (a plugin unloaded, a caller's buffer): the trace keeps
     * its own copies (the CLI's --trace crashed once a plugin that ran had been unloaded) */
    {
        char *nm = strdup("span.from_a_buffer"), *im = strdup("plugin_impl");
        CHECK(nm && im);
        uint64_t t1 = modattn__trace_begin();
        modattn__trace_end(t1, nm, im, "", 0, 0);
        memset(nm, 'x', strlen(nm)), memset(im, 'y', strlen(im));
        free(nm), free(im);
        modattn_trace_span s2;
        CHECK(modattn__trace_get(1, &s2) == 0 && strcmp(s2.name, "span.from_a_buffer") == 0 &&
              strcmp(s2.impl, "plugin_impl") == 0);
        char path2[] = "/tmp/modattn_trace2_XXXXXX";
        fd = mkstemp(path2);
        CHECK(fd >= 0);
        close(fd);
        CHECK(modattn__trace_write_json(path2) == 0);
        tf = fopen(path2, "r");
        char big[4096] = "";
        nr = tf ? fread(big, 1, sizeof big - 1, tf) : 0;
        big[nr] = '\0';
        if (tf) fclose(tf);
        unlink(path2);
        CHECK(strstr(big, "\"name\":\"span.from_a_buffer\"") && strstr(big, "\"impl\":\"plugin_impl\""));
    }
    modattn__trace_clear();
    modattn__trace_enable(false);
    CHECK(modattn__trace_count() == 0);

    modattn_mem_stats end;
    modattn_mem_get_stats(&end);
    CHECK_MSG(end.current_total == a.current_total, "leaked %lld bytes", (long long)(end.current_total - a.current_total));
    return test_finish("test_core");
}
