/* attn/builtins.h — how the attention layer finds the implementations built into this library: a
 * table the build generates (builtins/builtins.c.in, from the backends folders that are there),
 * defined above the backends and read here (docs/ARCHITECTURE.md, "The one seam"). */
#ifndef MODATTN_ATTN_BUILTINS_H
#define MODATTN_ATTN_BUILTINS_H

#include "modattn/backend/impl.h"

typedef struct modattn__attn_backend {
    const char *name;                       /* NULL ends the table */
    const modattn_attn_impl *(*entry)(void); /* modattn__backend_<name> */
} modattn__attn_backend;

extern const modattn__attn_backend modattn__builtin_backends[];

#endif
