/* backends/xla/xla_pjrt.c — one PJRT plugin through its C API: the plugin is dlopen'ed, its
 * GetPjrtApi() table checked (same major version as the header we were built against; a newer
 * minor is fine, the table only grows), initialised, and one client made. Every call fills its
 * args struct with struct_size so the plugin knows which fields we know of. Errors come back as
 * the plugin's own words, prefixed with the step. The header is pjrt_c_api.h from the pinned
 * xla-cpu-pjrt wheel (`make deps`), never committed here. */
#define _GNU_SOURCE
#include "backends/xla/xla.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt_c_api.h"

struct xla_plugin {
    void *dl;
    const PJRT_Api *api;
    PJRT_Client *client;
    PJRT_Device *device; /* the first addressable device: the one this modattn device runs on */
    int ndevices;
    char path[1024], platform[64], version[192];
    _Atomic int64_t bytes;
};

struct xla_buf {
    PJRT_Buffer *b;
    int64_t bytes;
};

struct xla_exe {
    PJRT_LoadedExecutable *e;
};

/* The plugin's error as text into why ("STEP: message"); destroys it. MODATTN_EDEVICE. */
static int fail(const xla_plugin *p, PJRT_Error *e, const char *step, char *why, size_t len) {
    PJRT_Error_Message_Args m;
    memset(&m, 0, sizeof m);
    m.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
    m.error = e;
    p->api->PJRT_Error_Message(&m);
    int n = (int)(m.message_size > 400 ? 400 : m.message_size);
    snprintf(why, len, "%s: %.*s", step, n, m.message ? m.message : "");
    PJRT_Error_Destroy_Args d;
    memset(&d, 0, sizeof d);
    d.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
    d.error = e;
    p->api->PJRT_Error_Destroy(&d);
    return MODATTN_EDEVICE;
}

/* A teardown call's error: nothing can be done with it but release it. */
static void ignore(const xla_plugin *p, PJRT_Error *e) {
    if (e) {
        char w[64];
        fail(p, e, "teardown", w, sizeof w);
    }
}

/* Calls PJRT_<Fn> with its args struct (struct_size set, one field set): the destroy calls. */
#define PJRT_DESTROY(p, Fn, field, obj)                       \
    do {                                                      \
        Fn##_Args a_;                                         \
        memset(&a_, 0, sizeof a_);                            \
        a_.struct_size = Fn##_Args_STRUCT_SIZE;               \
        a_.field = (obj);                                     \
        ignore((p), (p)->api->Fn(&a_));                       \
    } while (0)

/* Waits for an event and destroys it: 0, or the event's error. */
static int await_event(const xla_plugin *p, PJRT_Event *ev, const char *step, char *why, size_t len) {
    if (!ev) return 0;
    PJRT_Event_Await_Args a;
    memset(&a, 0, sizeof a);
    a.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE;
    a.event = ev;
    PJRT_Error *e = p->api->PJRT_Event_Await(&a);
    PJRT_DESTROY(p, PJRT_Event_Destroy, event, ev);
    return e ? fail(p, e, step, why, len) : 0;
}

int xla_plugin_open(const char *path, xla_plugin **out, char *why, size_t len) {
    *out = NULL;
    xla_plugin *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(why, len, "%s: out of memory", path);
        return MODATTN_ENOMEM;
    }
    snprintf(p->path, sizeof p->path, "%s", path);
    p->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!p->dl) {
        snprintf(why, len, "%s: dlopen: %s", path, dlerror());
        free(p);
        return MODATTN_EDEVICE;
    }
    const PJRT_Api *(*get)(void) = (const PJRT_Api *(*)(void))dlsym(p->dl, "GetPjrtApi");
    p->api = get ? get() : NULL;
    if (!p->api) {
        snprintf(why, len, "%s: %s", path, get ? "GetPjrtApi() returned NULL" : "no GetPjrtApi symbol: not a PJRT plugin");
        goto bad;
    }
    const PJRT_Api_Version v = p->api->pjrt_api_version;
    if (v.major_version != PJRT_API_MAJOR) {
        snprintf(why, len, "%s: PJRT API %d.%d, this build speaks %d.x (a major version apart: not loaded)", path,
                 v.major_version, v.minor_version, PJRT_API_MAJOR);
        goto bad;
    }
    if (v.minor_version < PJRT_API_MINOR || p->api->struct_size < PJRT_Api_STRUCT_SIZE) {
        snprintf(why, len, "%s: PJRT API %d.%d is older than the %d.%d this build needs", path, v.major_version,
                 v.minor_version, PJRT_API_MAJOR, PJRT_API_MINOR);
        goto bad;
    }
    PJRT_Error *e;
    PJRT_Plugin_Initialize_Args pi;
    memset(&pi, 0, sizeof pi);
    pi.struct_size = PJRT_Plugin_Initialize_Args_STRUCT_SIZE;
    char step[1200];
    snprintf(step, sizeof step, "%s: PJRT_Plugin_Initialize", path);
    if ((e = p->api->PJRT_Plugin_Initialize(&pi))) {
        fail(p, e, step, why, len);
        goto bad;
    }
    PJRT_Client_Create_Args cc;
    memset(&cc, 0, sizeof cc);
    cc.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
    snprintf(step, sizeof step, "%s: PJRT_Client_Create", path);
    if ((e = p->api->PJRT_Client_Create(&cc))) {
        fail(p, e, step, why, len);
        goto bad;
    }
    p->client = cc.client;
    PJRT_Client_PlatformName_Args pn;
    memset(&pn, 0, sizeof pn);
    pn.struct_size = PJRT_Client_PlatformName_Args_STRUCT_SIZE;
    pn.client = p->client;
    if (!p->api->PJRT_Client_PlatformName(&pn))
        snprintf(p->platform, sizeof p->platform, "%.*s", (int)pn.platform_name_size, pn.platform_name);
    PJRT_Client_PlatformVersion_Args pv;
    memset(&pv, 0, sizeof pv);
    pv.struct_size = PJRT_Client_PlatformVersion_Args_STRUCT_SIZE;
    pv.client = p->client;
    char pver[96] = "";
    if (!p->api->PJRT_Client_PlatformVersion(&pv))
        snprintf(pver, sizeof pver, "%.*s", (int)(pv.platform_version_size > 80 ? 80 : pv.platform_version_size),
                 pv.platform_version);
    snprintf(p->version, sizeof p->version, "%s, PJRT API %d.%d", pver[0] ? pver : "?", v.major_version,
             v.minor_version);
    PJRT_Client_AddressableDevices_Args ad;
    memset(&ad, 0, sizeof ad);
    ad.struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE;
    ad.client = p->client;
    snprintf(step, sizeof step, "%s: PJRT_Client_AddressableDevices", path);
    if ((e = p->api->PJRT_Client_AddressableDevices(&ad))) {
        fail(p, e, step, why, len);
        goto bad;
    }
    if (ad.num_addressable_devices == 0) {
        snprintf(why, len, "%s: the %s client has no addressable device", path, p->platform);
        goto bad;
    }
    p->device = ad.addressable_devices[0];
    p->ndevices = (int)ad.num_addressable_devices;
    *out = p;
    return 0;
bad:
    xla_plugin_close(p);
    return MODATTN_EDEVICE;
}

void xla_plugin_close(xla_plugin *p) {
    if (!p) return;
    if (p->client) PJRT_DESTROY(p, PJRT_Client_Destroy, client, p->client);
    /* the plugin stays mapped: its own threads and atexit handlers may still run */
    free(p);
}

const char *xla_plugin_platform(const xla_plugin *p) { return p->platform; }
const char *xla_plugin_version(const xla_plugin *p) { return p->version; }
const char *xla_plugin_path(const xla_plugin *p) { return p->path; }
int xla_plugin_devices(const xla_plugin *p) { return p->ndevices; }
int64_t xla_plugin_bytes(const xla_plugin *p) { return atomic_load(&((xla_plugin *)p)->bytes); }

int xla_buf_upload(xla_plugin *p, const void *data, xla_type t, const int64_t *dims, int nd, xla_buf **out, char *why,
                   size_t len) {
    *out = NULL;
    xla_buf *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(why, len, "out of memory");
        return MODATTN_ENOMEM;
    }
    PJRT_Client_BufferFromHostBuffer_Args a;
    memset(&a, 0, sizeof a);
    a.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
    a.client = p->client;
    a.data = data;
    a.type = t == XLA_F32 ? PJRT_Buffer_Type_F32 : PJRT_Buffer_Type_S32;
    a.dims = dims;
    a.num_dims = (size_t)nd;
    a.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
    a.device = p->device;
    PJRT_Error *e = p->api->PJRT_Client_BufferFromHostBuffer(&a);
    if (e) {
        free(b);
        return fail(p, e, "PJRT_Client_BufferFromHostBuffer", why, len);
    }
    b->b = a.buffer;
    int st = await_event(p, a.done_with_host_buffer, "uploading a buffer", why, len);
    if (st) {
        xla_buf_free(p, b);
        return st;
    }
    PJRT_Buffer_OnDeviceSizeInBytes_Args sz;
    memset(&sz, 0, sizeof sz);
    sz.struct_size = PJRT_Buffer_OnDeviceSizeInBytes_Args_STRUCT_SIZE;
    sz.buffer = b->b;
    if ((e = p->api->PJRT_Buffer_OnDeviceSizeInBytes(&sz))) {
        char w[64];
        fail(p, e, "size", w, sizeof w);
    } else {
        b->bytes = (int64_t)sz.on_device_size_in_bytes;
    }
    atomic_fetch_add(&p->bytes, b->bytes);
    *out = b;
    return 0;
}

int xla_buf_download(xla_plugin *p, xla_buf *b, void *dst, size_t bytes, char *why, size_t len) {
    PJRT_Buffer_ToHostBuffer_Args a;
    memset(&a, 0, sizeof a);
    a.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
    a.src = b->b;
    a.dst = dst;
    a.dst_size = bytes;
    PJRT_Error *e = p->api->PJRT_Buffer_ToHostBuffer(&a);
    if (e) return fail(p, e, "PJRT_Buffer_ToHostBuffer", why, len);
    return await_event(p, a.event, "downloading a buffer", why, len);
}

void xla_buf_free(xla_plugin *p, xla_buf *b) {
    if (!b) return;
    if (b->b) PJRT_DESTROY(p, PJRT_Buffer_Destroy, buffer, b->b);
    atomic_fetch_sub(&p->bytes, b->bytes);
    free(b);
}

int64_t xla_buf_bytes(const xla_buf *b) { return b ? b->bytes : 0; }

/* CompileOptionsProto { executable_build_options (3) { num_replicas (4) = 1, num_partitions (5) = 1 } }:
 * the least a plugin accepts (an empty message makes the CPU plugin abort: replica_count 0). */
static const char k_compile_options[] = {0x1a, 0x04, 0x20, 0x01, 0x28, 0x01};

int xla_compile(xla_plugin *p, const char *mlir, size_t n, xla_exe **out, char *why, size_t len) {
    *out = NULL;
    xla_exe *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(why, len, "out of memory");
        return MODATTN_ENOMEM;
    }
    PJRT_Program prog;
    memset(&prog, 0, sizeof prog);
    prog.struct_size = PJRT_Program_STRUCT_SIZE;
    prog.code = (char *)mlir;
    prog.code_size = n;
    prog.format = "mlir";
    prog.format_size = 4;
    PJRT_Client_Compile_Args a;
    memset(&a, 0, sizeof a);
    a.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE;
    a.client = p->client;
    a.program = &prog;
    a.compile_options = k_compile_options;
    a.compile_options_size = sizeof k_compile_options;
    PJRT_Error *e = p->api->PJRT_Client_Compile(&a);
    if (e) {
        free(x);
        return fail(p, e, "PJRT_Client_Compile", why, len);
    }
    x->e = a.executable;
    *out = x;
    return 0;
}

int xla_serialize(xla_plugin *p, xla_exe *x, void **data, size_t *n, char *why, size_t len) {
    *data = NULL;
    *n = 0;
    PJRT_LoadedExecutable_GetExecutable_Args g;
    memset(&g, 0, sizeof g);
    g.struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE;
    g.loaded_executable = x->e;
    PJRT_Error *e = p->api->PJRT_LoadedExecutable_GetExecutable(&g);
    if (e) return fail(p, e, "PJRT_LoadedExecutable_GetExecutable", why, len);
    PJRT_Executable_Serialize_Args s;
    memset(&s, 0, sizeof s);
    s.struct_size = PJRT_Executable_Serialize_Args_STRUCT_SIZE;
    s.executable = g.executable;
    int st = 0;
    if ((e = p->api->PJRT_Executable_Serialize(&s))) {
        st = fail(p, e, "PJRT_Executable_Serialize", why, len);
    } else {
        *data = malloc(s.serialized_bytes_size ? s.serialized_bytes_size : 1);
        if (!*data) {
            snprintf(why, len, "out of memory");
            st = MODATTN_ENOMEM;
        } else {
            memcpy(*data, s.serialized_bytes, s.serialized_bytes_size);
            *n = s.serialized_bytes_size;
        }
        if (s.serialized_executable_deleter) s.serialized_executable_deleter(s.serialized_executable);
    }
    PJRT_DESTROY(p, PJRT_Executable_Destroy, executable, g.executable);
    return st;
}

int xla_deserialize(xla_plugin *p, const void *data, size_t n, xla_exe **out, char *why, size_t len) {
    *out = NULL;
    xla_exe *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(why, len, "out of memory");
        return MODATTN_ENOMEM;
    }
    PJRT_Executable_DeserializeAndLoad_Args a;
    memset(&a, 0, sizeof a);
    a.struct_size = PJRT_Executable_DeserializeAndLoad_Args_STRUCT_SIZE;
    a.client = p->client;
    a.serialized_executable = data;
    a.serialized_executable_size = n;
    PJRT_Error *e = p->api->PJRT_Executable_DeserializeAndLoad(&a);
    if (e) {
        free(x);
        return fail(p, e, "PJRT_Executable_DeserializeAndLoad", why, len);
    }
    x->e = a.loaded_executable;
    *out = x;
    return 0;
}

static void destroy_raw(const xla_plugin *p, PJRT_Buffer *b) {
    if (b) PJRT_DESTROY(p, PJRT_Buffer_Destroy, buffer, b);
}

int xla_execute(xla_plugin *p, xla_exe *x, xla_buf *const *args, size_t nargs, xla_buf **outs, size_t nouts, char *why,
                size_t len) {
    for (size_t i = 0; i < nouts; i++) outs[i] = NULL;
    if (nouts > 8) {
        snprintf(why, len, "at most 8 outputs");
        return MODATTN_EINVAL;
    }
    PJRT_Buffer *stack[160], **argv = nargs <= 160 ? stack : malloc(nargs * sizeof *argv);
    if (!argv) {
        snprintf(why, len, "out of memory");
        return MODATTN_ENOMEM;
    }
    for (size_t i = 0; i < nargs; i++) argv[i] = args[i]->b;
    PJRT_ExecuteOptions eo;
    memset(&eo, 0, sizeof eo);
    eo.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
    PJRT_Buffer *const *lists[1] = {argv};
    PJRT_Buffer *raw[8] = {NULL};
    PJRT_Buffer **olists[1] = {raw};
    PJRT_Event *done[1] = {NULL};
    PJRT_LoadedExecutable_Execute_Args a;
    memset(&a, 0, sizeof a);
    a.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
    a.executable = x->e;
    a.options = &eo;
    a.argument_lists = lists;
    a.num_devices = 1;
    a.num_args = nargs;
    a.output_lists = olists;
    a.device_complete_events = done;
    PJRT_Error *e = p->api->PJRT_LoadedExecutable_Execute(&a);
    if (argv != stack) free(argv);
    if (e) return fail(p, e, "PJRT_LoadedExecutable_Execute", why, len);
    int st = await_event(p, done[0], "executing", why, len);
    for (size_t i = 0; i < nouts && !st; i++) {
        if (!(outs[i] = calloc(1, sizeof *outs[i]))) {
            snprintf(why, len, "out of memory");
            st = MODATTN_ENOMEM;
            break;
        }
        outs[i]->b = raw[i];
        raw[i] = NULL;
    }
    for (size_t i = 0; i < nouts; i++) destroy_raw(p, raw[i]);
    if (st)
        for (size_t i = 0; i < nouts; i++) xla_buf_free(p, outs[i]), outs[i] = NULL;
    return st;
}

void xla_exe_free(xla_plugin *p, xla_exe *x) {
    if (!x) return;
    PJRT_DESTROY(p, PJRT_LoadedExecutable_Destroy, executable, x->e);
    free(x);
}
