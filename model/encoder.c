/* model/encoder.c — the sentence-embedding pipeline around the BERT-family encoder:
 * tokenize -> sort by length -> batches under a token budget -> the forward pass on the model's
 * device (encoder_device.c; the CPU's ops: backends/cpu) -> outputs in input order.
 *
 * Layout: activations are token-major [B*S, H] (row b*S+i is token i of batch row b, padded to
 * the batch's longest text S). The QKV projection writes [B*S, 3H]; Q, K and V are strided views
 * of it ([B, heads, S, dh] with strides [S*3H, dh, 3H, 1]), and the attention output is written
 * as a view [B, heads, S, dh] of a [B*S, H] buffer, so no transpose or copy happens around
 * attention. Padding is handled by kv_lens alone; padded rows are zeroed by every pass, so
 * whatever an implementation does with them stays finite, and they never reach the pooling.
 *
 * Weights are used in place from the safetensors mapping (fp32, [out, in]: the GEMM takes them
 * transposed) on the CPU, or copied once to a device with its own memory; Q/K/V are concatenated
 * once into one [3H, H] matrix (encoder_load.c), and a device may prepare each GEMM's weight in
 * its own layout (the CPU: oneDNN's blocked copy). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "model/encoder_internal.h"
#include "attn/internal_dispatch.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "device/internal_device.h"

/* ------------------------------------------------------------------ tokenizing */

/* sentence-transformers lower-cases the text before tokenizing when do_lower_case is set
 * (Python's str.lower: we use the simple Unicode lower-case mapping of utf8proc). Bytes that are
 * not valid UTF-8 are passed through for the tokenizer to judge. */
static int tokenize_one(const modattn_model *m, const char *text, size_t len, int32_t *ids,
                        size_t max, size_t *n) {
    if (!m->cfg.lower_case) return modattn_tokenize(m->tok, text, len, ids, max, n);
    /* a lower-case code point never takes more than twice the bytes of its upper-case one */
    if (len > (SIZE_MAX - 8) / 2) return modattn__error(MODATTN_EINVAL, "text too long");
    char *low = modattn__malloc(2 * len + 8, MODATTN_MEM_OTHER);
    if (!low) return modattn__mem_last_status();
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)text + i,
                                              (utf8proc_ssize_t)(len - i), &cp);
        if (k <= 0) {
            low[o++] = text[i++];
            continue;
        }
        o += (size_t)utf8proc_encode_char(utf8proc_tolower(cp), (utf8proc_uint8_t *)low + o);
        i += (size_t)k;
    }
    int st = modattn_tokenize(m->tok, low, o, ids, max, n);
    modattn_free(low);
    return st;
}

/* ------------------------------------------------------------------ batching */

typedef struct sort_key {
    int32_t len;
    size_t idx;
} sort_key;

static int cmp_len_desc(const void *a, const void *b) {
    const sort_key *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* End of the batch that starts at keys[s] (sorted longest first): rows are added while the
 * padded batch stays within the token budget and the row is at least 16/17 of the batch's
 * longest, so no row is padded by more than 1/16 of its length. With the GEMM plans a batch runs
 * as fast in 64-row blocks as in 1024-row ones, so small batches cost little and padding is pure
 * waste: on bench/corpus_sentences.txt the budget alone padded 88,988 tokens to 101,279 (+13.8%);
 * with this rule 91,988 (+3.4%) in 60 batches. Now used without plans (OpenBLAS) only, with the
 * budget alone (tight = false); with plans, plan_batches below. */
static size_t batch_end(const sort_key *keys, size_t n, size_t s, size_t budget, bool tight) {
    const size_t S = (size_t)keys[s].len;
    size_t e = s + 1;
    while (e < n && (e - s + 1) * S <= budget && (!tight || (size_t)keys[e].len * 17 >= S * 16))
        e++;
    return e;
}

/* With prepared weights the GEMMs run in whole row blocks (blk rows, 64 on the CPU), a block per
 * thread at a time, so a batch of B rows padded to S costs about ceil(ceil(B*S / blk) / threads)
 * rounds whatever its rows hold: one short text alone costs a whole round, as much as 128 rows on
 * two threads; each batch also costs some fixed work (counted as 4 rows). Greedy batching (batch_end) leaves small calls full of such rounds (a request of 32
 * sentences of 10-80 tokens became a dozen one-block batches). This partitions the sorted texts
 * (longest first) into the batches of least total cost instead: rounds first, then padded rows,
 * under the token budget, by dynamic programming from the end (next[i]: where the batch starting
 * at i ends; batches of at most 512 texts). Which texts share a batch never changes a vector (bit
 * for bit: modattn/model.h). */
static int plan_batches(const sort_key *keys, size_t n, size_t budget, int64_t blk, int threads, double fixed,
                        size_t *next) {
    double *best = modattn__malloc((n + 1) * sizeof *best, MODATTN_MEM_OTHER);
    if (!best) return modattn__mem_last_status();
    if (blk < 1) blk = 1;
    if (threads < 1) threads = 1;
    best[n] = 0;
    for (size_t i = n; i-- > 0;) {
        const size_t S = (size_t)keys[i].len;
        best[i] = -1;
        /* at most 512 texts a batch: 1024 rows at least, 16 blocks, as fast per row as any larger
         * batch, and the plan stays O(512 n) */
        for (size_t e = i + 1; e <= n && e - i <= 512 && (e == i + 1 || (e - i) * S <= budget); e++) {
            const size_t rows = (e - i) * S;
            const size_t blocks = (rows + (size_t)blk - 1) / (size_t)blk;
            const size_t rounds = (blocks + (size_t)threads - 1) / (size_t)threads;
            /* rounds, then padded rows, then batches: each costs some fixed work, `fixed` rows
             * (see the caller), so of equal plans the one of fewer, larger batches */
            const double c = (double)rounds * 1e9 + (double)rows + fixed + best[e];
            if (best[i] < 0 || c < best[i]) {
                best[i] = c;
                next[i] = e;
            }
        }
    }
    modattn_free(best);
    return 0;
}

/* n inputs, input i = ids[off[i] .. off[i+1]-1]; writes out[i*dim ..]. */
static int embed_packed(modattn_model *m, const modattn__fwd_exec *x, const int32_t *ids, const size_t *off,
                        size_t n, float *out) {
    const modattn__model_config *c = &m->cfg;
    int st = 0;
    sort_key *keys = modattn__calloc(n, sizeof *keys, MODATTN_MEM_OTHER);
    if (!keys) return modattn__mem_last_status();
    for (size_t i = 0; i < n; i++) keys[i] = (sort_key){(int32_t)(off[i + 1] - off[i]), i};
    qsort(keys, n, sizeof *keys, cmp_len_desc);

    /* batches: [start, end) in sorted order; the first row is the longest */
    const size_t budget = m->batch_tokens;
    const bool tight = modattn__dev_model_prepared(m->dm);
    size_t *next = modattn__malloc((n + 1) * sizeof *next, MODATTN_MEM_OTHER);
    if (!next) {
        modattn_free(keys);
        return modattn__mem_last_status();
    }
    if (tight) {
        /* A batch's fixed work, in rows: an attention call and the pool's hand-offs per layer,
         * about 4 rows, where the plans hold packed weights. Where they read the weights in place
         * (oneDNN's jit GEMM, AVX2) every GEMM call packs its weight again, about 15 rows' work
         * (768-row calls at 86-88 GFLOP per CPU-s, 64-row ones at 71), and a batch makes at
         * least one call per thread of each layer's 4 GEMMs: 100 rows. Measured (CPU s, this
         * host): Qwen3-0.6B-shaped on 32 texts of 112-144 tokens 8 batches -> 2, 52.2-52.6 ->
         * 50.5-51.0; MiniLM on 1,000 sentences 86 batches -> 49, 14.2-16.0 -> 13.5-14.9, padding
         * 1.0% -> 2.3%. */
        const double fixed = modattn__dev_model_plans_borrow(m->dm) ? 100.0 : 4.0;
        st = plan_batches(keys, n, budget, modattn__device_row_block(m->dev), modattn__pool_threads(x->pool), fixed,
                          next);
        if (st) {
            modattn_free(next);
            modattn_free(keys);
            return st;
        }
    } else {
        for (size_t s = 0; s < n;) s = next[s] = batch_end(keys, n, s, budget, false);
    }
    size_t max_T = 0, max_B = 0;
    for (size_t s = 0; s < n;) {
        const size_t S = (size_t)keys[s].len;
        const size_t e = next[s];
        if ((e - s) * S > max_T) max_T = (e - s) * S;
        if (e - s > max_B) max_B = e - s;
        s = e;
    }
    modattn__dev_arena *da = NULL;
    if ((st = modattn__dev_arena_create(m->dm, (int64_t)max_T, (int64_t)max_B, &da))) {
        modattn_free(next);
        modattn_free(keys);
        return st;
    }
    int32_t *bids = modattn__calloc(max_T, sizeof(int32_t), MODATTN_MEM_ACTIVATIONS);
    int32_t *blens = modattn__calloc(max_B, sizeof(int32_t), MODATTN_MEM_ACTIVATIONS);
    float **outs = modattn__calloc(max_B, sizeof(float *), MODATTN_MEM_ACTIVATIONS);
    size_t *inputs = modattn__calloc(max_B, sizeof(size_t), MODATTN_MEM_ACTIVATIONS);
    modattn__fwd_exec xb = *x; /* with a token head: which input each batch row is */
    xb.inputs = inputs;
    if (!bids || !blens || !outs || !inputs) {
        st = modattn__mem_last_status();
        goto done;
    }
    for (size_t s = 0; s < n && st == 0;) {
        const size_t S = (size_t)keys[s].len;
        const size_t e = next[s];
        const size_t B = e - s;
        for (size_t b = 0; b < B; b++) {
            const size_t i = keys[s + b].idx;
            const size_t len = (size_t)keys[s + b].len;
            memcpy(bids + b * S, ids + off[i], len * sizeof(int32_t));
            for (size_t k = len; k < S; k++) bids[b * S + k] = c->pad_id;
            blens[b] = (int32_t)len;
            outs[b] = out ? out + i * c->dim : NULL;
            inputs[b] = i;
        }
        uint64_t tb = modattn__trace_begin(); /* span: one batch, padded to its longest text */
        if (m->device_serial) pthread_mutex_lock(&m->device_mu);
        st = modattn__dev_forward(m->dm, &xb, da, (int64_t)B, (int64_t)S, bids, blens, outs, m->name);
        if (m->device_serial) pthread_mutex_unlock(&m->device_mu);
        if (tb) {
            char shape[64];
            snprintf(shape, sizeof shape, "B=%zu S=%zu", B, S);
            modattn__trace_end(tb, "batch", "encoder", shape, 0, 0);
        }
        s = e;
    }
done:
    modattn__dev_arena_free(da);
    modattn_free(next);
    modattn_free(inputs);
    modattn_free(outs);
    modattn_free(blens);
    modattn_free(bids);
    modattn_free(keys);
    return st;
}

static int check_ids(const modattn_model *m, const int32_t *ids, size_t count, size_t which) {
    if (count < 1 || count > m->cfg.max_tokens)
        return modattn__error(MODATTN_EINVAL, "input %zu: %zu tokens, expected 1 to %zu", which,
                             count, m->cfg.max_tokens);
    for (size_t k = 0; k < count; k++)
        if (ids[k] < 0 || ids[k] >= m->cfg.vocab)
            return modattn__error(MODATTN_EINVAL, "input %zu: token %zu has id %d, outside the "
                                 "vocabulary [0, %d)", which, k, (int)ids[k], m->cfg.vocab);
    return 0;
}

/* The model's own threads and the ctx's workspace (one caller at a time), or a session's. */
static int fwd_exec(modattn_model *m, modattn_session *s, modattn__fwd_exec *x) {
    if (s && modattn__session_ctx(s) != m->ctx)
        return modattn__error(MODATTN_EINVAL, "the session is of another context than the model's");
    x->ctx = m->ctx;
    x->session = s;
    x->pool = s ? modattn__session_pool(s) : m->pool;
    x->head = NULL;
    x->inputs = NULL;
    return 0;
}

static int embed_ids(modattn_model *m, modattn_session *sess, const int32_t *const *ids, const size_t *counts,
                     size_t n, float *out) {
    if (n == 0) return 0;
    if (!m || !ids || !counts || !out)
        return modattn__error(MODATTN_EINVAL, "modattn_model_embed_ids: NULL argument");
    modattn__fwd_exec x;
    int xs = fwd_exec(m, sess, &x);
    if (xs) return xs;
    if (n > SIZE_MAX / 64)
        return modattn__error(MODATTN_EINVAL, "modattn_model_embed_ids: n = %zu", n);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int st = check_ids(m, ids[i], counts[i], i);
        if (st) return st;
        total += counts[i];
    }
    int32_t *flat = modattn__calloc(total, sizeof(int32_t), MODATTN_MEM_OTHER);
    size_t *off = modattn__calloc(n + 1, sizeof(size_t), MODATTN_MEM_OTHER);
    int st = 0;
    if (!flat || !off) {
        st = modattn__mem_last_status();
    } else {
        off[0] = 0;
        for (size_t i = 0; i < n; i++) {
            memcpy(flat + off[i], ids[i], counts[i] * sizeof(int32_t));
            off[i + 1] = off[i] + counts[i];
        }
        st = embed_packed(m, &x, flat, off, n, out);
    }
    modattn_free(off);
    modattn_free(flat);
    return st;
}

int modattn__model_embed_tokens(modattn_model *m, modattn_session *s, const int32_t *const *ids, const size_t *counts,
                                size_t n, const modattn__token_head *head) {
    if (n == 0) return 0;
    if (!m || !ids || !counts || !head || !head->row)
        return modattn__error(MODATTN_EINVAL, "modattn__model_embed_tokens: NULL argument");
    modattn__fwd_exec x;
    int st = fwd_exec(m, s, &x);
    if (st) return st;
    x.head = head;
    if (n > SIZE_MAX / 64) return modattn__error(MODATTN_EINVAL, "modattn__model_embed_tokens: n = %zu", n);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if ((st = check_ids(m, ids[i], counts[i], i))) return st;
        total += counts[i];
    }
    int32_t *flat = modattn__calloc(total, sizeof(int32_t), MODATTN_MEM_OTHER);
    size_t *off = modattn__calloc(n + 1, sizeof(size_t), MODATTN_MEM_OTHER);
    if (!flat || !off) {
        st = modattn__mem_last_status();
    } else {
        for (size_t i = 0; i < n; i++) {
            memcpy(flat + off[i], ids[i], counts[i] * sizeof(int32_t));
            off[i + 1] = off[i] + counts[i];
        }
        st = embed_packed(m, &x, flat, off, n, NULL);
    }
    modattn_free(off);
    modattn_free(flat);
    return st;
}

int modattn_model_embed_ids(modattn_model *m, const int32_t *const *ids, const size_t *counts, size_t n,
                            float *out) {
    return embed_ids(m, NULL, ids, counts, n, out);
}

int modattn_model_embed_ids_with(modattn_model *m, modattn_session *s, const int32_t *const *ids,
                                 const size_t *counts, size_t n, float *out) {
    if (!s) return modattn__error(MODATTN_EINVAL, "modattn_model_embed_ids_with: session is NULL");
    return embed_ids(m, s, ids, counts, n, out);
}

int modattn_model_tokenize(const modattn_model *m, const char *text, size_t len, int32_t *ids,
                           size_t max, size_t *n) {
    return modattn_model_tokenize_ex(m, text, len, ids, max, n, NULL);
}

int modattn_model_tokenize_ex(const modattn_model *m, const char *text, size_t len, int32_t *ids, size_t max,
                              size_t *n, bool *truncated) {
    if (!m || !ids || !n || (!text && len))
        return modattn__error(MODATTN_EINVAL, "modattn_model_tokenize: NULL argument");
    size_t lim = max < m->cfg.max_tokens ? max : m->cfg.max_tokens;
    if (!truncated) return tokenize_one(m, text ? text : "", len, ids, lim, n);
    /* one id more than fits says whether the text was cut; then the cut ids themselves (the
     * specials at the end move in) */
    int32_t *more = modattn__malloc((lim + 1) * sizeof *more, MODATTN_MEM_OTHER);
    if (!more) return modattn__mem_last_status();
    size_t k = 0;
    int st = tokenize_one(m, text ? text : "", len, more, lim + 1, &k);
    *truncated = st == 0 && k > lim;
    if (st == 0 && !*truncated) {
        memcpy(ids, more, k * sizeof *ids);
        *n = k;
    }
    modattn_free(more);
    if (st == 0 && *truncated) st = tokenize_one(m, text ? text : "", len, ids, lim, n);
    return st;
}

static int embed_texts(modattn_model *m, modattn_session *sess, const char *const *texts, const size_t *lens,
                       size_t n, float *out, int32_t *ntokens_out) {
    if (n == 0) return 0;
    if (!m || !texts || !out)
        return modattn__error(MODATTN_EINVAL, "modattn_model_embed: NULL argument");
    modattn__fwd_exec x;
    int xs = fwd_exec(m, sess, &x);
    if (xs) return xs;
    const size_t maxt = m->cfg.max_tokens;
    int st = 0;
    if (n > SIZE_MAX / 64) return modattn__error(MODATTN_EINVAL, "modattn_model_embed: n = %zu", n);
    size_t *off = modattn__calloc(n + 1, sizeof(size_t), MODATTN_MEM_OTHER);
    int32_t *flat = NULL;
    size_t cap = 0;
    if (!off) return modattn__mem_last_status();
    off[0] = 0;
    uint64_t tr = modattn__trace_begin(); /* span: tokenising the whole call */
    for (size_t i = 0; i < n; i++) {
        if (off[i] + maxt > cap) {
            size_t ncap = cap ? cap * 2 : 4096;
            while (ncap < off[i] + maxt) ncap *= 2;
            int32_t *nf = modattn__realloc(flat, ncap * sizeof(int32_t), MODATTN_MEM_OTHER);
            if (!nf) {
                st = modattn__mem_last_status();
                goto done;
            }
            flat = nf;
            cap = ncap;
        }
        if (!texts[i] && lens && lens[i]) {
            st = modattn__error(MODATTN_EINVAL, "input %zu: NULL text of %zu bytes", i, lens[i]);
            goto done;
        }
        const char *t = texts[i] ? texts[i] : "";
        const size_t tl = lens && texts[i] ? lens[i] : strlen(t);
        size_t cnt = 0;
        st = tokenize_one(m, t, tl, flat + off[i], maxt, &cnt);
        if (st) {
            st = modattn__error_prefix(st, "tokenizing input %zu", i);
            goto done;
        }
        if ((st = check_ids(m, flat + off[i], cnt, i))) goto done;
        off[i + 1] = off[i] + cnt;
        if (ntokens_out) ntokens_out[i] = (int32_t)cnt;
    }
    if (tr) {
        char shape[64];
        snprintf(shape, sizeof shape, "texts=%zu tokens=%zu", n, off[n]);
        modattn__trace_end(tr, "tokenize", "wordpiece", shape, 0, 0);
    }
    st = embed_packed(m, &x, flat, off, n, out);
done:
    modattn_free(flat);
    modattn_free(off);
    return st;
}

int modattn_model_embed(modattn_model *m, const char *const *texts, const size_t *lens, size_t n, float *out,
                        int32_t *ntokens_out) {
    return embed_texts(m, NULL, texts, lens, n, out, ntokens_out);
}

int modattn_model_embed_with(modattn_model *m, modattn_session *s, const char *const *texts, const size_t *lens,
                             size_t n, float *out, int32_t *ntokens_out) {
    if (!s) return modattn__error(MODATTN_EINVAL, "modattn_model_embed_with: session is NULL");
    return embed_texts(m, s, texts, lens, n, out, ntokens_out);
}
