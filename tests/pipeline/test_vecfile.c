/* tests/pipeline/test_vecfile.c — the vector file beside a store: written whole, mapped without a
 * copy, equal row for row to the store's vectors; and every way it can be wrong (missing,
 * truncated, extended, bad magic, version, header or id damage, another model, a store changed
 * since, random header bytes) is detected at open, the vectors then come from the store, and
 * a search's results never change. A read-only folder: the write fails with the reason. */
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "modattn/core.h"
#include "modattn/search.h"
#include "modattn/store.h"
#include "test_util.h"

#define DIM 24
static char g_db[512], g_vec[600];

static uint64_t g_rng = 12345;
static float rnd(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void add_doc(modattn_store *s, const char *path, int nchunks) {
    modattn_store_doc d;
    memset(&d, 0, sizeof d);
    d.path = path, d.kind = "text", d.nchunks = nchunks, d.chunk_tokens = 64, d.overlap = 8;
    CHECK(modattn_store_begin(s) == 0);
    CHECK(modattn_store_put_document(s, &d) == 0);
    for (int c = 0; c < nchunks; c++) {
        float v[DIM];
        for (int k = 0; k < DIM; k++) v[k] = rnd();
        modattn_vec_normalize(v, DIM);
        modattn_store_chunk_in ci = {c, c * 10, c * 10 + 10, c + 1, 0, 5, "chunk", 5};
        CHECK(modattn_store_put_chunk(s, d.id, &ci, v, DIM) == 0);
    }
    CHECK(modattn_store_commit(s) == 0);
}

/* Top 5 of one fixed query over the vectors the store hands a search: the ids and scores. */
static void top5(modattn_store *s, int64_t ids[5], float sc[5], bool *mapped, char *note, size_t nlen) {
    modattn_store_vectors v;
    memset(ids, 0, 5 * sizeof *ids);
    CHECK(modattn_store_open_vectors(s, &v) == 0);
    *mapped = v.map != NULL;
    snprintf(note, nlen, "%s", v.note);
    float q[DIM];
    for (int k = 0; k < DIM; k++) q[k] = (float)(k % 5) - 2.0f;
    modattn_hit h[5];
    size_t n = 0;
    CHECK(modattn_topk(v.data, v.n, v.dim, v.ld, q, 5, NULL, MODATTN_SCAN_AUTO, h, &n) == 0 && n == 5);
    for (size_t i = 0; i < n && i < 5; i++) ids[i] = v.chunk_ids[h[i].row], sc[i] = h[i].score;
    modattn_store_vectors_free(&v);
}

static void patch(uint64_t off, const void *bytes, size_t n) {
    int fd = open(g_vec, O_WRONLY);
    CHECK(fd >= 0 && pwrite(fd, bytes, n, (off_t)off) == (ssize_t)n);
    if (fd >= 0) close(fd);
}

static char *slurp(size_t *len) {
    FILE *f = fopen(g_vec, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(*len);
    if (b && fread(b, 1, *len, f) != *len) *len = 0;
    fclose(f);
    return b;
}

static void restore(const char *b, size_t len) {
    FILE *f = fopen(g_vec, "wb");
    CHECK(f && fwrite(b, 1, len, f) == len);
    if (f) fclose(f);
}

int main(void) {
    char dir[] = "/tmp/modattn-vecfile-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    snprintf(g_db, sizeof g_db, "%s/v.db", dir);
    snprintf(g_vec, sizeof g_vec, "%s.vec", g_db);
    modattn_store *s = NULL;
    CHECK(modattn_store_open(g_db, MODATTN_STORE_CREATE, &s) == 0);
    if (!s) return test_finish("test_vecfile");
    modattn_store_model m = {"vec-model", "00112233445566aa", DIM};
    CHECK(modattn_store_bind_model(s, &m) == 0);
    uint64_t g0 = 99, g1 = 0;
    CHECK(modattn_store_generation(s, &g0) == 0 && g0 == 0);
    for (int d = 0; d < 40; d++) {
        char p[64];
        snprintf(p, sizeof p, "/docs/d%02d.txt", d);
        add_doc(s, p, 1 + d % 7);
    }
    CHECK(modattn_store_generation(s, &g1) == 0 && g1 == 40); /* one per changing transaction */

    /* no file yet: the store, and why */
    char why[320];
    CHECK(modattn_store_vector_file_current(s, why, sizeof why) == 0 && strstr(why, "No such file"));
    int64_t ref_ids[5], ids[5];
    float ref_sc[5], sc[5];
    bool mapped;
    char note[320];
    top5(s, ref_ids, ref_sc, &mapped, note, sizeof note);
    CHECK(!mapped && strstr(note, "No such file"));

    /* written: mapped, the same rows as the store's, the same top 5 */
    CHECK(modattn_store_write_vector_file(s) == 0);
    CHECK(modattn_store_vector_file_current(s, why, sizeof why) == 1);
    {
        modattn_store_vectors a, b;
        CHECK(modattn_store_open_vectors(s, &a) == 0 && a.map && !a.note[0]);
        CHECK(modattn_store_load_vectors(s, &b) == 0 && !b.map);
        CHECK(a.n == b.n && a.n == 155 && a.dim == DIM && a.ld == b.ld && ((uintptr_t)a.data % 64) == 0);
        CHECK(memcmp(a.chunk_ids, b.chunk_ids, a.n * 8) == 0 && memcmp(a.data, b.data, a.n * a.ld * 4) == 0);
        modattn_store_vectors_free(&a);
        modattn_store_vectors_free(&b);
    }
    top5(s, ids, sc, &mapped, note, sizeof note);
    CHECK(mapped && memcmp(ids, ref_ids, sizeof ids) == 0 && memcmp(sc, ref_sc, sizeof sc) == 0);

    /* every damage: detected, the store's vectors used, the same results */
    size_t len = 0;
    char *good = slurp(&len);
    CHECK(good && len > 4096);
    struct { const char *what, *needle; uint64_t off; const char *bytes; size_t n; int trunc; } cases[] = {
        {"bad magic", "bad magic", 0, "X", 1, 0},
        {"version", "version 9", 8, "\x09", 1, 0},
        {"header byte", "checksum", 200, "\x7f", 1, 0},
        {"chunk id", "chunk ids are damaged", 4096 + 8 * 3, "\x55", 1, 0},
        {"truncated", "truncated", 0, NULL, 0, -7},
        {"extended", "truncated or extended", 0, NULL, 0, 64},
        {"too short", "shorter than its header", 0, NULL, 0, -100000},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        restore(good, len);
        if (cases[c].bytes) patch(cases[c].off, cases[c].bytes, cases[c].n);
        if (cases[c].trunc) {
            long nl = (long)len + cases[c].trunc;
            CHECK(truncate(g_vec, nl < 100 ? 100 : nl) == 0);
        }
        top5(s, ids, sc, &mapped, note, sizeof note);
        CHECK_MSG(!mapped && strstr(note, cases[c].needle), "%s: mapped %d, note '%s'", cases[c].what, mapped, note);
        CHECK_MSG(memcmp(ids, ref_ids, sizeof ids) == 0 && memcmp(sc, ref_sc, sizeof sc) == 0, "%s: results changed",
                  cases[c].what);
    }
    /* random header bytes: never mapped unless the header is whole, never other results */
    for (int it = 0; it < 300; it++) {
        restore(good, len);
        unsigned char b = (unsigned char)(rnd() * 127 + 128);
        uint64_t off = (uint64_t)((rnd() * 0.5 + 0.5) * 511);
        patch(off, &b, 1);
        top5(s, ids, sc, &mapped, note, sizeof note);
        CHECK_MSG(memcmp(ids, ref_ids, sizeof ids) == 0 && memcmp(sc, ref_sc, sizeof sc) == 0,
                  "header byte %llu = %u: results changed (mapped %d)", (unsigned long long)off, b, mapped);
        if (mapped && good[off] != (char)b) CHECK_MSG(0, "header byte %llu changed and still mapped", (unsigned long long)off);
    }
    restore(good, len);
    CHECK(modattn_store_vector_file_current(s, why, sizeof why) == 1);

    /* the store changes: the file is stale until rewritten; a deleted document never shows */
    CHECK(modattn_store_delete_document(s, "/docs/d00.txt") == 1);
    top5(s, ids, sc, &mapped, note, sizeof note);
    CHECK(!mapped && strstr(note, "stale"));
    {
        modattn_store_vectors v;
        CHECK(modattn_store_open_vectors(s, &v) == 0 && v.n == 154); /* d00 had 1 chunk */
        modattn_store_vectors_free(&v);
    }
    CHECK(modattn_store_write_vector_file(s) == 0);
    top5(s, ids, sc, &mapped, note, sizeof note);
    CHECK(mapped);

    /* another model's file */
    {
        char other[512];
        snprintf(other, sizeof other, "%s/w.db", dir);
        modattn_store *o = NULL;
        CHECK(modattn_store_open(other, MODATTN_STORE_CREATE, &o) == 0);
        modattn_store_model om = {"other-model", "ffeeddccbbaa9988", DIM};
        if (o) {
            CHECK(modattn_store_bind_model(o, &om) == 0);
            add_doc(o, "/o.txt", 2);
            CHECK(modattn_store_write_vector_file(o) == 0);
            modattn_store_close(o);
        }
        char ov[600];
        snprintf(ov, sizeof ov, "%s.vec", other);
        CHECK(rename(ov, g_vec) == 0);
        CHECK(modattn_store_vector_file_current(s, why, sizeof why) == 0 && strstr(why, "other-model"));
    }

    /* a read-only folder: the write fails and says why; nothing is lost */
    if (geteuid() != 0) {
        CHECK(chmod(dir, 0555) == 0);
        CHECK_ERR(modattn_store_write_vector_file(s), MODATTN_EIO, "cannot write the vector file");
        CHECK(chmod(dir, 0755) == 0);
    } else {
        printf("test_vecfile: read-only folder case not run: running as root (permissions do not apply)\n");
    }
    free(good);
    modattn_store_close(s);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return 1;
    return test_finish("test_vecfile");
}
