/* cli/cli_paths.c — where the commands find the model, and how they show stored paths.
 * Shared by every command that loads a model (embed, index, search), so they all look in the
 * same places in the same order. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

#define CLI_DEFAULT_MODEL "all-MiniLM-L6-v2"

const char *cli_model_dir(const char *given, char *buf, size_t len) {
    if (given) return given;
    const char *env = getenv("MODATTN_MODEL");
    if (env && *env) return env;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0 && buf && len) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            int k = snprintf(buf, len, "%s/../.models/" CLI_DEFAULT_MODEL, exe);
            if (k > 0 && (size_t)k < len && access(buf, F_OK) == 0) return buf;
        }
    }
    return "./.models/" CLI_DEFAULT_MODEL;
}

const char *cli_display_path(const char *abs, char *buf, size_t len) {
    char cwd[PATH_MAX];
    if (!abs || abs[0] != '/' || !getcwd(cwd, sizeof cwd)) return abs;
    size_t n = strlen(cwd);
    if (n == 1) return abs + 1; /* cwd is "/" */
    if (strncmp(abs, cwd, n) != 0 || abs[n] != '/') return abs;
    snprintf(buf, len, "%s", abs + n + 1);
    return buf;
}
