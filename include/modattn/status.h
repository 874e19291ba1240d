/* modattn/status.h — status codes and error messages shared by every part of modattn.
 *
 * Every fallible call returns a modattn_status: 0 is success, negative values are errors.
 * The failing call also records a message naming what went wrong (the file, the field, the
 * limit); read it with modattn_last_error() on the same thread. */
#ifndef MODATTN_STATUS_H
#define MODATTN_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, description): the one list every status code comes from. */
#define MODATTN_STATUS_MAP(X)                                              \
    X(OK, 0, "ok")                                                        \
    X(EINVAL, -1, "invalid argument")                                     \
    X(ENOMEM, -2, "out of memory")                                        \
    X(EUNSUPPORTED, -3, "not supported")                                  \
    X(EIO, -4, "input/output error")                                      \
    X(EFORMAT, -5, "malformed input")                                     \
    X(ENOTFOUND, -6, "not found")                                         \
    X(EVERSION, -7, "version mismatch")                                   \
    X(ERUNTIME, -8, "implementation failed at run time")                  \
    X(EBUDGET, -9, "memory budget exceeded")                              \
    X(ERANGE, -10, "value out of range")                                  \
    X(EINTERNAL, -11, "internal error")                                   \
    X(EDEVICE, -12, "device error")

typedef enum modattn_status {
#define MODATTN__STATUS_ENUM(name, value, text) MODATTN_##name = value,
    MODATTN_STATUS_MAP(MODATTN__STATUS_ENUM)
#undef MODATTN__STATUS_ENUM
} modattn_status;

/* Short description of a status code ("invalid argument"); never NULL. */
const char *modattn_strerror(int status);

/* Symbolic name of a status code ("MODATTN_EINVAL"); never NULL. */
const char *modattn_status_name(int status);

/* The message recorded by the last failing call on this thread, or "" if none.
 * The pointer stays valid until the next modattn call on this thread. */
const char *modattn_last_error(void);



void modattn_clear_error(void);

#ifdef __cplusplus
}
#endif
#endif
