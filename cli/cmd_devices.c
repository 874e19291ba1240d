/* cli/cmd_devices.c — `modattn devices`: every device found, what it is, and which attention
 * implementations and encoder ops run on it. */
#include "cli/cli.h"
#include "device/internal_device.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char *impls_on(modattn_ctx *ctx, modattn_device_kind kind, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < modattn_ctx_impl_count(ctx); i++) {
        modattn_impl_info info;
        modattn_ctx_impl_info(ctx, i, &info);
        if (info.device != kind) continue;
        int w = snprintf(buf + used, len - used, "%s%s%s", used ? " " : "", info.name, info.available ? "" : "(unavailable)");
        if (w > 0 && (size_t)w < len - used) used += (size_t)w;
    }
    return buf;
}

static void ops_on(const modattn_device_iface *dev, char *yes, size_t ylen, char *no, size_t nlen) {
    size_t uy = 0, un = 0;
    yes[0] = no[0] = '\0';
    for (int op = 0; op < MODATTN_OP_COUNT; op++) {
        char reason[256];
        bool ok = modattn_device_supports_op(dev, (modattn_op)op, reason, sizeof reason);
        char *b = ok ? yes : no;
        size_t *u = ok ? &uy : &un, len = ok ? ylen : nlen;
        int w = ok ? snprintf(b + *u, len - *u, "%s%s", *u ? " " : "", modattn_op_name((modattn_op)op))
                   : snprintf(b + *u, len - *u, "%s%s (%s)", *u ? "; " : "", modattn_op_name((modattn_op)op), reason);
        if (w > 0 && (size_t)w < len - *u) *u += (size_t)w;
    }
}

int cli_cmd_devices(cli_globals *g, int argc, char **argv) {
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            printf("usage: modattn devices [--json]\n\n"
                   "Lists every device found: the CPU, and each device of each OpenCL platform (vendor,\n"
                   "driver, memory, compute units, fp16/fp64), with the attention implementations and the\n"
                   "encoder ops that run on it. Pass a device's name to --device (e.g. --device opencl:0)\n"
                   "to run embed, index and search there. Kinds with no device say why.\n");
            return 0;
        }
        if (strcmp(argv[i], "--json") == 0) json = true;
        else {
            fprintf(stderr, "modattn devices: unknown argument '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    modattn_ctx *ctx;
    if (cli_open_ctx(g, &ctx)) return 1;
    int n = modattn_device_count();
    const char *absent = modattn_device_absent_reasons();
    char impls[512], yes[512], no[1024];
    if (json) {
        json_t *arr = json_array();
        for (int i = 0; i < n; i++) {
            const modattn_device_iface *dev = modattn_device_get(i);
            modattn_device_info in;
            modattn_device_info_get(dev, &in);
            impls_on(ctx, dev->id.kind, impls, sizeof impls);
            ops_on(dev, yes, sizeof yes, no, sizeof no);
            json_t *im = json_array(), *ops = json_array();
            for (char *t = strtok(impls, " "); t; t = strtok(NULL, " ")) json_array_append_new(im, json_string(t));
            for (char *t = strtok(yes, " "); t; t = strtok(NULL, " ")) json_array_append_new(ops, json_string(t));
            json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:i, s:b, s:b, s:b, s:o, s:o, s:s}",
                                                 "name", in.name, "kind", modattn_device_kind_name(dev->id.kind),
                                                 "platform", in.platform, "vendor", in.vendor, "model", in.model,
                                                 "driver", in.driver, "memory_bytes", (json_int_t)in.memory_bytes,
                                                 "max_alloc_bytes", (json_int_t)in.max_alloc_bytes, "local_mem_bytes",
                                                 (json_int_t)in.local_mem_bytes, "compute_units", in.compute_units,
                                                 "fp16", in.fp16, "fp64", in.fp64, "host_memory", in.host_memory,
                                                 "implementations", im, "ops", ops, "ops_refused", no));
            json_t *last = json_array_get(arr, json_array_size(arr) - 1);
            json_object_set_new(last, "note", json_string(in.note));
            json_object_set_new(last, "whole_encoder", json_boolean(modattn__device_has_graph(dev)));
        }
        return cli_print_json(json_pack("{s:o, s:s}", "devices", arr, "absent", absent));
    }
    for (int i = 0; i < n; i++) {
        const modattn_device_iface *dev = modattn_device_get(i);
        modattn_device_info in;
        modattn_device_info_get(dev, &in);
        printf("%s%s\n", in.name, in.host_memory ? " (host memory)" : "");
        if (in.platform[0]) printf("  platform        %s\n", in.platform);
        printf("  device          %s%s%s\n", in.model, in.vendor[0] ? " — " : "", in.vendor);
        printf("  driver          %s\n", in.driver);
        if (modattn__device_has_graph(dev)) { /* no ops one by one: the whole encoder, compiled */
            printf("  encoder         the whole encoder as one compiled program per shape bucket\n");
            if (in.note[0]) printf("  note            %s\n", in.note);
            continue;
        }
        printf("  memory          %.1f GiB (largest buffer %.1f GiB)", (double)in.memory_bytes / (1 << 30),
               (double)in.max_alloc_bytes / (1 << 30));
        if (in.local_mem_bytes) printf(", local %lld KiB", (long long)in.local_mem_bytes / 1024);
        printf("\n  compute units   %d; fp16 %s, fp64 %s\n", in.compute_units, in.fp16 ? "yes" : "no", in.fp64 ? "yes" : "no");
        printf("  attention       %s\n", impls_on(ctx, dev->id.kind, impls, sizeof impls)[0] ? impls : "(none)");
        ops_on(dev, yes, sizeof yes, no, sizeof no);
        printf("  encoder ops     %s\n", yes[0] ? yes : "(none)");
        if (no[0]) printf("  not run here    %s\n", no);
        if (in.note[0]) printf("  note            %s\n", in.note);
    }
    if (absent[0]) printf("not found: %s\n", absent);
    return 0;
}
