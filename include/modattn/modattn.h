/* modattn/modattn.h — the whole public C API of modattn: include this one header. */
#ifndef MODATTN_H
#define MODATTN_H
#include "modattn/status.h"
#include "modattn/core.h"
#include "modattn/attention.h"
#include "modattn/backend/device.h"
#include "modattn/backend/impl.h"
#include "modattn/dispatch.h"
#include "modattn/backend/conformance.h"
#include "modattn/model.h"
#include "modattn/tokenizer.h"
#include "modattn/rerank.h"
#include "modattn/sparse.h"
#include "modattn/ingest.h"
#include "modattn/store.h"
#include "modattn/search.h"
#include "modattn/ann.h"

/* The version of these headers; CMake checks it equals project()'s VERSION. */
#define MODATTN_VERSION_STRING "0.3.0"

#ifdef __cplusplus
extern "C" {
#endif
/* The version of the library linked at run time (may differ from MODATTN_VERSION_STRING when a
 * program runs against another libmodattn.so than it was compiled with). */
const char *modattn_version(void);
/* What this build of the library holds, one "key: value" per line: devices, attention
 * implementations, the encoder's GEMM library, the CPU kernels compiled in, the HTTP server, the
 * build type and compiler, and the source commit ("+changes" when the tree had uncommitted
 * edits). Static storage. */
const char *modattn_build_info(void);
#ifdef __cplusplus
}
#endif
#endif
