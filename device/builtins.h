/* device/builtins.h — how the device layer finds the devices built into this library: a table the
 * build generates (builtins/builtins.c.in, from the backends folders that are there), defined above
 * the backends and read here. The device layer names no backend: deleting a backend's folder
 * changes only the generated table (docs/ARCHITECTURE.md, "The one seam"). */
#ifndef MODATTN_DEVICE_BUILTINS_H
#define MODATTN_DEVICE_BUILTINS_H

#include <stdbool.h>
#include <stddef.h>

#include "modattn/backend/device.h"

/* A backend's device probe: up to `max` devices into out[], or 0 with `why` saying why none. */
typedef int (*modattn__devices_fn)(const modattn_device_iface **out, int max, char *why, size_t len);

typedef struct modattn__device_backend {
    const char *name;            /* "cpu", "opencl", ...; NULL ends the table */
    modattn__devices_fn devices; /* modattn__devices_<name> */
    bool host;                   /* its devices are host memory and need no driver: probed first,
                                  * alone, so CPU-only work starts no other backend's driver */
} modattn__device_backend;

/* Host backends first (the CPU's device is device 0), then the others in build order. */
extern const modattn__device_backend modattn__builtin_devices[];

#endif
