/* core/env.h — the one reader of modattn's environment variables.
 *
 * Every MODATTN_* variable the library or the CLI reads is a row of one table (core/env.c) with
 * its kind and range. modattn__env_check() validates all that are set, with the same rules as the
 * flags they stand for (a bad value is a usage error naming the variable); the readers below
 * parse by the same rules, so a site never interprets a value on its own. Test hooks
 * (MODATTN_TEST_*) are not in the table. */
#ifndef MODATTN_CORE_ENV_H
#define MODATTN_CORE_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include "core/internal_core.h"

typedef enum modattn__env_kind {
    MODATTN__ENV_TEXT,  /* any non-empty text (paths, names checked where they are used) */
    MODATTN__ENV_BOOL,  /* 1/0, true/false, yes/no, on/off (any case) */
    MODATTN__ENV_INT,   /* a whole number in [lo, hi] */
    MODATTN__ENV_REAL,  /* a finite number in [lo, hi] */
    MODATTN__ENV_CHOICE, /* one of the comma-separated words in choices (any case) */
    MODATTN__ENV_LIST,  /* a comma-separated list of those words */
    MODATTN__ENV_SERVE, /* read and checked by `modattn serve`'s option table, with its flag's rules */
    MODATTN__ENV_TEST,  /* a test knob: DEVICE:VALUE, checked where it is read */
} modattn__env_kind;

typedef struct modattn__env_var {
    const char *name;
    modattn__env_kind kind;
    double lo, hi;
    const char *choices;
    const char *doc; /* what it does, for --help and the README's table */
} modattn__env_var;

/* The table, ended by a row whose name is NULL. */
extern const modattn__env_var modattn__env_vars[];

/* The value of a set variable, or NULL when unset (an empty value is "set": the check refuses it). */
const char *modattn__env_raw(const char *name);
/* The readers: the default when unset or (after a failed check only) malformed. */
bool modattn__env_bool(const char *name, bool dflt);
long long modattn__env_int(const char *name, long long dflt);
double modattn__env_real(const char *name, double dflt);
/* Whether a LIST variable holds word (any case). */
bool modattn__env_has(const char *name, const char *word);

#endif
