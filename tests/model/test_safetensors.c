/* tests/model/test_safetensors.c — the safetensors reader: valid files, one handcrafted bad file
 * per rule (the error must name the rule and the tensor), mapping + memory accounting, and
 * allocation failures at every step. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <jansson.h>

#include "model/safetensors.h"
#include "modattn/core.h"
#include "modattn/status.h"
#include "core/internal_core.h"
#include "test_util.h"

/* A file image: u64 LE header length, the header text, then `data_len` data bytes (0..255). */
typedef struct img {
    uint8_t *b;
    size_t len;
} img;

static img make_n(const char *hdr, size_t hdr_len, uint64_t claimed, size_t data_len) {
    img m;
    m.len = 8 + hdr_len + data_len;
    m.b = calloc(1, m.len ? m.len : 1);
    for (int i = 0; i < 8; i++) m.b[i] = (uint8_t)(claimed >> (8 * i));
    memcpy(m.b + 8, hdr, hdr_len);
    for (size_t i = 0; i < data_len; i++) m.b[8 + hdr_len + i] = (uint8_t)i;
    return m;
}

static img make(const char *hdr, size_t data_len) {
    return make_n(hdr, strlen(hdr), strlen(hdr), data_len);
}

static int parse(img m, modattn_st_file **f) {
    int st = modattn__st_parse(m.b, m.len, "t.safetensors", f);
    return st;
}

/* Expect a rejection whose message contains every needle. */
static void bad(const char *what, img m, const char *rule, const char *tensor) {
    modattn_st_file *f = NULL;
    int st = parse(m, &f);
    const char *msg = modattn_last_error();
    CHECK_MSG(st == MODATTN_EFORMAT && f == NULL, "%s: status %d, message '%s'", what, st, msg);
    CHECK_MSG(strstr(msg, "t.safetensors") != NULL, "%s: message '%s' lacks the file", what, msg);
    CHECK_MSG(strstr(msg, rule) != NULL, "%s: message '%s' lacks rule '%s'", what, msg, rule);
    if (tensor)
        CHECK_MSG(strstr(msg, tensor) != NULL, "%s: message '%s' lacks tensor '%s'", what, msg,
                  tensor);
    modattn__st_close(f);
    free(m.b);
}

#define A16 "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}"

static void test_valid(void) {
    img m = make("{\"__metadata__\":{\"format\":\"pt\"}," A16
                 ",\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[16,24]},"
                 "\"z\":{\"dtype\":\"BF16\",\"shape\":[0,3],\"data_offsets\":[24,24]}}   ",
                 24);
    modattn_st_file *f = NULL;
    int st = parse(m, &f);
    CHECK_MSG(st == 0, "valid file: %s", modattn_last_error());
    if (st == 0) {
        CHECK(f->ntensors == 3);
        const modattn_st_tensor *a = modattn__st_find(f, "a");
        const modattn_st_tensor *b = modattn__st_find(f, "b");
        const modattn_st_tensor *z = modattn__st_find(f, "z");
        CHECK(a && a->dtype == MODATTN_ST_F32 && a->ndim == 2 && a->shape[0] == 2 &&
              a->shape[1] == 2 && a->numel == 4);
        CHECK(a && (const uint8_t *)a->data == f->data);
        CHECK(b && b->dtype == MODATTN_ST_I64 && (const uint8_t *)b->data == f->data + 16);
        CHECK(z && z->numel == 0 && z->begin == 24 && z->end == 24);
        CHECK(modattn__st_find(f, "nope") == NULL);
        CHECK(modattn__st_meta(f, "format") && strcmp(modattn__st_meta(f, "format"), "pt") == 0);
        CHECK(modattn__st_meta(f, "other") == NULL);
    }
    modattn__st_close(f);
    free(m.b);

    /* no tensors, no data: valid */
    m = make("{}", 0);
    CHECK(parse(m, &f) == 0 && f && f->ntensors == 0);
    modattn__st_close(f);
    free(m.b);

    /* a scalar (shape []) holds one element */
    m = make("{\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]}}", 8);
    CHECK(parse(m, &f) == 0 && f && f->tensors[0].numel == 1);
    modattn__st_close(f);
    free(m.b);

    /* every dtype name is known, with its size */
    CHECK(modattn__st_dtype_size(MODATTN_ST_F16) == 2 && modattn__st_dtype_size(MODATTN_ST_U64) == 8);
    CHECK(strcmp(modattn__st_dtype_name(MODATTN_ST_BF16), "BF16") == 0);
}

static void test_rules(void) {
    /* header-length */
    {
        img m = make_n("", 0, 0, 0);
        m.len = 0;
        bad("empty file", m, "header-length", NULL);
    }
    {
        img m = make_n("", 0, 0, 0);
        m.len = 5; /* shorter than the 8-byte length */
        bad("5-byte file", m, "header-length", NULL);
    }
    bad("header over the cap", make_n("{}", 2, 100000001ull, 0), "header-length", NULL);
    bad("header length past the end", make_n("{}", 2, 3, 0), "header-length", NULL);
    bad("huge header length", make_n("{}", 2, UINT64_MAX, 0), "header-length", NULL);
    /* header-start */
    bad("leading space", make(" {}", 0), "header-start", NULL);
    bad("array header", make("[]", 0), "header-start", NULL);
    bad("zero-length header", make_n("", 0, 0, 0), "header-start", NULL);
    /* header-json */
    bad("truncated JSON", make("{\"a\":", 0), "header-json", NULL);
    bad("trailing garbage", make("{} x", 0), "header-json", NULL);
    bad("invalid UTF-8", make("{\"\xff\xfe\":{}}", 0), "header-json", NULL);
    bad("NUL escape", make("{\"a\\u0000\":{}}", 0), "header-json", NULL);
    bad("duplicate key",
        make("{" A16 "," A16 "}", 16), "header-json", "duplicate");
    bad("integer too big",
        make("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,18446744073709551616]}}",
             4),
        "header-json", NULL);
    {
        static const char hdr[] = "{\"a\":1}\0   ";
        bad("NUL byte padding", make_n(hdr, sizeof hdr - 1, sizeof hdr - 1, 0), "header-json",
            NULL);
    }
    /* metadata */
    bad("metadata not an object", make("{\"__metadata__\":[1]}", 0), "metadata", NULL);
    bad("metadata value not a string", make("{\"__metadata__\":{\"k\":1}}", 0), "metadata",
        "\"k\"");
    /* entry */
    bad("entry not an object", make("{\"w\":5}", 0), "entry", "'w'");
    bad("entry without dtype", make("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4), "entry",
        "'w'");
    bad("entry without shape", make("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4),
        "entry", "'w'");
    bad("entry without offsets", make("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4), "entry",
        "'w'");
    /* dtype */
    bad("unknown dtype", make("{\"w\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
        "dtype", "'w'");
    bad("dtype not a string", make("{\"w\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
        "dtype", "'w'");
    /* shape */
    bad("negative dimension",
        make("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4), "shape", "'w'");
    bad("fractional dimension",
        make("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4), "shape",
        "'w'");
    bad("shape not an array",
        make("{\"w\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,4]}}", 4), "shape", "'w'");
    bad("nine dimensions",
        make("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4),
        "shape", "'w'");
    /* data_offsets */
    bad("one offset", make("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4),
        "data_offsets", "'w'");
    bad("negative offset",
        make("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4), "data_offsets",
        "'w'");
    bad("end before begin",
        make("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4), "data_offsets",
        "'w'");
    bad("end past the buffer",
        make("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4), "data_offsets",
        "'w'");
    bad("end near INT64_MAX",
        make("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[9223372036854775800,"
             "9223372036854775804]}}",
             4),
        "data_offsets", "'w'");
    /* size */
    bad("size mismatch", make("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8),
        "size", "'w'");
    bad("element count overflow",
        make("{\"w\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,0]}}",
             0),
        "size", "'w'");
    bad("numel x dtype size overflow",
        make("{\"w\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}", 0),
        "size", "'w'");
    bad("numel x size wraps to the offsets",
        make("{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387905],\"data_offsets\":[0,4]}}", 4),
        "size", "'w'");
    /* a zero dimension after an overflowing product is 0 elements, as the spec computes it */
    {
        img m = make("{\"w\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,16,0],"
                     "\"data_offsets\":[0,0]}}",
                     0);
        modattn_st_file *f = NULL;
        CHECK_MSG(parse(m, &f) == 0, "zero dim: %s", modattn_last_error());
        modattn__st_close(f);
        free(m.b);
    }
    /* tiling */
    bad("hole at the start",
        make("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8), "tiling", "'w'");
    bad("hole between",
        make("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
             12),
        "tiling", "'b'");
    bad("overlap",
        make("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
             8),
        "tiling", "'b'");
    bad("same range twice",
        make("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
             4),
        "tiling", "overlap");
    bad("trailing bytes",
        make("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 6), "tiling",
        "'w'");
    bad("data without tensors", make("{\"__metadata__\":{}}", 4), "tiling", NULL);
}

static void test_file(void) {
    char dir[] = "/tmp/modattn_st_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK_MSG(0, "mkdtemp failed");
        return;
    }
    char path[256];
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    img m = make("{" A16 "}", 16);
    FILE *fp = fopen(path, "wb");
    CHECK(fp && fwrite(m.b, 1, m.len, fp) == m.len);
    if (fp) fclose(fp);

    modattn_mem_stats s0, s1, s2;
    modattn_mem_get_stats(&s0);
    modattn_st_file *f = NULL;
    int st = modattn__st_open(path, &f);
    CHECK_MSG(st == 0, "open: %s", modattn_last_error());
    modattn_mem_get_stats(&s1);
    CHECK(s1.current[MODATTN_MEM_WEIGHTS] - s0.current[MODATTN_MEM_WEIGHTS] == (int64_t)m.len);
    if (f) {
        const modattn_st_tensor *a = modattn__st_find(f, "a");
        CHECK(a && memcmp(a->data, m.b + m.len - 16, 16) == 0);
    }
    modattn__st_close(f);
    modattn_mem_get_stats(&s2);
    CHECK(s2.current[MODATTN_MEM_WEIGHTS] == s0.current[MODATTN_MEM_WEIGHTS]);
    CHECK(s2.current_total == s0.current_total);

    /* a budget smaller than the mapping: refused, nothing left accounted */
    char big[256];
    snprintf(big, sizeof big, "%s/big.safetensors", dir);
    img mb = make("{\"w\":{\"dtype\":\"F32\",\"shape\":[16384],\"data_offsets\":[0,65536]}}",
                  65536);
    fp = fopen(big, "wb");
    CHECK(fp && fwrite(mb.b, 1, mb.len, fp) == mb.len);
    if (fp) fclose(fp);
    free(mb.b);
    modattn_mem_set_budget(s0.current_total + 16384);
    f = NULL;
    CHECK_ERR(modattn__st_open(big, &f), MODATTN_EBUDGET, "big.safetensors");
    unlink(big);
    CHECK(f == NULL);
    modattn_mem_set_budget(0);
    modattn_mem_get_stats(&s2);
    CHECK(s2.current_total == s0.current_total);

    /* missing file, a directory, a bad file on disk */
    CHECK_ERR(modattn__st_open("/nonexistent/x.safetensors", &f), MODATTN_EIO, "x.safetensors");
    CHECK_ERR(modattn__st_open(dir, &f), MODATTN_EIO, "not a regular file");
    /* a FIFO in the file's place (issue 18): refused at once, never a wait for a writer (the
     * alarm turns a hang into a failure) */
    {
        char fifo[600];
        snprintf(fifo, sizeof fifo, "%s/fifo.safetensors", dir);
        CHECK(mkfifo(fifo, 0600) == 0);
        alarm(20);
        CHECK_ERR(modattn__st_open(fifo, &f), MODATTN_EIO, "not a regular file");
        json_t *j = NULL;
        CHECK_ERR(modattn__json_load_file(fifo, 0, &j, NULL), MODATTN_EIO, "not a regular file");
        CHECK(j == NULL);
        CHECK_ERR(modattn__json_load_file(dir, 0, &j, NULL), MODATTN_EIO, "not a regular file");
        alarm(0);
        unlink(fifo);
    }
    fp = fopen(path, "wb");
    if (fp) {
        fwrite(m.b, 1, m.len - 1, fp); /* one byte short */
        fclose(fp);
    }
    CHECK_ERR(modattn__st_open(path, &f), MODATTN_EFORMAT, "m.safetensors: data_offsets");
    modattn_mem_get_stats(&s2);
    CHECK(s2.current_total == s0.current_total);
    fp = fopen(path, "wb");
    if (fp) fclose(fp); /* empty */
    CHECK_ERR(modattn__st_open(path, &f), MODATTN_EFORMAT, "header-length");
    unlink(path);
    rmdir(dir);
    free(m.b);
}

/* Fail the Nth allocation for N = 1, 2, ... until parsing succeeds: every failure is a clean
 * error and leaks nothing. Returns the number of allocation points. */
static int sweep_parse(img m) {
    modattn_mem_stats s0, s1;
    modattn_mem_get_stats(&s0);
    int ok_at = 0;
    for (int n = 1; n < 5000 && !ok_at; n++) {
        modattn__mem_fail_nth((uint64_t)n);
        modattn_st_file *f = NULL;
        int st = parse(m, &f);
        modattn__mem_fail_nth(0);
        if (st == 0) ok_at = n;
        else CHECK_MSG(st == MODATTN_ENOMEM && f == NULL && strstr(modattn_last_error(), "injected"),
                       "n=%d: status %d: %s", n, st, modattn_last_error());
        modattn__st_close(f);
        modattn_mem_get_stats(&s1);
        CHECK_MSG(s1.current_total == s0.current_total, "n=%d: %lld bytes leaked", n,
                  (long long)(s1.current_total - s0.current_total));
    }
    CHECK(ok_at > 1);
    return ok_at - 1;
}

static img sweep_image(void) {
    return make("{\"__metadata__\":{\"format\":\"pt\",\"x\":\"y\"}," A16
                ",\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[16,24]}}",
                24);
}

/* With jansson routed the header's parse fails in turn too; `plain` is the count from before. */
static void test_alloc_failures(int plain) {
    img m = sweep_image();
    int points = sweep_parse(m);
    printf("header parse: %d allocation points with jansson's allocations counted, %d without\n", points, plain);
    CHECK(points > plain);
    free(m.b);
}

int main(void) {
    /* the sweep before jansson is routed, for comparison; then route it, with no jansson memory
     * live, so that everything below counts jansson too */
    img m = sweep_image();
    int plain = sweep_parse(m);
    free(m.b);
    CHECK(modattn__json_count_allocations() == 0);
    modattn_mem_stats s0;
    modattn_mem_get_stats(&s0);
    test_valid();
    test_rules();
    test_file();
    test_alloc_failures(plain);
    modattn_mem_stats s1;
    modattn_mem_get_stats(&s1);
    CHECK_MSG(s1.current_total == s0.current_total, "%lld bytes left allocated",
              (long long)(s1.current_total - s0.current_total));
    return test_finish("test_safetensors");
}
