/* modattn/modattn.h — the whole public C API of modattn. */
#ifndef MODATTN_H
#define MODATTN_H
#include "modattn/status.h"
#include "modattn/core.h"
#include "modattn/attention.h"
#include "modattn/device.h"
#include "modattn/impl.h"
#include "modattn/dispatch.h"
#include "modattn/conformance.h"
#define MODATTN_VERSION_STRING "0.1.0"
#endif
