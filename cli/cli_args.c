/* cli/cli_args.c — option values, checked one way everywhere: a value that is empty, not a
 * number, out of range or followed by anything is a usage error (exit 2) with a message naming
 * the option and what it wants. */
#include "cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_parse_ll(const char *opt, const char *v, long long lo, long long hi, long long *out) {
    char *end = NULL;
    errno = 0;
    long long x = v && *v ? strtoll(v, &end, 10) : 0;
    if (!v || !*v || *end || errno == ERANGE || x < lo || x > hi) {
        fprintf(stderr, "modattn: %s: '%s' is not an integer in [%lld, %lld]\n", opt, v ? v : "", lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

int cli_parse_u64(const char *opt, const char *v, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long x = v && *v && !strchr(v, '-') ? strtoull(v, &end, 0) : 0;
    if (!v || !*v || strchr(v, '-') || *end || errno == ERANGE) {
        fprintf(stderr, "modattn: %s: '%s' is not an unsigned 64-bit integer (decimal, or 0x hex)\n", opt,
                v ? v : "");
        return -1;
    }
    *out = (uint64_t)x;
    return 0;
}

int cli_parse_double(const char *opt, const char *v, double lo, double hi, bool lo_open, double *out) {
    return cli_parse_double_say(opt, v, lo, hi, lo_open, true, out);
}

int cli_parse_double_say(const char *opt, const char *v, double lo, double hi, bool lo_open, bool say, double *out) {
    char *end = NULL;
    errno = 0;
    double x = v && *v ? strtod(v, &end) : 0;
    if (!v || !*v || *end || errno == ERANGE || !isfinite(x) || x < lo || (lo_open && x == lo) || x > hi) {
        if (say)
            fprintf(stderr, "modattn: %s: '%s' is not a number in %s%g, %g]\n", opt, v ? v : "", lo_open ? "(" : "[",
                lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

int cli_parse_ints(const char *s, int64_t *v, int n, int64_t lo, int64_t hi) {
    const char *p = s;
    for (int k = 0; k < n; k++) {
        char *end;
        errno = 0;
        if (!*p || *p == ',' || *p == ' ') return -1;
        long long x = strtoll(p, &end, 10);
        if (end == p || errno == ERANGE || x < lo || x > hi) return -1;
        v[k] = x;
        if (k == n - 1) return *end == '\0' ? 0 : -1; /* exactly n values */
        if (*end != ',') return -1;
        p = end + 1;
    }
    return -1;
}

int cli_check_output_path(const char *opt, const char *path) {
    if (!path || !*path) {
        fprintf(stderr, "modattn: %s: an empty file name\n", opt);
        return -1;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
    else snprintf(dir, sizeof dir, ".");
    struct stat sb;
    char safe[4 * 4096];
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "modattn: %s: the folder '%s' does not exist\n", opt, cli_term_text(dir, safe, sizeof safe));
        return -1;
    }
    if (access(dir, W_OK) != 0) {
        fprintf(stderr, "modattn: %s: cannot write in the folder '%s': %s\n", opt, cli_term_text(dir, safe, sizeof safe),
                strerror(errno));
        return -1;
    }
    if (stat(path, &sb) == 0 && (S_ISDIR(sb.st_mode) || access(path, W_OK) != 0)) {
        fprintf(stderr, "modattn: %s: cannot write '%s': %s\n", opt, cli_term_text(path, safe, sizeof safe),
                S_ISDIR(sb.st_mode) ? "it is a folder" : strerror(errno));
        return -1;
    }
    return 0;
}

const char *cli_opt_value(int argc, char **argv, int *i, const char *name, bool *missing) {
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] != '\0') return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

bool cli_has_arg(int argc, char **argv, const char *arg) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) return false;
        if (strcmp(argv[i], arg) == 0) return true;
    }
    return false;
}
