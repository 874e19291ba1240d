/* tests/model/test_tokenizer_unit.c — the tokenizer without the model files:
 * goldens of the small committed tests/fixtures/tokenizer_tiny.json (from HF tokenizers), the
 * API contract (budgets, flags, offsets, accessors), load errors that name the file and field,
 * allocation-failure injection without leaks, linear time on hostile long inputs, and
 * concurrent use of one tokenizer from several threads. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "modattn/core.h"
#include "modattn/tokenizer.h"
#include "core/internal_core.h"
#include "test_util.h"
#include "model/golden_util.h"

#define TINY "tests/fixtures/tokenizer_tiny.json"

static int64_t mem_now(void) {
    modattn_mem_stats s;
    modattn_mem_get_stats(&s);
    return s.current_total;
}

/* Writes `text` to a temporary file and tries to load it; returns the status. */
static int load_text(const char *text, char *path_out, size_t path_len) {
    char path[] = "/tmp/modattn_tok_unit_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return -100;
    size_t n = strlen(text);
    if (write(fd, text, n) != (ssize_t)n) {
        close(fd);
        return -100;
    }
    close(fd);
    modattn_tokenizer *t = NULL;
    int rc = modattn_tokenizer_load(path, &t);
    modattn_tokenizer_free(t);
    unlink(path);
    if (path_out) snprintf(path_out, path_len, "%s", path);
    return rc;
}

/* The tiny tokenizer.json with one field replaced (a JSON fragment), as a string. */
static char *tiny_with(const char *field, const char *json_value) {
    json_error_t err;
    json_t *j = json_load_file(TINY, 0, &err);
    if (!j) return NULL;
    json_t *v = json_loads(json_value, JSON_DECODE_ANY, &err);
    const char *dot = strchr(field, '.');
    if (dot) {
        char top[64];
        snprintf(top, sizeof top, "%.*s", (int)(dot - field), field);
        json_object_set_new(json_object_get(j, top), dot + 1, v);
    } else {
        json_object_set_new(j, field, v);
    }
    char *s = json_dumps(j, 0);
    json_decref(j);
    return s;
}

static void check_load_error(const char *field, const char *value, int want, const char *needle) {
    char *text = tiny_with(field, value);
    char path[64] = "";
    int rc = load_text(text, path, sizeof path);
    const char *msg = modattn_last_error();
    CHECK_MSG(rc == want && strstr(msg, needle) && strstr(msg, path),
              "%s=%s: status %d (want %d), message '%s' (want '%s' and the file name)", field, value,
              rc, want, msg, needle);
    modattn__json_free(text); /* from json_dumps */
}

static void test_errors(void) {
    modattn_tokenizer *t = NULL;
    CHECK_ERR(modattn_tokenizer_load("/nonexistent/tokenizer.json", &t), MODATTN_EIO,
              "/nonexistent/tokenizer.json");
    CHECK(t == NULL);
    CHECK_ERR(load_text("{\"model\": ", NULL, 0), MODATTN_EFORMAT, "line");
    CHECK_ERR(load_text("[1, 2]", NULL, 0), MODATTN_EFORMAT, "object");
    CHECK_ERR(load_text("{}", NULL, 0), MODATTN_EFORMAT, "\"model\"");
    check_load_error("normalizer", "{\"type\": \"NFKC\"}", MODATTN_EUNSUPPORTED, "normalizer.type");
    check_load_error("normalizer.strip_accents", "\"yes\"", MODATTN_EFORMAT, "normalizer.strip_accents");
    check_load_error("normalizer.lowercase", "1", MODATTN_EFORMAT, "normalizer.lowercase");
    check_load_error("pre_tokenizer", "{\"type\": \"Whitespace\"}", MODATTN_EUNSUPPORTED, "pre_tokenizer.type");
    check_load_error("model.type", "\"WordLevel\"", MODATTN_EUNSUPPORTED, "model.type");
    check_load_error("model.vocab", "[]", MODATTN_EFORMAT, "model.vocab");
    check_load_error("model.vocab", "{}", MODATTN_EFORMAT, "model.vocab");
    check_load_error("model.vocab", "{\"a\": -1}", MODATTN_ERANGE, "model.vocab");
    check_load_error("model.vocab", "{\"a\": 99999999999}", MODATTN_ERANGE, "model.vocab");
    check_load_error("model.vocab", "{\"a\": \"x\"}", MODATTN_EFORMAT, "model.vocab");
    check_load_error("model.vocab", "{\"a\": 0, \"b\": 0}", MODATTN_EFORMAT, "model.vocab");
    check_load_error("model.max_input_chars_per_word", "-3", MODATTN_EFORMAT, "max_input_chars_per_word");
    check_load_error("model.continuing_subword_prefix", "7", MODATTN_EFORMAT, "continuing_subword_prefix");
    check_load_error("post_processor", "{\"type\": \"Sequence\", \"processors\": [{\"type\": \"Nonsense\"}]}",
                     MODATTN_EUNSUPPORTED, "post_processor.type");
    check_load_error("post_processor", "{\"type\": \"BertProcessing\", \"cls\": [\"[CLS]\", 2], \"sep\": [\"[SEP]\", 99999]}",
                     MODATTN_ERANGE, "post_processor");
    check_load_error("added_tokens", "[{\"id\": 1}]", MODATTN_EFORMAT, "added_tokens");
    check_load_error("added_tokens", "7", MODATTN_EFORMAT, "added_tokens");
}

static void test_api(const modattn_tokenizer *t) {
    int32_t ids[64];
    modattn_token_offset off[64];
    size_t n = 99;
    const char *s = "Hello, World!";
    CHECK_ERR(modattn_tokenize(t, s, strlen(s), ids, 1, &n), MODATTN_EINVAL, "max_tokens");
    CHECK(n == 0);
    CHECK_ERR(modattn_tokenize(t, s, strlen(s), ids, 0, &n), MODATTN_EINVAL, "max_tokens");
    CHECK_ERR(modattn_tokenize(NULL, s, 1, ids, 8, &n), MODATTN_EINVAL, "NULL");
    CHECK_ERR(modattn_tokenize(t, NULL, 1, ids, 8, &n), MODATTN_EINVAL, "NULL");
    CHECK_ERR(modattn_tokenize_ex(t, s, 1, 0x80, ids, NULL, 8, &n), MODATTN_EINVAL, "flags");
    CHECK(modattn_tokenize(t, NULL, 0, ids, 8, &n) == 0 && n == 2);

    int32_t cls = modattn_tokenizer_cls_id(t), sep = modattn_tokenizer_sep_id(t);
    CHECK(cls == modattn_tokenizer_find(t, "[CLS]", 5) && sep == modattn_tokenizer_find(t, "[SEP]", 5));
    CHECK(modattn_tokenizer_unk_id(t) == modattn_tokenizer_find(t, "[UNK]", 5));
    CHECK(modattn_tokenizer_pad_id(t) == 0);
    CHECK(modattn_tokenizer_num_specials(t) == 2);
    CHECK(modattn_tokenizer_vocab_size(t) == 380);
    CHECK(modattn_tokenizer_token(t, -1) == NULL);
    CHECK(modattn_tokenizer_token(t, 380) == NULL);
    CHECK(strcmp(modattn_tokenizer_token(t, cls), "[CLS]") == 0);
    CHECK(strcmp(modattn_tokenizer_token(t, 379), "qqq") == 0); /* an added token past the vocab */
    CHECK(modattn_tokenizer_find(t, "nope", 4) == -1);

    /* budget 2: specials only; offsets {0,0} for them */
    CHECK(modattn_tokenize_offsets(t, s, strlen(s), ids, off, 2, &n) == 0);
    CHECK(n == 2 && ids[0] == cls && ids[1] == sep && off[0].end == 0 && off[1].end == 0);

    /* "hello , world !" */
    CHECK(modattn_tokenize_offsets(t, s, strlen(s), ids, off, 64, &n) == 0);
    CHECK(n == 6);
    CHECK(strcmp(modattn_tokenizer_token(t, ids[1]), "hello") == 0 && off[1].start == 0 && off[1].end == 5);
    CHECK(strcmp(modattn_tokenizer_token(t, ids[2]), ",") == 0 && off[2].start == 5 && off[2].end == 6);
    CHECK(strcmp(modattn_tokenizer_token(t, ids[3]), "world") == 0 && off[3].start == 7 && off[3].end == 12);
    CHECK(ids[5] == sep);

    /* no specials; the budget cuts inside a word: "un ##aff ##able" */
    const char *u = "unaffable";
    CHECK(modattn_tokenize_ex(t, u, strlen(u), MODATTN_TOKENIZE_NO_SPECIALS, ids, off, 64, &n) == 0);
    CHECK(n == 3 && strcmp(modattn_tokenizer_token(t, ids[1]), "##aff") == 0 && off[1].start == 2 && off[1].end == 5);
    CHECK(modattn_tokenize_ex(t, u, strlen(u), MODATTN_TOKENIZE_NO_SPECIALS, ids, NULL, 2, &n) == 0 && n == 2);
    CHECK(modattn_tokenize_ex(t, u, strlen(u), MODATTN_TOKENIZE_NO_SPECIALS, NULL, NULL, 0, &n) == 0 && n == 0);
    CHECK(modattn_tokenize(t, u, strlen(u), ids, 3, &n) == 0 && n == 3 && ids[2] == sep);

    /* the text is not read past len, and needs no NUL */
    char buf[5] = {'h', 'e', 'l', 'l', 'o'};
    CHECK(modattn_tokenize(t, buf, 5, ids, 64, &n) == 0 && n == 3);
    /* an accented character: the piece covers both bytes of é */
    CHECK(modattn_tokenize_offsets(t, "caf\xc3\xa9", 5, ids, off, 64, &n) == 0);
    CHECK(n == 3 && strcmp(modattn_tokenizer_token(t, ids[1]), "cafe") == 0 && off[1].end == 5);
    /* invalid bytes vanish (U+FFFD is dropped by clean_text) without splitting the word */
    CHECK(modattn_tokenize_offsets(t, "caf\xff\xfe" "e", 6, ids, off, 64, &n) == 0);
    CHECK(n == 3 && strcmp(modattn_tokenizer_token(t, ids[1]), "cafe") == 0 && off[1].start == 0 && off[1].end == 6);
}

/* Loading with the Nth allocation failing, N = 1, 2, ... until it loads: a clean out-of-memory
 * error each time and nothing leaked. Returns the number of allocation points. */
static int sweep_load(void) {
    int64_t base = mem_now();
    int loaded = 0, points = 0;
    for (uint64_t k = 1; k < 20000 && !loaded; k++) {
        modattn_tokenizer *t = NULL;
        modattn__mem_fail_nth(k);
        int rc = modattn_tokenizer_load(TINY, &t);
        modattn__mem_fail_nth(0);
        if (rc == 0) {
            loaded = 1;
            modattn_tokenizer_free(t);
        } else {
            points++;
            CHECK_MSG(rc == MODATTN_ENOMEM && t == NULL && strstr(modattn_last_error(), "injected"),
                      "fail at %llu: status %d: %s", (unsigned long long)k, rc, modattn_last_error());
        }
        CHECK_MSG(mem_now() == base, "allocation %llu failed: %lld bytes leaked", (unsigned long long)k,
                  (long long)(mem_now() - base));
    }
    CHECK(loaded);
    return points;
}

static void test_fault_injection(int points_plain) {
    int64_t base = mem_now();
    int points = sweep_load(); /* jansson's allocations fail in turn too */
    printf("tokenizer load: %d allocation points with jansson's allocations counted, %d without\n", points,
           points_plain);
    CHECK(points > points_plain);

    modattn_tokenizer *t = NULL;
    CHECK(modattn_tokenizer_load(TINY, &t) == 0);
    int64_t after_load = mem_now();
    char text[40000];
    size_t len = 0;
    while (len + 40 < sizeof text) len += (size_t)snprintf(text + len, sizeof text - len, "h\xc3\xa9llo w\xcc\x81orld %zu [MASK] ", len);
    int32_t *ids = malloc(20000 * sizeof(int32_t));
    int ok = 0;
    for (uint64_t k = 1; k < 100 && !ok; k++) {
        size_t n = 0;
        modattn__mem_fail_nth(k);
        int rc = modattn_tokenize(t, text, len, ids, 20000, &n);
        modattn__mem_fail_nth(0);
        if (rc == 0) ok = 1;
        else CHECK_MSG(rc == MODATTN_ENOMEM, "tokenize with allocation %llu failing: %d", (unsigned long long)k, rc);
        CHECK(mem_now() == after_load);
    }
    CHECK(ok);
    free(ids);
    modattn_tokenizer_free(t);
    CHECK(mem_now() == base);
}

/* The text of s[0, len) laid out so that only its first `readable` bytes (a multiple of the page
 * size) can be read: every byte after them is on PROT_NONE pages, so a tokenizer that looks past
 * them dies with SIGSEGV (a failed test, under ASan too) instead of only taking longer. Returns
 * the mapping (to munmap `*map_len` bytes) with *text at its start, or NULL. */
static void *guarded_copy(const char *s, size_t len, size_t readable, const char **text, size_t *map_len) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t total = (len + page - 1) / page * page + page;
    char *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    memcpy(m, s, readable < len ? readable : len);
    if (readable < total && mprotect(m + readable, total - readable, PROT_NONE) != 0) {
        munmap(m, total);
        return NULL;
    }
    *text = m;
    *map_len = total;
    return m;
}

static const char *g_guarded_case = "";
static void on_guard_fault(int sig) {
    (void)sig;
    static const char a[] = "test_tokenizer_unit: FAIL: a budget of 512 ids read past the first 64 KiB of the text (";
    static const char b[] = "): it did not stop early\n";
    ssize_t w = write(2, a, sizeof a - 1);
    w += write(2, g_guarded_case, strlen(g_guarded_case));
    w += write(2, b, sizeof b - 1);
    (void)w;
    _exit(1);
}

/* Hostile long inputs must take linear time (each well under a second here), and a small budget
 * must stop early: with 512 ids wanted, the text after its first 64 KiB (8 of the tokenizer's
 * 8 KiB blocks) is never read when the 512 ids come from well before it. The time is printed; what
 * is asserted is a count and what was read (no timing: it would flake under the sanitizers). */
static void test_long_inputs(const modattn_tokenizer *t) {
    size_t big = 2u << 20;
    const size_t readable = 64u << 10, small = 512;
    char *s = malloc(big + 8);
    int32_t *ids = malloc(sizeof(int32_t) * small);
    struct {
        const char *name, *unit;
    } cases[] = {
        {"one huge word", "a"},
        {"combining marks", "\xcc\x81"},           /* U+0301 after U+0301 ... */
        {"alternating combining classes", "\xcc\x81\xcc\xa3"}, /* 230, 220: a run to reorder */
        {"almost added tokens", "[MASK"},
        {"cjk", "\xe4\xb8\xad"},
        {"punctuation", "!"},
        {"spaces", " "},
        {"invalid bytes", "\xff"},
        {"added tokens", "[MASK]"},
        {"short words", "ab "},
    };
    int stopped_early = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t ul = strlen(cases[c].unit), len = 0;
        while (len + ul <= big) {
            memcpy(s + len, cases[c].unit, ul);
            len += ul;
        }
        uint64_t t0 = modattn__now_ns();
        size_t n = 0;
        /* full budget: every word of the text is looked at */
        size_t cap = 1u << 23;
        int32_t *all = malloc(cap * sizeof(int32_t));
        int rc = modattn_tokenize_ex(t, s, len, MODATTN_TOKENIZE_NO_SPECIALS, all, NULL, cap, &n);
        double ms = (double)(modattn__now_ns() - t0) / 1e6;
        CHECK_MSG(rc == 0 && n <= cap, "%s: rc %d", cases[c].name, rc);
        CHECK_MSG(ms < 5000, "%s: %.0f ms for %zu bytes", cases[c].name, ms, len);
        printf("  %-30s %7zu KiB -> %8zu ids in %7.1f ms", cases[c].name, len >> 10, n, ms);
        /* the ids of the first `small` - 2 words pieces, from the first 64 KiB of the text: then a
         * small budget must give exactly [CLS] those [SEP] without reading past those 64 KiB */
        size_t want = n + 2 < small ? n + 2 : small, n_prefix = 0;
        const size_t pieces = want - 2;
        int32_t *pre = malloc(cap * sizeof(int32_t));
        rc = modattn_tokenize_ex(t, s, readable, MODATTN_TOKENIZE_NO_SPECIALS, pre, NULL, cap, &n_prefix);
        const bool early = rc == 0 && n > pieces && n_prefix > pieces &&
                           memcmp(pre, all, (pieces + 1) * sizeof(int32_t)) == 0;
        free(pre);
        const char *text = s;
        size_t map_len = 0;
        void *map = early ? guarded_copy(s, len, readable, &text, &map_len) : NULL;
        CHECK_MSG(!early || map, "%s: mmap: %s", cases[c].name, strerror(errno));
        if (early && !map) {
            free(all);
            printf("\n");
            continue;
        }
        /* a small budget stops early (on the guarded copy: reading past 64 KiB faults) */
        struct sigaction sa, old_segv, old_bus;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_guard_fault;
        g_guarded_case = cases[c].name;
        sigaction(SIGSEGV, &sa, &old_segv);
        sigaction(SIGBUS, &sa, &old_bus);
        rc = modattn_tokenize(t, text, len, ids, small, &n);
        sigaction(SIGSEGV, &old_segv, NULL);
        sigaction(SIGBUS, &old_bus, NULL);
        CHECK_MSG(rc == 0 && n == want, "%s: budget %zu: rc %d, %zu ids (want %zu)", cases[c].name, small, rc, n, want);
        CHECK_MSG(rc == 0 && n == want && ids[0] == modattn_tokenizer_cls_id(t) &&
                      ids[n - 1] == modattn_tokenizer_sep_id(t) && memcmp(ids + 1, all, pieces * sizeof(int32_t)) == 0,
                  "%s: budget %zu: the ids are not [CLS] + the first %zu of the full run + [SEP]", cases[c].name,
                  small, pieces);
        printf("%s\n", early ? "; budget 512: stopped within the first 64 KiB" : "; budget 512: all of it");
        stopped_early += early;
        if (map) munmap(map, map_len);
        free(all);
    }
    /* the cases whose first 510 pieces lie in the first 64 KiB: (almost) added tokens, cjk,
     * punctuation, short words; the others are one word, or none, as long as the text */
    CHECK_MSG(stopped_early == 5, "%d cases were checked for an early stop, want 5", stopped_early);
    free(s);
    free(ids);
}

typedef struct thr_arg {
    const modattn_tokenizer *t;
    int ok;
} thr_arg;

static void *thr_main(void *p) {
    thr_arg *a = p;
    const char *s = "Th\xc3\xa9 quick brown fox, [MASK] 中文 New York <sp> jumps! 😀";
    int32_t first[64], ids[64];
    size_t n0 = 0, n = 0;
    a->ok = modattn_tokenize(a->t, s, strlen(s), first, 64, &n0) == 0;
    for (int i = 0; i < 2000 && a->ok; i++) {
        if (modattn_tokenize(a->t, s, strlen(s), ids, 64, &n) != 0 || n != n0 ||
            memcmp(ids, first, n * sizeof(int32_t)) != 0)
            a->ok = 0;
    }
    return NULL;
}

static void test_threads(const modattn_tokenizer *t) {
    pthread_t th[4];
    thr_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i].t = t;
        pthread_create(&th[i], NULL, thr_main, &a[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(a[i].ok);
    }
}

int main(void) {
    /* the load sweep before jansson is routed, for comparison; then route it, with no jansson
     * memory live, so that everything below counts jansson too (and must leave nothing) */
    int points_plain = sweep_load();
    CHECK(modattn__json_count_allocations() == 0);
    modattn_tokenizer *t = NULL;
    int rc = modattn_tokenizer_load(TINY, &t);
    CHECK_MSG(rc == 0, "load %s: %s", TINY, modattn_last_error());
    if (rc) return test_finish("test_tokenizer_unit");
    modattn_mem_stats ms;
    modattn_mem_get_stats(&ms);
    CHECK(ms.current[MODATTN_MEM_WEIGHTS] > 0);

    stats g = run_fixture("tests/fixtures/tokens_tiny.jsonl", t, NULL);
    printf("tokenizer_tiny.json: ids and offsets matched %d/%d inputs\n", g.matched, g.inputs);
    CHECK_MSG(g.inputs >= 400 && g.matched == g.inputs, "%d of %d inputs differ from HF",
              g.inputs - g.matched, g.inputs);

    test_api(t);
    test_errors();
    test_long_inputs(t);
    test_threads(t);
    modattn_tokenizer_free(t);
    test_fault_injection(points_plain);

    CHECK_MSG(mem_now() == 0, "%lld bytes still allocated", (long long)mem_now());
    return test_finish("test_tokenizer_unit");
}
