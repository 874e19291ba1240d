/* attn/registry.c — the implementations of a context: built-ins, in-process registrations and
 * plugins loaded from MODATTN_PLUGIN_PATH, each validated before it is listed (never
 * half-loaded); lookups and per-implementation counters. The lowest file of attn/: it calls
 * nothing above it (context.c creates and frees the context). */
#include "attn/internal.h"
#include "attn/internal_dispatch.h"
#include "core/internal_core.h"
#include "core/internal_status.h"

#include <pthread.h>

#include <ctype.h>
#include <dirent.h>
#include <xxhash.h>
#include <glob.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn/builtins.h" /* the generated table of the backends built in */


static int valid_name(const char *s) {
    if (!s || !*s || strlen(s) > 63) return 0;
    for (; *s; s++)
        if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '_')) return 0;
    return 1;
}

int modattn__ctx_add(modattn_ctx *ctx, const modattn_attn_impl *impl, const char *origin, void *dl,
                     bool refuse_on_init_failure) {
    if (!impl) return modattn__error(MODATTN_EINVAL, "%s: implementation table is NULL", origin);
    if (impl->api_version < MODATTN_IMPL_API_VERSION_MIN || impl->api_version > MODATTN_IMPL_API_VERSION)
        return modattn__error(MODATTN_EVERSION,
                             "%s: implementation '%s' was built for api_version %u, this modattn speaks "
                             "api_version %u (and loads %u); rebuild it against this modattn/backend/impl.h",
                             origin, valid_name(impl->name) ? impl->name : "?", impl->api_version,
                             MODATTN_IMPL_API_VERSION, MODATTN_IMPL_API_VERSION_MIN);
    if (!valid_name(impl->name))
        return modattn__error(MODATTN_EINVAL, "%s: implementation name must be 1-63 characters of [a-z0-9_]", origin);
    if (!impl->supports || !impl->run)
        return modattn__error(MODATTN_EINVAL, "%s: implementation '%s' lacks the required slot '%s'", origin,
                             impl->name, !impl->supports ? "supports" : "run");
    if ((unsigned)impl->device >= MODATTN_DEVICE_KIND_COUNT)
        return modattn__error(MODATTN_EINVAL, "%s: implementation '%s' names unknown device kind %d", origin,
                             impl->name, (int)impl->device);
    if (modattn_ctx_find(ctx, impl->name) >= 0)
        return modattn__error(MODATTN_EINVAL, "%s: an implementation named '%s' is already registered", origin,
                             impl->name);
    modattn__entry e;
    memset(&e, 0, sizeof e);
    e.impl = impl;
    e.available = true;
    if (impl->init && impl->device != MODATTN_DEVICE_CPU && !refuse_on_init_failure) {
        e.deferred = true; /* its driver starts when first needed (modattn__entry_ready) */
    } else if (impl->init) {
        char why[256] = "";
        int st = impl->init(impl->ctx, why, sizeof why);
        if (st != 0) {
            if (refuse_on_init_failure)
                return modattn__error(MODATTN_ERUNTIME, "%s: implementation '%s' failed to initialise: %s", origin,
                                     impl->name, why[0] ? why : modattn_strerror(st));
            e.available = false;
            snprintf(e.reason, sizeof e.reason, "%s", why[0] ? why : modattn_strerror(st));
        } else {
            e.inited = true;
        }
    } else {
        e.inited = true;
    }
    e.origin = modattn__strdup(origin, MODATTN_MEM_OTHER);
    if (!e.origin) goto oom;
    e.samples = modattn__malloc(MODATTN__SAMPLES * sizeof *e.samples, MODATTN_MEM_OTHER);
    if (!e.samples) goto oom;
    e.rng = 0x853c49e6748fea9bull;
    if (ctx->n == ctx->cap) {
        size_t cap = ctx->cap ? ctx->cap * 2 : 8;
        modattn__entry *n = modattn__realloc(ctx->entries, cap * sizeof *n, MODATTN_MEM_OTHER);
        if (!n) goto oom;
        ctx->entries = n;
        ctx->cap = cap;
    }
    e.dl = dl;
    ctx->entries[ctx->n++] = e;
    return 0;
oom:
    modattn_free(e.origin);
    modattn_free(e.samples);
    if (e.inited && impl->shutdown) impl->shutdown(impl->ctx);
    return MODATTN_ENOMEM;
}

static int add_plugin_error(modattn_ctx *ctx, const char *msg) {
    char **n = modattn__realloc(ctx->plugin_errors, (ctx->nerrors + 1) * sizeof *n, MODATTN_MEM_OTHER);
    if (!n) return MODATTN_ENOMEM;
    ctx->plugin_errors = n;
    n[ctx->nerrors] = modattn__strdup(msg, MODATTN_MEM_OTHER);
    if (!n[ctx->nerrors]) return MODATTN_ENOMEM;
    ctx->nerrors++;
    return 0;
}

int modattn_ctx_load_plugin(modattn_ctx *ctx, const char *path) {
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *why = dlerror();
        return modattn__error(MODATTN_EIO, "plugin %s: cannot load: %s", path, why ? why : "unknown error");
    }
    dlerror();
    void *sym = dlsym(dl, MODATTN_PLUGIN_ENTRY);
    if (!sym) {
        dlclose(dl);
        return modattn__error(MODATTN_ENOTFOUND, "plugin %s: refused: it exports no '%s' function", path,
                             MODATTN_PLUGIN_ENTRY);
    }
    modattn_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry); /* object pointer to function pointer, the POSIX way */
    const modattn_attn_impl *impl = entry();
    char origin[1100];
    snprintf(origin, sizeof origin, "plugin %s", path);
    int st = impl ? modattn__ctx_add(ctx, impl, origin, dl, true)
                  : modattn__error(MODATTN_EINVAL, "%s: %s() returned NULL", origin, MODATTN_PLUGIN_ENTRY);
    if (st != 0) {
        modattn__error_prefix(st, "refused");
        dlclose(dl);
        return st;
    }
    /* the tuning cache's key learns the file: path, size, time and its first MiB */
    {
        struct stat sb;
        uint64_t h = ctx->plugin_sig ? ctx->plugin_sig : 0x9e3779b97f4a7c15ull;
        if (stat(path, &sb) == 0) {
            h = XXH64(path, strlen(path), h);
            int64_t meta[2] = {(int64_t)sb.st_size, (int64_t)sb.st_mtime};
            h = XXH64(meta, sizeof meta, h);
            FILE *f = fopen(path, "rb");
            if (f) {
                static _Thread_local unsigned char buf[1 << 16];
                size_t got, total = 0;
                while (total < ((size_t)1 << 20) && (got = fread(buf, 1, sizeof buf, f)) > 0) {
                    h = XXH64(buf, got, h);
                    total += got;
                }
                fclose(f);
            }
        }
        ctx->plugin_sig = h;
    }
    /* the entry's origin is the bare path */
    modattn__entry *e = &ctx->entries[ctx->n - 1];
    char *p = modattn__strdup(path, MODATTN_MEM_OTHER);
    if (p) {
        modattn_free(e->origin);
        e->origin = p;
    }
    return 0;
}

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int load_one(modattn_ctx *ctx, const char *path) {
    int st = modattn_ctx_load_plugin(ctx, path);
    if (st == MODATTN_ENOMEM) return st;
    if (st != 0) return add_plugin_error(ctx, modattn_last_error());
    return 0;
}

static int load_plugin_path(modattn_ctx *ctx, const char *list) {
    char *copy = modattn__strdup(list, MODATTN_MEM_OTHER);
    if (!copy) return MODATTN_ENOMEM;
    int st = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ":", &save); item && st == 0; item = strtok_r(NULL, ":", &save)) {
        struct stat sb;
        if (stat(item, &sb) != 0) {
            char msg[1200];
            snprintf(msg, sizeof msg, "plugin path entry %s: does not exist", item);
            st = add_plugin_error(ctx, msg);
            continue;
        }
        if (!S_ISDIR(sb.st_mode)) {
            st = load_one(ctx, item);
            continue;
        }
        DIR *dir = opendir(item);
        if (!dir) {
            char msg[1200];
            snprintf(msg, sizeof msg, "plugin folder %s: cannot be read", item);
            st = add_plugin_error(ctx, msg);
            continue;
        }
        char **names = NULL;
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(dir)) && st == 0) {
            if (!has_suffix(de->d_name, ".so")) continue;
            char **nn = modattn__realloc(names, (n + 1) * sizeof *nn, MODATTN_MEM_OTHER);
            if (!nn) { st = MODATTN_ENOMEM; break; }
            names = nn;
            size_t len = strlen(item) + strlen(de->d_name) + 2;
            names[n] = modattn__malloc(len, MODATTN_MEM_OTHER);
            if (!names[n]) { st = MODATTN_ENOMEM; break; }
            snprintf(names[n], len, "%s/%s", item, de->d_name);
            n++;
        }
        closedir(dir);
        if (names) qsort(names, n, sizeof *names, cmp_str); /* deterministic order */
        for (size_t i = 0; i < n; i++) {
            if (st == 0) st = load_one(ctx, names[i]);
            modattn_free(names[i]);
        }
        modattn_free(names);
    }
    modattn_free(copy);
    return st;
}

/* With no MODATTN_PLUGIN_PATH: the standard places, each only if it exists. Folders: the user's
 * ~/.local/lib/modattn/plugins and the installation's <prefix>/lib/modattn/plugins. Python packages:
 * an entry point in the group "modattn.plugins" of any installed distribution whose value is the
 * plugin's path relative to the site-packages folder ("myattn = someones_attn/libmyattn.so", in
 * the package's pyproject.toml: [project.entry-points."modattn.plugins"]), so `pip install
 * someones-attn` makes it appear. */
static int discover_entry_points(modattn_ctx *ctx, const char *site) {
    char pat[1200];
    snprintf(pat, sizeof pat, "%s/*.dist-info/entry_points.txt", site);
    glob_t g;
    if (glob(pat, 0, NULL, &g) != 0) return 0;
    int st = 0;
    for (size_t i = 0; i < g.gl_pathc && st == 0; i++) {
        FILE *f = fopen(g.gl_pathv[i], "r");
        if (!f) continue;
        char line[1200];
        bool in = false;
        while (fgets(line, sizeof line, f) && st == 0) {
            line[strcspn(line, "\r\n")] = '\0';
            char *p = line;
            while (*p == ' ' || *p == '\t') p++;
            if (*p == '[') {
                in = strncmp(p, "[modattn.plugins]", 17) == 0;
                continue;
            }
            char *eq = strchr(p, '=');
            if (!in || !eq) continue;
            char *v = eq + 1;
            while (*v == ' ' || *v == '\t') v++;
            size_t n = strlen(v);
            while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) v[--n] = '\0';
            if (!n || strstr(v, "..")) continue; /* inside site-packages only */
            char full[2400];
            snprintf(full, sizeof full, "%s/%s", site, v);
            struct stat sb;
            if (stat(full, &sb) != 0 || !S_ISREG(sb.st_mode)) {
                char msg[2600];
                snprintf(msg, sizeof msg, "entry point modattn.plugins in %s: %s is not a file", g.gl_pathv[i], full);
                st = add_plugin_error(ctx, msg);
                continue;
            }
            st = load_one(ctx, full);
        }
        fclose(f);
    }
    globfree(&g);
    return st;
}

static int discover_plugins(modattn_ctx *ctx) {
    char dir[1100];
    struct stat sb;
    int st = 0;
    const char *home = getenv("HOME");
    if (home && *home) {
        snprintf(dir, sizeof dir, "%s/.local/lib/modattn/plugins", home);
        if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) && (st = load_plugin_path(ctx, dir))) return st;
    }
#ifdef MODATTN_INSTALL_PLUGIN_DIR
    if (stat(MODATTN_INSTALL_PLUGIN_DIR, &sb) == 0 && S_ISDIR(sb.st_mode) &&
        (st = load_plugin_path(ctx, MODATTN_INSTALL_PLUGIN_DIR)))
        return st;
#endif
    const char *venv = getenv("VIRTUAL_ENV");
    char roots[4][700];
    int nr = 0;
    if (venv && *venv) snprintf(roots[nr++], sizeof roots[0], "%s/lib/python3*/site-packages", venv);
    if (home && *home) snprintf(roots[nr++], sizeof roots[0], "%s/.local/lib/python3*/site-packages", home);
    snprintf(roots[nr++], sizeof roots[0], "/usr/local/lib/python3*/*-packages");
    snprintf(roots[nr++], sizeof roots[0], "/usr/lib/python3/dist-packages");
    for (int r = 0; r < nr && st == 0; r++) {
        glob_t g;
        if (glob(roots[r], GLOB_ONLYDIR, NULL, &g) != 0) continue;
        for (size_t i = 0; i < g.gl_pathc && st == 0; i++) st = discover_entry_points(ctx, g.gl_pathv[i]);
        globfree(&g);
    }
    return st;
}

/* The registry's part of a context: built-ins and plugins (context.c calls it at creation). */
static pthread_mutex_t g_ready_mu = PTHREAD_MUTEX_INITIALIZER;

void modattn__entry_ready(modattn__entry *e) {
    if (!__atomic_load_n(&e->deferred, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&g_ready_mu);
    if (e->deferred) {
        char why[256] = "";
        int st = e->impl->init(e->impl->ctx, why, sizeof why);
        if (st != 0) {
            e->available = false;
            snprintf(e->reason, sizeof e->reason, "%s", why[0] ? why : modattn_strerror(st));
        } else {
            e->inited = true;
        }
        __atomic_store_n(&e->deferred, false, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_ready_mu);
}

int modattn__registry_fill(modattn_ctx *ctx, const modattn_ctx_options *opt) {
    int st = 0;
    if (!opt->no_builtins) {
        for (const modattn__attn_backend *b = modattn__builtin_backends; b->name && st == 0; b++)
            st = modattn__ctx_add(ctx, b->entry(), "builtin", NULL, false);
        if (st) return st;
    }
    const char *path = opt->plugin_path ? opt->plugin_path : getenv("MODATTN_PLUGIN_PATH");
    if (path) return *path ? load_plugin_path(ctx, path) : 0; /* the caller's list, and nothing else */
    return discover_plugins(ctx);
}

/* Releases the entries (shutdown, dlclose) and the plugin errors. */
void modattn__registry_free(modattn_ctx *ctx) {
    for (size_t i = 0; i < ctx->n; i++) {
        modattn__entry *e = &ctx->entries[i];
        if (e->inited && e->impl->shutdown) e->impl->shutdown(e->impl->ctx);
        if (e->dl) dlclose(e->dl);
        modattn_free(e->origin);
        modattn_free(e->samples);
    }
    for (size_t i = 0; i < ctx->nerrors; i++) modattn_free(ctx->plugin_errors[i]);
    modattn_free(ctx->plugin_errors);
    modattn_free(ctx->entries);
    ctx->entries = NULL;
    ctx->n = ctx->nerrors = 0;
}

int modattn_ctx_register(modattn_ctx *ctx, const modattn_attn_impl *impl) {
    return modattn__ctx_add(ctx, impl, "registered", NULL, false);
}

size_t modattn_ctx_impl_count(const modattn_ctx *ctx) { return ctx->n; }

const modattn_attn_impl *modattn__ctx_impl(const modattn_ctx *ctx, size_t i) {
    return i < ctx->n ? ctx->entries[i].impl : NULL;
}

int modattn_ctx_impl_info(const modattn_ctx *ctx, size_t i, modattn_impl_info *out) {
    if (i >= ctx->n) return modattn__error(MODATTN_ERANGE, "implementation index %zu out of range", i);
    modattn__entry *e = &ctx->entries[i];
    modattn__entry_ready(e); /* whether it is available is what is asked */
    memset(out, 0, sizeof *out);
    out->name = e->impl->name;
    out->description = e->impl->description ? e->impl->description : "";
    out->device = e->impl->device;
    out->priority = e->impl->priority;
    out->available = e->available;
    snprintf(out->reason, sizeof out->reason, "%s", e->reason);
    out->origin = e->origin;
    return 0;
}

long modattn_ctx_find(const modattn_ctx *ctx, const char *name) {
    for (size_t i = 0; i < ctx->n; i++)
        if (strcmp(ctx->entries[i].impl->name, name) == 0) return (long)i;
    return -1;
}

size_t modattn_ctx_plugin_error_count(const modattn_ctx *ctx) { return ctx->nerrors; }

const char *modattn_ctx_plugin_error(const modattn_ctx *ctx, size_t i) {
    return i < ctx->nerrors ? ctx->plugin_errors[i] : NULL;
}

int modattn_ctx_threads(const modattn_ctx *ctx) { return ctx->exec.nthreads; }

const modattn_exec *modattn_ctx_exec(modattn_ctx *ctx) { return &ctx->exec; }

int modattn__ctx_impl_stats(const modattn_ctx *ctx, size_t i, modattn_impl_stats *out) {
    if (i >= ctx->n) return modattn__error(MODATTN_ERANGE, "implementation index %zu out of range", i);
    const modattn__entry *e = &ctx->entries[i];
    float tmp[MODATTN__SAMPLES];
    pthread_mutex_lock((pthread_mutex_t *)&ctx->mu); /* the counters may be moving in other sessions */
    *out = e->stats;
    /* median of the reservoir (a uniform sample of every successful call's time) */
    size_t n = e->done;
    if (n > MODATTN__SAMPLES) n = MODATTN__SAMPLES;
    if (n) memcpy(tmp, e->samples, n * sizeof *tmp);
    pthread_mutex_unlock((pthread_mutex_t *)&ctx->mu);
    out->median_ms = 0;
    if (n) {
        for (size_t a = 1; a < n; a++) /* insertion sort: n is small and this is not a hot path */
            for (size_t b = a; b > 0 && tmp[b] < tmp[b - 1]; b--) {
                float t = tmp[b];
                tmp[b] = tmp[b - 1];
                tmp[b - 1] = t;
            }
        out->median_ms = tmp[n / 2];
    }
    return 0;
}

uint64_t modattn__ctx_fallbacks(const modattn_ctx *ctx) {
    pthread_mutex_lock((pthread_mutex_t *)&ctx->mu);
    uint64_t n = ctx->fallbacks;
    pthread_mutex_unlock((pthread_mutex_t *)&ctx->mu);
    return n;
}
