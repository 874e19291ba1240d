/* fuzz/fuzz_safetensors.c — feeds arbitrary bytes to the safetensors validator as a file image.
 * An accepted file must satisfy what the encoder relies on: every tensor inside the data buffer,
 * sizes that match shape x dtype, tensors that tile the buffer; every byte is read once so that
 * ASan sees any view pointing outside the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    modattn_st_file *f = NULL;
    if (modattn__st_parse(data, size, "fuzz", &f) != 0) return 0;
    uint64_t covered = 0;
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < f->ntensors; i++) {
        const modattn_st_tensor *t = &f->tensors[i];
        if (t->end < t->begin || t->end > f->data_len) abort();
        if (t->end - t->begin != t->numel * modattn__st_dtype_size(t->dtype)) abort();
        const uint8_t *p = t->data;
        if (p != f->data + t->begin) abort();
        for (uint64_t k = 0; k < t->end - t->begin; k++) sink ^= p[k];
        covered += t->end - t->begin;
        if (modattn__st_find(f, t->name) != t) abort();
    }
    if (covered != f->data_len) abort();
    (void)sink;
    modattn__st_close(f);
    return 0;
}
