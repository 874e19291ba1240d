/* tests/memory/test_malformed.c — malformed files are rejected or loaded, never a crash (run under
 * ASan+UBSan by `make test-sanitize`): every prefix truncation and 1,000 seeded random byte flips (250 over the real tokenizer.json) of
 * model.safetensors' header region, tokenizer.json (every prefix of the small test tokenizer; the
 * real one at a stride), config.json, and a store file. Each mutant sits in a temporary model
 * folder whose other files are links to the real ones (the small test tokenizer stands in for the
 * real one while the weights and config are mutated). Nothing may leak either way.
 * The mutants are of tiny-bert-cls (a BERT of 3 layers of 128 with all-MiniLM-L6-v2's tokenizer,
 * the same file kinds and parsers): every mutant that loads also loads its weights and embeds, and
 * MiniLM's 90 MB of weights made ~800 such loads most of the test's time (202 s under ASan in CI).
 * The non-finite weight checks stay on MiniLM's real weights. */
#include "modattn/model.h"
#include "modattn/modattn.h"
#include "modattn/store.h"
#include "core/internal_core.h"
#include "pipeline/internal_store.h"
#include "test_util.h"

#include <fcntl.h>
#include <jansson.h>
#include <string.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#define FLIPS 1000

static char g_tmp[] = "/tmp/modattn_malformed_XXXXXX";
static char g_model[512];
static modattn_ctx *g_ctx;
static int g_loaded, g_rejected;

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void write_file(const char *path, const unsigned char *data, size_t n, off_t total) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || (n && write(fd, data, n) != (ssize_t)n) || (total > (off_t)n && ftruncate(fd, total) != 0)) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    close(fd);
}

/* A model folder in g_tmp/m: links to the real model's files; tokenizer.json is the small test
 * tokenizer while g_tiny_tok is set (the weights' and config's mutants need a tokenizer that
 * loads, not the real one's 0.1 s of parsing per mutant). */
static bool g_tiny_tok;
static const char *g_base = ".models/tiny-bert-cls"; /* the model whose files are mutated */
static void make_model_dir(void) {
    static const char *files[] = {"config.json", "tokenizer.json", "model.safetensors", "modules.json",
                                  "sentence_bert_config.json", "tokenizer_config.json", "special_tokens_map.json",
                                  "vocab.txt", "1_Pooling"};
    snprintf(g_model, sizeof g_model, "%s/m", g_tmp);
    mkdir(g_model, 0755);
    char real[PATH_MAX], src[1024], dst[1024];
    if (!realpath(g_base, real)) exit(2);
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(src, sizeof src, "%s/%s", real, files[i]);
        if (g_tiny_tok && !strcmp(files[i], "tokenizer.json") && !realpath("tests/fixtures/tokenizer_tiny.json", src))
            exit(2);
        snprintf(dst, sizeof dst, "%s/%s", g_model, files[i]);
        unlink(dst);
        if (symlink(src, dst) != 0) exit(2);
    }
}

/* Load the model with the mutant in place: rejected or loaded, no leak. */
static void try_load(const char *what, size_t variant) {
    modattn_mem_stats a, b;
    modattn_mem_get_stats(&a);
    modattn_model *m = NULL;
    int st = modattn_model_load(g_ctx, g_model, &m);
    if (st == 0) {
        g_loaded++;
        const char *txt = "a test";
        float *out = malloc(modattn_model_dim(m) * sizeof(float) + 4);
        (void)modattn_model_embed(m, &txt, NULL, 1, out, NULL); /* may fail cleanly: must not crash */
        modattn_embed_options q = {.task = MODATTN_EMBED_QUERY}; /* with its prompts and truncate_dim */
        (void)modattn_model_embed_opt(m, NULL, &q, &txt, NULL, 1, out, NULL);
        free(out);
        modattn_model_free(m);
    } else {
        g_rejected++;
        if (!modattn_last_error()[0]) {
            t_fail++;
            fprintf(stderr, "%s variant %zu: rejected without a message\n", what, variant);
        }
    }
    modattn_mem_get_stats(&b);
    /* the context keeps its attention workspace (grown by the first embedding): not a leak */
    int64_t kept_a = a.current_total - a.current[MODATTN_MEM_WORKSPACE];
    int64_t kept_b = b.current_total - b.current[MODATTN_MEM_WORKSPACE];
    if (kept_b != kept_a) {
        t_fail++;
        fprintf(stderr, "%s variant %zu: %lld bytes leaked (status %d)\n", what, variant, (long long)(kept_b - kept_a),
                st);
    } else {
        t_pass++;
    }
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* Prefixes (every `stride` bytes up to `limit`) and `flips` byte flips within [0, region). */
static void mutate_file_flips(const char *name, const unsigned char *orig, size_t n, size_t region, size_t stride,
                              off_t pad_to, int flips) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", g_model, name);
    unsigned char *buf = malloc(n);
    int before_l = g_loaded, before_r = g_rejected;
    const uint64_t t0 = modattn__now_ns();
    for (size_t len = 0; len < region; len += stride) {
        unlink(path);
        write_file(path, orig, len, 0);
        try_load(name, len);
    }
    for (int k = 0; k < flips; k++) {
        memcpy(buf, orig, region);
        int nflip = 1 + (int)(next() % 4);
        for (int f = 0; f < nflip; f++) buf[next() % region] ^= (unsigned char)(1u << (next() % 8));
        unlink(path);
        write_file(path, buf, region, pad_to);
        try_load(name, (size_t)k);
    }
    printf("%s: %d mutants loaded, %d rejected (%.1f s)\n", name, g_loaded - before_l, g_rejected - before_r,
           1e-9 * (double)(modattn__now_ns() - t0));
    fflush(stdout);
    free(buf);
    make_model_dir(); /* restore the link */
}

/* ... with FLIPS byte flips */
static void mutate_file(const char *name, const unsigned char *orig, size_t n, size_t region, size_t stride,
                        off_t pad_to) {
    mutate_file_flips(name, orig, n, region, stride, pad_to, FLIPS);
}

static void store_mutants(void) {
    char db[1024];
    snprintf(db, sizeof db, "%s/store.db", g_tmp);
    modattn_store *s;
    CHECK(modattn_store_open(db, MODATTN_STORE_CREATE, &s) == 0);
    modattn_store_model sm = {"test-model", "0123456789abcdef", 4, NULL, NULL, NULL, NULL};
    CHECK(modattn__store_bind_model(s, &sm) == 0);
    CHECK(modattn__store_begin(s) == 0);
    for (int d = 0; d < 3; d++) {
        char p[64];
        snprintf(p, sizeof p, "/docs/doc%d.txt", d);
        modattn_store_doc doc = {.path = p, .hash = 42u + (unsigned)d, .mtime_ns = 1, .size = 10, .kind = "text",
                                 .chunk_tokens = 256, .overlap = 32, .nchunks = 2};
        CHECK(modattn__store_put_document(s, &doc) == 0);
        for (int c = 0; c < 2; c++) {
            float v[4] = {0.5f, 0.5f, (float)d, (float)c};
            modattn_store_chunk_in ci = {.seq = c, .start = 0, .end = 5, .line = 1, .ntokens = 3, .text = "hello", .len = 5};
            CHECK(modattn__store_put_chunk(s, doc.id, &ci, v, 4) == 0);
        }
    }
    CHECK(modattn__store_commit(s) == 0);
    modattn_store_close(s);
    size_t n;
    unsigned char *orig = slurp(db, &n);
    CHECK(orig != NULL && n > 0);
    char mut[1024];
    snprintf(mut, sizeof mut, "%s/mutant.db", g_tmp);
    unsigned char *buf = malloc(n);
    int opened = 0, refused = 0;
    const uint64_t t0 = modattn__now_ns();
    for (size_t k = 0; k < n / 512 + FLIPS; k++) {
        size_t len = n;
        memcpy(buf, orig, n);
        if (k < n / 512) len = k * 512; /* every page-aligned prefix: SQLite files grow by pages */
        else {
            int nflip = 1 + (int)(next() % 8);
            for (int f = 0; f < nflip; f++) buf[next() % n] ^= (unsigned char)(1u << (next() % 8));
        }
        unlink(mut);
        char wal[1100];
        snprintf(wal, sizeof wal, "%s-wal", mut), unlink(wal);
        snprintf(wal, sizeof wal, "%s-shm", mut), unlink(wal);
        write_file(mut, buf, len, 0);
        modattn_mem_stats a, b;
        modattn_mem_get_stats(&a);
        modattn_store *m = NULL;
        if (modattn_store_open(mut, MODATTN_STORE_READONLY, &m) == 0) {
            opened++;
            char name[128], hash[17];
            size_t dim;
            (void)modattn_store_get_model(m, name, sizeof name, hash, &dim);
            modattn_store_counts cnt;
            (void)modattn_store_get_counts(m, &cnt);
            (void)modattn_store_integrity_check(m);
            modattn_store_vectors v;
            if (modattn__store_load_vectors(m, &v) == 0) {
                for (size_t i = 0; i < v.n; i++) {
                    modattn_store_chunk ch;
                    if (modattn__store_get_chunk(m, v.chunk_ids[i], &ch) == 0) modattn__store_chunk_clear(&ch);
                }
                modattn__store_vectors_free(&v);
            }
            modattn_store_close(m);
        } else {
            refused++;
        }
        modattn_mem_get_stats(&b);
        CHECK_MSG(b.current_total == a.current_total, "store mutant %zu leaked %lld bytes", k,
                  (long long)(b.current_total - a.current_total));
    }
    printf("store: %d mutants opened, %d refused (%.1f s)\n", opened, refused, 1e-9 * (double)(modattn__now_ns() - t0));
    free(buf);
    free(orig);
}

/* Weights must be finite (issue 18): a copy of the real weights with one NaN, then one +inf, at a
 * known element is refused, naming the tensor and the element; the copy restored loads again. */
static void nonfinite_weights(void) {
    g_base = ".models/all-MiniLM-L6-v2";
    make_model_dir();
    size_t n;
    unsigned char *w = slurp(".models/all-MiniLM-L6-v2/model.safetensors", &n);
    CHECK(w != NULL && n > 8);
    if (!w) return;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | w[i];
    json_t *h = NULL;
    CHECK(modattn__json_loadb((const char *)w + 8, (size_t)hlen, 0, &h, NULL) == 0);
    static const struct { const char *tensor; size_t row, col, cols; uint32_t bits; const char *want; } cases[] = {
        {"encoder.layer.3.intermediate.dense.weight", 5, 7, 384, 0x7fc00000u, "element [5, 7] is NaN"},
        {"encoder.layer.0.attention.output.LayerNorm.bias", 0, 100, 1, 0x7f800000u, "element [100] is +inf"},
        {"embeddings.word_embeddings.weight", 30521, 383, 384, 0xff800000u, "element [30521, 383] is -inf"},
    };
    char path[600];
    snprintf(path, sizeof path, "%s/m/model.safetensors", g_tmp);
    for (size_t c = 0; h && c < sizeof cases / sizeof *cases; c++) {
        json_t *t = json_object_get(h, cases[c].tensor);
        json_t *off = t ? json_object_get(t, "data_offsets") : NULL;
        CHECK(off != NULL);
        if (!off) continue;
        size_t at = 8 + (size_t)hlen + (size_t)json_integer_value(json_array_get(off, 0)) +
                    4 * (cases[c].row * cases[c].cols + cases[c].col);
        unsigned char keep[4];
        memcpy(keep, w + at, 4);
        memcpy(w + at, &cases[c].bits, 4);
        unlink(path);
        write_file(path, w, n, 0);
        memcpy(w + at, keep, 4);
        modattn_model *m = NULL;
        int st = modattn_model_load(g_ctx, g_model, &m);
        CHECK_MSG(st == MODATTN_EFORMAT && strstr(modattn_last_error(), cases[c].tensor) &&
                      strstr(modattn_last_error(), cases[c].want),
                  "%s: status %d, '%s'", cases[c].tensor, st, modattn_last_error());
        modattn_model_free(m);
    }
    /* the load checks the values 1 MiB of the file at a time, as it hashes them
     * (model/encoder_load.c scan_piece): a value whose bytes straddle such a boundary, with a
     * later one in the next MiB, is the one named (the first), by its index in the tensor */
    json_t *t = h ? json_object_get(h, "encoder.layer.3.intermediate.dense.weight") : NULL;
    json_t *off = t ? json_object_get(t, "data_offsets") : NULL;
    CHECK(off != NULL);
    /* the header one space longer (safetensors allows the padding), so that every value is one
     * byte off 4-byte alignment and one straddles each MiB boundary */
    unsigned char *w1 = off ? malloc(n + 1) : NULL;
    if (w1) {
        const uint64_t h1 = hlen + 1;
        for (int i = 0; i < 8; i++) w1[i] = (unsigned char)(h1 >> (8 * i));
        memcpy(w1 + 8, w + 8, (size_t)hlen);
        w1[8 + hlen] = ' ';
        memcpy(w1 + 9 + hlen, w + 8 + hlen, n - 8 - (size_t)hlen);
        const size_t ta = 9 + (size_t)hlen + (size_t)json_integer_value(json_array_get(off, 0));
        const size_t mib = (size_t)1 << 20, boundary = (ta / mib + 1) * mib;
        /* the value whose bytes straddle the boundary (the last one before it, where the
         * boundary falls between two values) */
        const size_t e = (boundary - ta) / 4, strad = (boundary - ta) % 4 ? e : e - 1, later = strad + mib / 4 + 3;
        CHECK((boundary - ta) % 4 != 0 && 4 * later < 1536 * 384 * 4);
        const uint32_t nan = 0x7fc00000u, inf = 0x7f800000u;
        memcpy(w1 + ta + 4 * strad, &nan, 4);
        memcpy(w1 + ta + 4 * later, &inf, 4);
        unlink(path);
        write_file(path, w1, n + 1, 0);
        free(w1);
        char want[64];
        snprintf(want, sizeof want, "element [%zu, %zu] is NaN", strad / 384, strad % 384);
        modattn_model *m = NULL;
        int st = modattn_model_load(g_ctx, g_model, &m);
        CHECK_MSG(st == MODATTN_EFORMAT && strstr(modattn_last_error(), want),
                  "a NaN across a MiB boundary (tensor at %zu, value at %zu): status %d, '%s' (want '%s')", ta,
                  ta + 4 * strad, st, modattn_last_error(), want);
        modattn_model_free(m);
    }
    unlink(path);
    write_file(path, w, n, 0);
    modattn_model *m = NULL;
    CHECK_MSG(modattn_model_load(g_ctx, g_model, &m) == 0, "restored weights: %s", modattn_last_error());
    modattn_model_free(m);
    json_decref(h);
    free(w);
    g_base = ".models/tiny-bert-cls";
    make_model_dir(); /* links again */
}

int main(void) {
    struct stat sb;
    if (stat(".models/all-MiniLM-L6-v2/model.safetensors", &sb) != 0) {
        fprintf(stderr, "test_malformed: .models/all-MiniLM-L6-v2 is missing: run `make model`\n");
        return 1;
    }
    if (stat(".models/tiny-bert-cls/model.safetensors", &sb) != 0) {
        fprintf(stderr, "test_malformed: .models/tiny-bert-cls is missing: run `make model`\n");
        return 1;
    }
    if (!mkdtemp(g_tmp)) return 2;
    modattn_ctx_options o = {.threads = 1, .plugin_path = ""};
    CHECK(modattn_ctx_create(&o, &g_ctx) == 0);
    g_tiny_tok = true;
    make_model_dir();

    size_t n;
    /* config.json: every prefix, 1,000 flips */
    unsigned char *cfg = slurp(".models/tiny-bert-cls/config.json", &n);
    CHECK(cfg != NULL);
    mutate_file("config.json", cfg, n, n, 1, 0);
    free(cfg);

    /* config_sentence_transformers.json (prompts, default_prompt_name, truncate_dim): every prefix,
     * 1,000 flips; then gone again (the other mutants' folder has none) */
    unsigned char *pcfg = slurp("tests/fixtures/prompt_model/config_default.json", &n);
    CHECK(pcfg != NULL);
    mutate_file("config_sentence_transformers.json", pcfg, n, n, 1, 0);
    free(pcfg);
    {
        char pp[1100];
        snprintf(pp, sizeof pp, "%s/config_sentence_transformers.json", g_model);
        unlink(pp);
    }

    /* model.safetensors: every prefix of the header region, 1,000 flips in it (the data after the
     * header is a sparse hole of the right size, so the mutant is as long as the real file) */
    unsigned char head[8];
    FILE *f = fopen(".models/tiny-bert-cls/model.safetensors", "rb");
    CHECK(f && fread(head, 1, 8, f) == 8);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | head[i];
    size_t region = (size_t)(8 + hlen);
    unsigned char *st = malloc(region);
    fseek(f, 0, SEEK_SET);
    CHECK(fread(st, 1, region, f) == region);
    fclose(f);
    mutate_file("model.safetensors", st, region, region, region > 20000 ? 3 : 1, (off_t)sb.st_size);
    free(st);

    g_tiny_tok = false;
    make_model_dir();
    /* tokenizer.json: the real one at a stride of 4093 bytes plus its first 2,000 prefixes, then flips:
     * 1,000 after the prefixes (they land in its header), 250 over the whole 466 KB, nearly all in the
     * vocabulary (each of those parses the whole file: 1,000 of them were 90 of this test's 214 s under
     * ASan; the vocabulary's entries take the paths the small tokenizers' flips below take too) */
    unsigned char *tok = slurp(".models/tiny-bert-cls/tokenizer.json", &n);
    CHECK(tok != NULL);
    mutate_file("tokenizer.json", tok, n, 2000, 1, 0);
    mutate_file_flips("tokenizer.json", tok, n, n, 4093, 0, 250);
    free(tok);
    /* the small test tokenizer: every prefix */
    unsigned char *tiny = slurp("tests/fixtures/tokenizer_tiny.json", &n);
    CHECK(tiny != NULL);
    mutate_file("tokenizer.json", tiny, n, n, 1, 0);
    free(tiny);
    /* the Unigram tokenizers (Precompiled charsmap, Metaspace, byte_fallback): prefixes, then flips */
    unsigned char *uni = slurp("tests/fixtures/tokenizer_unigram_bytes.json", &n);
    CHECK(uni != NULL);
    mutate_file("tokenizer.json", uni, n, n, 13, 0);
    free(uni);
    uni = slurp("tests/fixtures/tokenizer_unigram.json", &n);
    CHECK(uni != NULL);
    mutate_file("tokenizer.json", uni, n, n, 4093, 0);
    free(uni);
    /* the byte-level BPE tokenizers (Qwen2's Split + NFC, GPT-2's "a b" merges): prefixes, flips */
    const char *bpe[] = {"tests/fixtures/tokenizer_bpe_qwen2.json", "tests/fixtures/tokenizer_bpe_gpt2.json"};
    for (int k = 0; k < 2; k++) {
        unsigned char *b = slurp(bpe[k], &n);
        CHECK(b != NULL);
        if (b) mutate_file("tokenizer.json", b, n, n, 17, 0);
        free(b);
    }

    store_mutants();
    nonfinite_weights();

    printf("model mutants: %d loaded, %d rejected\n", g_loaded, g_rejected);
    CHECK(g_rejected > 0);
    modattn_ctx_free(g_ctx);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    CHECK(system(cmd) == 0);
    return test_finish("test_malformed");
}
