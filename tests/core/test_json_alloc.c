/* tests/core/test_json_alloc.c — jansson through modattn's allocator: opting in (refused when
 * other code already gave jansson its functions), counting in "other", the matching free,
 * json_dumps with every allocation failing in turn, and the guarded parser
 * (modattn__json_loadb / modattn__json_load_file) under fault injection and a budget: every failure
 * is a clean error with no leak and never a wrong value, on input built to hit jansson's unsafe
 * spot (a failed growth of its token buffer at a string's closing quote, inside a number, inside
 * an escape). */
#include <fcntl.h>
#include <jansson.h>
#include <unistd.h>

#include "modattn/modattn.h"
#include "core/internal_core.h"
#include "test_util.h"

static int64_t total_now(void) {
    modattn_mem_stats s;
    modattn_mem_get_stats(&s);
    return s.current_total;
}

static int64_t other_now(void) {
    modattn_mem_stats s;
    modattn_mem_get_stats(&s);
    return s.current[MODATTN_MEM_OTHER];
}

static int foreign_mallocs, foreign_frees;
static void *foreign_malloc(size_t n) {
    foreign_mallocs++;
    return malloc(n);
}
static void foreign_free(void *p) {
    if (p) foreign_frees++;
    free(p);
}

/* jansson's lexer keeps the token it reads in a buffer of 16 bytes that doubles when full; if
 * that growth fails it drops the byte it was saving. The tokens below put the growths on bytes
 * where that does damage: 16 -> 32 at a key's closing quote (quote + 14 + quote), 32 -> 64 at a
 * significant digit of a number, 64 -> 128 at a string's closing quote (quote + 62 + quote),
 * 128 -> 256 at the 'u' of a \u escape. Parsed by plain json_loadb with those allocations
 * failing, jansson 2.14 returns a wrong value for the number as success, crashes (SIGSEGV) on
 * the 64 -> 128 growth and fails an assert on the \u. */
static char *build_text(void) {
    char *t = malloc(4096);
    char s62[63], s200[400];
    memset(s62, 'q', 62);
    s62[62] = '\0';
    /* 125 bytes of plain text: the 'u' of the first escape is the token's 128th byte */
    size_t k = 0;
    for (int i = 0; i < 125; i++) s200[k++] = 'a' + (char)(i % 26);
    for (int i = 0; i < 20; i++) k += (size_t)snprintf(s200 + k, sizeof s200 - k, "\\u00e9");
    s200[k] = '\0';
    snprintf(t, 4096,
             "{\"abcdefghijklmn\": \"x\", \"r\": 0.00000000000000000000000000012345, "
             "\"s\": \"%s\", \"e\": \"%s\", \"list\": [1, 2.5, true, false, null, \"\\n\\t\", "
             "{\"deep\": [[], {}, [1, [2, [3]]]]}], \"n\": -12345678901234, \"tail\": \"end\"}",
             s62, s200);
    return t;
}

static void test_unrouted(void) {
    CHECK(!modattn__json_allocations_counted());
    int64_t other0 = other_now();
    json_t *j = NULL;
    CHECK(modattn__json_loadb("{\"a\": [1, 2, 3]}", 16, 0, &j, NULL) == 0 && j);
    CHECK(other_now() == other0); /* jansson is not counted until asked */
    json_decref(j);
}

static void test_opt_in(void) {
    CHECK(modattn__json_count_allocations() == 0);
    CHECK(modattn__json_allocations_counted());
    CHECK(modattn__json_count_allocations() == 0); /* again: nothing changes */
    CHECK(modattn__json_allocations_counted());

    /* another party's functions are left alone */
    json_set_alloc_funcs(foreign_malloc, foreign_free);
    CHECK_ERR(modattn__json_count_allocations(), MODATTN_EINVAL, "json_set_alloc_funcs");
    CHECK(!modattn__json_allocations_counted());
    json_t *o = json_pack("{s:i}", "x", 1);
    char *s = json_dumps(o, 0);
    json_decref(o);
    int frees = foreign_frees;
    modattn__json_free(s); /* the free jansson uses now: the foreign one */
    CHECK(s && foreign_frees == frees + 1 && foreign_mallocs > 0);
    json_set_alloc_funcs(malloc, free);
    CHECK(modattn__json_count_allocations() == 0);
    CHECK(modattn__json_allocations_counted());
}

static void test_counting(void) {
    int64_t other0 = other_now(), total0 = total_now();
    json_t *o = json_pack("{s:s, s:[i,i,i]}", "name", "counted", "ids", 1, 2, 3);
    CHECK(o && other_now() > other0);
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK(s && strcmp(s, "{\"ids\":[1,2,3],\"name\":\"counted\"}") == 0);
    int64_t with_string = other_now();
    json_decref(o);
    CHECK(other_now() - other0 >= (int64_t)strlen(s) + 1); /* the string is counted ... */
    CHECK(other_now() < with_string);
    modattn__json_free(s);
    CHECK(other_now() == other0 && total_now() == total0); /* ... and un-counted by the free */
    modattn__json_free(NULL);
    CHECK(total_now() == total0);
}

/* json_dumps with the Nth allocation failing: jansson is not refused (it would drop bytes), the
 * text is exact, the failure is reported by modattn__json_take_failure(), and nothing leaks. */
static void test_dumps_sweep(const json_t *doc) {
    char *want = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
    CHECK(want != NULL && modattn__json_take_failure() == 0);
    int64_t base = total_now();
    int points = 0, done = 0;
    for (uint64_t n = 1; n < 5000 && !done; n++) {
        modattn_mem_stats before, after;
        modattn_mem_get_stats(&before);
        modattn__mem_fail_nth(n);
        char *s = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
        uint64_t attempts = modattn__mem_fail_counter();
        modattn__mem_fail_nth(0);
        int st = modattn__json_take_failure();
        modattn_mem_get_stats(&after);
        CHECK_MSG(s && strcmp(s, want) == 0, "allocation #%llu failing: json_dumps gave %s", (unsigned long long)n,
                  s ? "other text" : "NULL");
        modattn__json_free(s);
        if (attempts < n) {
            CHECK(st == 0 && after.failures == before.failures);
            done = 1;
        } else {
            points++;
            CHECK_MSG(st == MODATTN_ENOMEM && strstr(modattn_last_error(), "injected") &&
                          after.failures == before.failures + 1,
                      "#%llu: status %d, message '%s'", (unsigned long long)n, st, modattn_last_error());
        }
        CHECK_MSG(total_now() == base, "json_dumps with allocation #%llu failing leaked %lld bytes",
                  (unsigned long long)n, (long long)(total_now() - base));
    }
    CHECK(done && points > 5);
    printf("json_dumps: %d allocation points, each failure reported, the text always exact\n", points);
    modattn__json_free(want);

    /* over the budget: served, counted, reported */
    base = total_now();
    int64_t budget = base + 64;
    modattn_mem_set_budget(budget);
    json_t *o = json_pack("{s:s}", "key", "a value longer than the budget's 64 bytes, to be sure of it");
    modattn_mem_set_budget(0);
    char need[64];
    snprintf(need, sizeof need, "memory budget of %lld bytes", (long long)budget);
    CHECK(o && json_object_size(o) == 1);
    CHECK_ERR(modattn__json_take_failure(), MODATTN_EBUDGET, need);
    CHECK(modattn__json_take_failure() == 0); /* taken */
    json_decref(o);
    CHECK(total_now() == base);
}

/* The guarded parse with the Nth allocation failing: an out-of-memory error with nothing left
 * over, or the exact document; never a wrong value or a damaged heap. */
static void test_parse_sweep(const char *text, const json_t *ref) {
    int64_t base = total_now();
    int points = 0, done = 0;
    for (uint64_t n = 1; n < 20000 && !done; n++) {
        json_t *j = (json_t *)1;
        json_error_t err;
        modattn__mem_fail_nth(n);
        int st = modattn__json_loadb(text, strlen(text), JSON_REJECT_DUPLICATES, &j, &err);
        uint64_t attempts = modattn__mem_fail_counter();
        modattn__mem_fail_nth(0);
        if (st == 0) {
            CHECK_MSG(attempts < n, "allocation #%llu failed but the parse succeeded", (unsigned long long)n);
            CHECK_MSG(json_equal(j, ref), "allocation #%llu: the parse gave another document", (unsigned long long)n);
            done = 1;
            json_decref(j);
        } else {
            points++;
            CHECK_MSG(st == MODATTN_ENOMEM && j == NULL && strstr(modattn_last_error(), "injected") &&
                          json_error_code(&err) == json_error_out_of_memory,
                      "allocation #%llu: status %d, message '%s'", (unsigned long long)n, st, modattn_last_error());
        }
        CHECK_MSG(total_now() == base, "parse with allocation #%llu failing leaked %lld bytes",
                  (unsigned long long)n, (long long)(total_now() - base));
    }
    CHECK(done && points > 20);
    printf("guarded parse: %d allocation points, each failure clean\n", points);
}

static void test_parse_budget(const char *text) {
    int64_t base = total_now();
    int64_t budget = base + 200;
    modattn_mem_set_budget(budget);
    json_t *j = NULL;
    json_error_t err;
    int st = modattn__json_loadb(text, strlen(text), 0, &j, &err);
    modattn_mem_set_budget(0);
    char want[64];
    snprintf(want, sizeof want, "memory budget of %lld bytes", (long long)budget);
    CHECK_MSG(st == MODATTN_EBUDGET && j == NULL && strstr(modattn_last_error(), want) &&
                  strstr(modattn_last_error(), "other"),
              "status %d, message '%s'", st, modattn_last_error());
    CHECK(json_error_code(&err) == json_error_out_of_memory);
    CHECK(total_now() == base);

    /* a big document: the parse stops within the 1 KiB block where the budget ran out */
    size_t big = 1u << 20;
    char *doc = malloc(big + 64);
    size_t k = 0;
    doc[k++] = '[';
    while (k < big) k += (size_t)snprintf(doc + k, big + 64 - k, "\"%06zu\", ", k);
    memcpy(doc + k, "0]", 3);
    k += 2;
    budget = base + 16384;
    modattn_mem_set_budget(budget);
    modattn__mem_reset_peak();
    st = modattn__json_loadb(doc, k, 0, &j, NULL);
    modattn_mem_set_budget(0);
    modattn_mem_stats s;
    modattn_mem_get_stats(&s);
    CHECK_MSG(st == MODATTN_EBUDGET && j == NULL, "status %d: %s", st, modattn_last_error());
    CHECK_MSG(s.peak_total <= budget + 64 * 1024, "the parse went %lld bytes past the budget",
              (long long)(s.peak_total - budget));
    printf("1 MiB document under a 16 KiB budget: peak %lld bytes past the budget\n",
           (long long)(s.peak_total - budget));
    CHECK(total_now() == base);
    /* without the budget it parses */
    CHECK(modattn__json_loadb(doc, k, 0, &j, NULL) == 0 && json_array_size(j) > 10000);
    json_decref(j);
    free(doc);
}

static void test_files(void) {
    int64_t base = total_now();
    json_t *j = NULL;
    json_error_t err;
    CHECK_ERR(modattn__json_load_file("/nonexistent/x.json", 0, &j, &err), MODATTN_EIO, "/nonexistent/x.json");
    CHECK(j == NULL && json_error_code(&err) == json_error_cannot_open_file);
    char path[] = "/tmp/modattn_json_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, "{\"a\": [1,\n 2,]}", 15) == 15);
    close(fd);
    CHECK_ERR(modattn__json_load_file(path, 0, &j, &err), MODATTN_EFORMAT, "line 2");
    CHECK(j == NULL && err.line == 2 && strstr(err.text, "unexpected token"));
    fd = open(path, O_WRONLY | O_TRUNC);
    CHECK(write(fd, "{\"a\": [1, 2]}", 13) == 13);
    close(fd);
    CHECK(modattn__json_load_file(path, 0, &j, &err) == 0 && json_array_size(json_object_get(j, "a")) == 2);
    json_decref(j);
    CHECK_ERR(modattn__json_loadb("{\"a\":1,\"a\":2}", 13, JSON_REJECT_DUPLICATES, &j, &err), MODATTN_EFORMAT,
              "duplicate");
    CHECK(modattn__json_loadb("\"x\"", 3, 0, &j, NULL) == MODATTN_EFORMAT); /* flags pass through ... */
    CHECK(modattn__json_loadb("\"x\"", 3, JSON_DECODE_ANY, &j, NULL) == 0 && json_is_string(j)); /* ... */
    json_decref(j);
    unlink(path);
    CHECK(total_now() == base);
}

int main(void) {
    test_unrouted(); /* before any jansson memory is live for good */
    test_opt_in();
    test_counting();
    char *text = build_text();
    json_t *ref = NULL;
    CHECK(modattn__json_loadb(text, strlen(text), JSON_REJECT_DUPLICATES, &ref, NULL) == 0);
    CHECK(ref && json_object_size(ref) == 7 && json_string_length(json_object_get(ref, "s")) == 62);
    if (ref) {
        test_dumps_sweep(ref);
        test_parse_sweep(text, ref);
    }
    test_parse_budget(text);
    test_files();
    json_decref(ref);
    free(text);
    CHECK_MSG(total_now() == 0, "%lld bytes still allocated", (long long)total_now());
    return test_finish("test_json_alloc");
}
