/* model/device_auto.c — `--device auto`: the model goes to the device that runs it fastest here,
 * by measurement, never by assumption. Each device present is asked (the model's own load: a
 * device that refuses it says why); on each that takes it, one short timed forward (8 inputs of
 * 32 tokens, the best of 3 after a warm-up) measures it; the timings are kept per model and device
 * in the cache folder (device-auto-v1.tsv), so a later load measures nothing and loads once. A
 * device that fails to load the model (a plugin that cannot compile, memory) is passed over for
 * the next, counted and traced. The choice and its figures are in modattn_model_info.device_choice
 * (`modattn explain --model`). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/encoder_internal.h"
#include "modattn/backend/device.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

#define AUTO_B 8
#define AUTO_S 32
#define AUTO_MAX 16

static bool cache_file(char *buf, size_t len) {
    const char *dir = getenv("MODATTN_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char d[900];
    if (dir && *dir) snprintf(d, sizeof d, "%s", dir);
    else if (xdg && *xdg) snprintf(d, sizeof d, "%s/modattn", xdg);
    else if (home && *home) snprintf(d, sizeof d, "%s/.cache/modattn", home);
    else return false;
    (void)mkdir(d, 0755);
    snprintf(buf, len, "%s/device-auto-v1.tsv", d);
    return true;
}

/* key of (model, device): the model folder's real path, its weights' size and time, the precision,
 * the device's name and driver (a new driver or plugin is measured again) */
static void make_key(const char *dir, const modattn_model_options *opt, const modattn_device_iface *dev, char *key,
                     size_t len) {
    char real[PATH_MAX], w[PATH_MAX + 32], dn[32];
    if (!realpath(dir, real)) snprintf(real, sizeof real, "%s", dir);
    struct stat st;
    memset(&st, 0, sizeof st);
    snprintf(w, sizeof w, "%s/model.safetensors", real);
    (void)stat(w, &st);
    modattn_device_info in;
    modattn_device_info_get(dev, &in);
    modattn_device_format(dev->id, dn, sizeof dn);
    snprintf(key, len, "%s|%lld|%lld|%s|%s|%s", real, (long long)st.st_size, (long long)st.st_mtime,
             modattn_precision_name(opt ? opt->precision : MODATTN_PRECISION_FP32), dn, in.driver);
    for (char *p = key; *p; p++)
        if (*p == '\t' || *p == '\n') *p = ' ';
}

static double cached_ms(const char *file, const char *key) {
    FILE *f = fopen(file, "r");
    if (!f) return -1;
    char line[2048];
    double ms = -1;
    const size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == '\t') {
            char *end;
            double v = strtod(line + kl + 1, &end);
            if (end != line + kl + 1 && v > 0 && v < 1e9) ms = v; /* the last one wins */
        }
    fclose(f);
    return ms;
}

static void store_ms(const char *file, const char *key, double ms) {
    FILE *f = fopen(file, "a"); /* lines appended whole; a torn line is never read as a number */
    if (!f) return;
    fprintf(f, "%s\t%.4f\n", key, ms);
    fclose(f);
}

/* best of 3 timed batches of AUTO_B inputs of AUTO_S tokens, after one warm-up */
static int measure(modattn_model *m, double *ms) {
    const modattn_model_info *in = modattn_model_get_info(m);
    int32_t ids[AUTO_B][AUTO_S];
    const int32_t *rows[AUTO_B];
    size_t counts[AUTO_B];
    for (int b = 0; b < AUTO_B; b++) {
        for (int s = 0; s < AUTO_S; s++) ids[b][s] = 1000 + (b * 37 + s * 11) % 1000; /* plain word pieces */
        rows[b] = ids[b], counts[b] = AUTO_S;
    }
    (void)in;
    float *out = modattn__malloc((size_t)AUTO_B * in->dim * sizeof(float), MODATTN_MEM_ACTIVATIONS);
    if (!out) return modattn__mem_last_status();
    int st = modattn_model_embed_ids(m, rows, counts, AUTO_B, out);
    double best = -1;
    for (int r = 0; r < 3 && !st; r++) {
        uint64_t t0 = modattn__now_ns();
        st = modattn_model_embed_ids(m, rows, counts, AUTO_B, out);
        double t = (double)(modattn__now_ns() - t0) * 1e-6;
        if (best < 0 || t < best) best = t;
    }
    modattn_free(out);
    *ms = best;
    return st;
}

int modattn__model_load_auto(modattn_ctx *ctx, const char *dir, const modattn_model_options *opt, modattn_model **out) {
    *out = NULL;
    modattn_model_options o;
    if (opt) o = *opt;
    else memset(&o, 0, sizeof o);
    char file[1024];
    const bool cache = cache_file(file, sizeof file);
    const int n = modattn_device_count() < AUTO_MAX ? modattn_device_count() : AUTO_MAX;
    struct cand {
        char name[32];
        double ms;    /* measured or cached; < 0: not run here */
        bool cached;
        char why[256]; /* why not */
    } c[AUTO_MAX];
    modattn_model *best = NULL;
    int besti = -1, failed = 0;
    for (int i = 0; i < n; i++) {
        const modattn_device_iface *dev = modattn_device_get(i);
        modattn_device_format(dev->id, c[i].name, sizeof c[i].name);
        c[i].ms = -1, c[i].cached = false, c[i].why[0] = '\0';
        char key[1600];
        make_key(dir, opt, dev, key, sizeof key);
        if (cache && (c[i].ms = cached_ms(file, key)) > 0) {
            c[i].cached = true;
            continue;
        }
        o.device = c[i].name;
        modattn_model *m = NULL;
        uint64_t t0 = modattn__trace_begin();
        int st = modattn__model_load_on_device(ctx, dir, &o, &m);
        double ms = -1;
        if (!st) st = measure(m, &ms);
        modattn__trace_end(t0, "model.device_auto_measure", c[i].name, "", 0, 0);
        if (st) {
            const char *e = modattn_last_error();
            snprintf(c[i].why, sizeof c[i].why, "%s", e && *e ? e : modattn_strerror(st));
            c[i].ms = -1;
            modattn_model_free(m);
            if (st != MODATTN_EUNSUPPORTED && st != MODATTN_EDEVICE && st != MODATTN_ENOMEM && st != MODATTN_EBUDGET) {
                modattn_model_free(best);
                return st; /* the model itself (a missing or malformed file): not a device's matter */
            }
            continue;
        }
        c[i].ms = ms;
        if (cache) store_ms(file, key, ms);
        if (!best || ms < c[besti].ms) {
            modattn_model_free(best);
            best = m, besti = i;
        } else {
            modattn_model_free(m);
        }
    }
    /* the fastest, loading it if only its cached timing was seen; a device that fails to load is
     * passed over for the next fastest */
    for (;;) {
        int pick = -1;
        for (int i = 0; i < n; i++)
            if (c[i].ms > 0 && (pick < 0 || c[i].ms < c[pick].ms)) pick = i;
        if (pick < 0) break;
        if (pick == besti) break;
        if (best && c[besti].ms <= c[pick].ms) break;
        o.device = c[pick].name;
        modattn_model *m = NULL;
        int st = modattn__model_load_on_device(ctx, dir, &o, &m);
        if (!st) {
            modattn_model_free(best);
            best = m, besti = pick;
            break;
        }
        const char *e = modattn_last_error();
        snprintf(c[pick].why, sizeof c[pick].why, "%s", e && *e ? e : modattn_strerror(st));
        c[pick].ms = -1;
        failed++;
        modattn__trace_end(modattn__trace_begin(), "model.device_auto_passed_over", c[pick].name, "", 0, 0);
    }
    if (!best) {
        char all[1024];
        size_t k = 0;
        all[0] = '\0';
        for (int i = 0; i < n && k < sizeof all; i++)
            k += (size_t)snprintf(all + k, sizeof all - k, "%s%s: %s", i ? "; " : "", c[i].name, c[i].why);
        return modattn__error(MODATTN_EUNSUPPORTED, "--device auto: no device runs %s (%s)", dir, all);
    }
    /* the choice in words */
    char *w = best->info.device_choice;
    const size_t wl = sizeof best->info.device_choice;
    size_t k = (size_t)snprintf(w, wl, "auto chose %s: %.2f ms for %d inputs of %d tokens%s", c[besti].name,
                                c[besti].ms, AUTO_B, AUTO_S, c[besti].cached ? " (measured before, cached)" : "");
    for (int i = 0; i < n && k < wl; i++) {
        if (i == besti) continue;
        if (c[i].ms > 0)
            k += (size_t)snprintf(w + k, wl - k, "; %s %.2f ms%s", c[i].name, c[i].ms, c[i].cached ? " (cached)" : "");
        else k += (size_t)snprintf(w + k, wl - k, "; %s not used: %.160s", c[i].name, c[i].why);
    }
    best->info.device_auto_passed_over = (unsigned)failed;
    *out = best;
    return 0;
}

/* The public entry points: "auto" measures and chooses (above), any other device name loads there.
 * They live here, above encoder_load.c, so that the two files do not call each other. */
int modattn_model_load_ex(modattn_ctx *ctx, const char *dir, const modattn_model_options *opt,
                          modattn_model **out) {
    if (opt && opt->device && strcasecmp(opt->device, "auto") == 0) {
        if (!out) return modattn__error(MODATTN_EINVAL, "modattn_model_load: out is NULL");
        *out = NULL;
        if (!ctx || !dir || !*dir)
            return modattn__error(MODATTN_EINVAL, "modattn_model_load: ctx and dir are required");
        return modattn__model_load_auto(ctx, dir, opt, out);
    }
    return modattn__model_load_on_device(ctx, dir, opt, out);
}

int modattn_model_load(modattn_ctx *ctx, const char *dir, modattn_model **out) {
    return modattn_model_load_ex(ctx, dir, NULL, out);
}
