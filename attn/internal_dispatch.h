/* attn/internal_dispatch.h — the library's own functions of modattn/dispatch.h (issue 43: the public API in tiers).
 * Not installed and not exported (modattn__ names; the version script is generated from the
 * public headers): for the library, the CLI, the server, the Python module, the tests and the
 * benchmarks, which are built from this tree. Written by tools/api_rename.py. */
#ifndef MODATTN_ATTN_INTERNAL_DISPATCH_H
#define MODATTN_ATTN_INTERNAL_DISPATCH_H

#include "modattn/dispatch.h"

#ifdef __cplusplus
extern "C" {
#endif

const modattn_attn_impl *modattn__ctx_impl(const modattn_ctx *ctx, size_t i);

/* Why entries of the tune cache file were ignored: negative, non-finite or absurd times, or a
 * winner without a time ("" when none was). Such entries never steer a choice; `explain` and
 * `tune` print this as a warning. */
const char *modattn__tune_note(modattn_ctx *ctx);

modattn_ctx *modattn__session_ctx(const modattn_session *s);

modattn_pool *modattn__session_pool(modattn_session *s);

const modattn_exec *modattn__session_exec(modattn_session *s);

int modattn__ctx_impl_stats(const modattn_ctx *ctx, size_t i, modattn_impl_stats *out);

uint64_t modattn__ctx_fallbacks(const modattn_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
