/* core/alloc_internal.h — the allocator's accounting for core's other allocators (core/json.c).
 * Not a public header. */
#ifndef MODATTN_CORE_ALLOC_INTERNAL_H
#define MODATTN_CORE_ALLOC_INTERNAL_H

#include "modattn/core.h"
#include "core/internal_core.h"

/* Count `bytes` in `cat` against the budget and the fault injection, as modattn__malloc does
 * before it allocates: 0, or MODATTN_ENOMEM / MODATTN_EBUDGET with the message recorded (and the
 * failure counted). */
int modattn__mem_reserve(modattn_mem_category cat, size_t bytes);
/* Count `bytes` in `cat` without asking the budget or the fault injection (memory that must be
 * handed out anyway; see core/json.c). */
void modattn__mem_reserve_forced(modattn_mem_category cat, size_t bytes);
/* Un-count bytes counted by either of the above. */
void modattn__mem_release(modattn_mem_category cat, size_t bytes);
/* One more successful allocation in the statistics. */
void modattn__mem_note_success(void);
/* One more failed allocation (a real one: reserve() counts its own), with its status for
 * modattn__mem_last_status(). */
void modattn__mem_note_failure(int status);

/* The fault injection alone (allocators whose bytes are counted elsewhere: device memory):
 * 0, or MODATTN_ENOMEM with the message recorded and the failure counted, when this attempt is
 * the Nth armed by modattn__mem_fail_nth(). */
int modattn__mem_inject(modattn_mem_category cat, size_t bytes, const char *where);

#endif
