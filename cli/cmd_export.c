/* cli/cmd_export.c — `modattn export`: what a store holds, every chunk with its vector, for other
 * tools: JSON Lines (one chunk a line: its id, document path, kind, byte range, line, page, text
 * and vector), or a NumPy .npy file of the vectors ([chunks, dim] little-endian float32, as
 * numpy.load reads it) with a JSON Lines file beside it naming each row (the same fields, less the
 * vector). Read in one snapshot of the store: an index running meanwhile changes nothing seen. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "modattn/core.h"
#include "modattn/store.h"
#include "core/internal_core.h"
#include "pipeline/internal_store.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: modattn export [--db FILE] [--format jsonl|npy] [-o FILE] [--no-vectors]\n\n"
            "Writes every chunk of a store with its vector, in chunk-id order:\n"
            "  jsonl  one JSON object a line (stdout, or -o FILE): {\"chunk_id\", \"path\", \"kind\",\n"
            "         \"seq\", \"start\", \"end\", \"line\", \"page\", \"text\", \"vector\"}; start/end\n"
            "         is the chunk's byte range in the file (or in the extracted text); the vector\n"
            "         is the stored, L2-normalised embedding, each number exact as float32\n"
            "  npy    -o FILE.npy: the vectors as one NumPy array, shape (chunks, dim), dtype\n"
            "         '<f4' (numpy.load reads it), and FILE.jsonl beside it: row i of the array is\n"
            "         line i, {\"row\", \"chunk_id\", \"path\", ...} without the vector\n"
            "options:\n"
            "  --db FILE      the store (default ./" MODATTN_STORE_DEFAULT_PATH ")\n"
            "  --format F     jsonl (default) or npy\n"
            "  -o, --output FILE  where to write (jsonl: default stdout; npy: required)\n"
            "  --no-vectors   jsonl without the \"vector\" field\n"
            "  -h, --help     this help\n"
            "exit status: 0 written; 1 the store or the output failed; 2 usage error.\n");
}

/* One chunk's object (without its vector). */
static json_t *chunk_json(const modattn_store_chunk *c) {
    json_t *o = json_pack("{s:I, s:s, s:I, s:I, s:I, s:I, s:I}", "chunk_id", (json_int_t)c->id, "kind",
                          c->kind ? c->kind : "", "seq", (json_int_t)c->seq, "start", (json_int_t)c->start, "end",
                          (json_int_t)c->end, "line", (json_int_t)c->line, "page", (json_int_t)c->page);
    if (!o || cli_json_set_path(o, "path", c->path) || json_object_set_new(o, "text", cli_json_text(c->text))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Writes j (consumed) as one line. */
static int put_line(FILE *f, json_t *j) {
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s) return -1;
    int r = fputs(s, f) < 0 || fputc('\n', f) < 0 ? -1 : 0;
    modattn__json_free(s);
    return r;
}

/* a vector as a JSON array: %.9g round-trips a float32 exactly */
static int put_vector_line(FILE *f, json_t *o, const float *v, size_t dim) {
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s) return -1;
    size_t n = strlen(s);
    if (n < 2) {
        modattn__json_free(s);
        return -1;
    }
    s[n - 1] = '\0'; /* drop the closing brace */
    int r = fputs(s, f) < 0 ? -1 : 0;
    modattn__json_free(s);
    if (!r && fputs(",\"vector\":[", f) < 0) r = -1;
    for (size_t k = 0; k < dim && !r; k++)
        if (fprintf(f, k ? ",%.9g" : "%.9g", (double)v[k]) < 0) r = -1;
    if (!r && fputs("]}\n", f) < 0) r = -1;
    return r;
}

/* The .npy header (format 1.0) for a float32 array [n, dim]: magic, version, header length, and
 * the header dict padded with spaces to a multiple of 64 bytes, ending in a newline. */
static int put_npy_header(FILE *f, size_t n, size_t dim) {
    char dict[128];
    int dl = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }", n, dim);
    size_t total = 10 + (size_t)dl + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)dl + pad + 1;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
    if (fwrite(pre, 1, 10, f) != 10 || fwrite(dict, 1, (size_t)dl, f) != (size_t)dl) return -1;
    for (size_t i = 0; i < pad; i++)
        if (fputc(' ', f) < 0) return -1;
    return fputc('\n', f) < 0 ? -1 : 0;
}

int cli_cmd_export(cli_globals *g, int argc, char **argv) {
    (void)g;
    const char *db = MODATTN_STORE_DEFAULT_PATH, *format = "jsonl", *out = NULL;
    bool vectors = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage(stdout);
            return 0;
        } else if ((strcmp(a, "--db") == 0 || strcmp(a, "--format") == 0 || strcmp(a, "-o") == 0 ||
                    strcmp(a, "--output") == 0)) {
            if (i + 1 >= argc) {
                fprintf(stderr, "modattn export: %s needs a value (see --help)\n", a);
                return 2;
            }
            const char *v = argv[++i];
            if (strcmp(a, "--db") == 0) db = v;
            else if (strcmp(a, "--format") == 0) format = v;
            else out = v;
        } else if (strncmp(a, "--db=", 5) == 0) db = a + 5;
        else if (strncmp(a, "--format=", 9) == 0) format = a + 9;
        else if (strncmp(a, "--output=", 9) == 0) out = a + 9;
        else if (strcmp(a, "--no-vectors") == 0) vectors = false;
        else {
            fprintf(stderr, "modattn export: unknown argument '%s' (see --help)\n", a);
            return 2;
        }
    }
    bool npy = strcmp(format, "npy") == 0;
    if (!npy && strcmp(format, "jsonl") != 0) {
        fprintf(stderr, "modattn export: --format: '%s' is not jsonl or npy\n", format);
        return 2;
    }
    if (npy && (!out || strcmp(out, "-") == 0)) {
        fprintf(stderr, "modattn export: --format npy needs -o FILE.npy (and writes FILE.jsonl beside it)\n");
        return 2;
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    if (npy) {
        fprintf(stderr, "modattn export: --format npy is written little-endian only\n");
        return 1;
    }
#endif
    modattn_store *s = NULL;
    int st = modattn_store_open(db, MODATTN_STORE_READONLY, &s);
    if (st) return cli_fail("export: opening the store", st);
    if ((st = modattn__store_read_begin(s))) {
        modattn_store_close(s);
        return cli_fail("export", st);
    }
    modattn_store_vectors v;
    memset(&v, 0, sizeof v);
    if ((st = modattn__store_load_vectors(s, &v))) {
        modattn__store_read_end(s);
        modattn_store_close(s);
        return cli_fail("export: reading the vectors", st);
    }
    /* the rows a search sees, in order */
    size_t n = 0;
    for (size_t sg = 0; sg < v.nseg; sg++)
        for (size_t r = 0; r < v.seg[sg].n; r++) {
            size_t row = v.seg[sg].row0 + r;
            if (!v.mask || !(v.mask[row / 8] >> (row % 8) & 1)) n++;
        }
    char *side = NULL;
    FILE *fv = NULL, *fm = stdout;
    int rc = 0;
    if (npy) {
        size_t ol = strlen(out);
        side = malloc(ol + 7);
        if (!side) rc = 1;
        else {
            memcpy(side, out, ol + 1);
            if (ol > 4 && strcmp(out + ol - 4, ".npy") == 0) side[ol - 4] = '\0';
            strcat(side, ".jsonl");
        }
        if (!rc && !(fv = fopen(out, "wb"))) {
            fprintf(stderr, "modattn export: cannot write %s: %s\n", out, strerror(errno));
            rc = 1;
        }
        if (!rc && !(fm = fopen(side, "w"))) {
            fprintf(stderr, "modattn export: cannot write %s: %s\n", side, strerror(errno));
            rc = 1;
        }
        if (!rc && put_npy_header(fv, n, v.dim)) rc = 1;
    } else if (out && strcmp(out, "-") != 0 && !(fm = fopen(out, "w"))) {
        fprintf(stderr, "modattn export: cannot write %s: %s\n", out, strerror(errno));
        rc = 1;
    }
    size_t row = 0;
    for (size_t sg = 0; sg < v.nseg && !rc && !st; sg++) {
        const modattn_store_vector_segment *seg = &v.seg[sg];
        for (size_t r = 0; r < seg->n && !rc && !st; r++) {
            size_t all = seg->row0 + r;
            if (v.mask && (v.mask[all / 8] >> (all % 8) & 1)) continue;
            const float *vec = seg->data + r * v.ld;
            modattn_store_chunk c;
            memset(&c, 0, sizeof c);
            if ((st = modattn__store_get_chunk(s, seg->chunk_ids[r], &c))) break;
            json_t *o = chunk_json(&c);
            modattn__store_chunk_clear(&c);
            if (!o) {
                rc = 1;
                break;
            }
            if (npy) {
                if (json_object_set_new(o, "row", json_integer((json_int_t)row)) || put_line(fm, o) ||
                    fwrite(vec, sizeof(float), v.dim, fv) != v.dim)
                    rc = 1;
            } else if (vectors ? put_vector_line(fm, o, vec, v.dim) : put_line(fm, o)) {
                rc = 1;
            }
            row++;
        }
    }
    const size_t dim = v.dim;
    modattn__store_vectors_free(&v);
    modattn__store_read_end(s);
    modattn_store_close(s);
    if (fv && fclose(fv) != 0) rc = 1;
    if (fm != stdout && fm && fclose(fm) != 0) rc = 1;
    if (st) rc = cli_fail("export", st);
    else if (rc) fprintf(stderr, "modattn export: writing failed: %s\n", strerror(errno));
    else if (npy)
        fprintf(stderr, "modattn export: %zu vectors of %zu dimensions to %s, their chunks to %s\n", row, dim, out, side);
    free(side);
    if (fm == stdout) return cli_finish_stdout(rc);
    return rc;
}
