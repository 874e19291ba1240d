/* core/internal_status.h — the library's own functions of modattn/status.h (issue 43: the public API in tiers).
 * Not installed and not exported (modattn__ names; the version script is generated from the
 * public headers): for the library, the CLI, the server, the Python module, the tests and the
 * benchmarks, which are built from this tree. Written by tools/api_rename.py. */
#ifndef MODATTN_CORE_INTERNAL_STATUS_H
#define MODATTN_CORE_INTERNAL_STATUS_H

#include "modattn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Record an error message for this thread and return `status` (for `return modattn__error(...)`). */
int modattn__error(int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Prefix the current message with more context: "loading model.safetensors: <old message>". */
int modattn__error_prefix(int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
