/* core/status.c — status code names and the per-thread error message. */
#include "modattn/status.h"
#include "core/internal_status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MODATTN_ERRMSG_LEN 1024
static _Thread_local char g_msg[MODATTN_ERRMSG_LEN];

const char *modattn_strerror(int status) {
    switch (status) {
#define X(name, value, text) \
    case value:              \
        return text;
        MODATTN_STATUS_MAP(X)
#undef X
    default:
        return "unknown status";
    }
}

const char *modattn_status_name(int status) {
    switch (status) {
#define X(name, value, text) \
    case value:              \
        return "MODATTN_" #name;
        MODATTN_STATUS_MAP(X)
#undef X
    default:
        return "MODATTN_UNKNOWN";
    }
}

const char *modattn_last_error(void) { return g_msg; }

void modattn_clear_error(void) { g_msg[0] = '\0'; }

int modattn__error(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    return status;
}

int modattn__error_prefix(int status, const char *fmt, ...) {
    char old[MODATTN_ERRMSG_LEN];
    memcpy(old, g_msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n < sizeof g_msg && old[0] != '\0')
        snprintf(g_msg + n, sizeof g_msg - (size_t)n, ": %s", old);
    return status;
}
