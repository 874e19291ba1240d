/* tests/model/test_encoder.c — the encoder on small synthetic BERT models written by the test
 * itself (random weights, a tiny WordPiece vocabulary), against a naive fp64 forward pass:
 * every pooling mode, both weight-name layouts ("..." and "bert...."), tanh GELU, tensors that
 * are not 4-byte aligned in the file, every CPU attention implementation. Then the refusals: a
 * tensor missing, of the wrong shape or dtype, a vocabulary larger than the embedding table,
 * bad ids; allocation failures at every step of loading and embedding; a memory budget. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "modattn/modattn.h"
#include "modattn/model.h"
#include "core/internal_core.h"
#include "test_util.h"

enum { H = 32, NH = 4, DH = H / NH, I = 64, L = 2, P = 24, TV = 2, V = 20, MAXSEQ = 16 };

static char g_dir[64];
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

static float frand(float scale) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return scale * ((float)(g_rng >> 40) / (float)(1u << 24) * 2.0f - 1.0f);
}

/* ---------------------------------------------------------------- the synthetic model */

typedef struct weights {
    float word[V * H], pos[P * H], type[TV * H], emb_g[H], emb_b[H];
    struct {
        float wq[H * H], wk[H * H], wv[H * H], bq[H], bk[H], bv[H];
        float wo[H * H], bo[H], g1[H], b1n[H];
        float w1[I * H], b1[I], w2[H * I], b2[H], g2[H], b2n[H];
    } l[L];
} weights;

static void init_weights(weights *w) {
    for (int k = 0; k < V * H; k++) w->word[k] = frand(1.0f);
    for (int k = 0; k < P * H; k++) w->pos[k] = frand(0.5f);
    for (int k = 0; k < TV * H; k++) w->type[k] = frand(0.5f);
    for (int k = 0; k < H; k++) w->emb_g[k] = 1.0f + frand(0.2f), w->emb_b[k] = frand(0.1f);
    for (int l = 0; l < L; l++) {
        float *mats[] = {w->l[l].wq, w->l[l].wk, w->l[l].wv, w->l[l].wo};
        for (int m = 0; m < 4; m++)
            for (int k = 0; k < H * H; k++) mats[m][k] = frand(0.35f);
        for (int k = 0; k < I * H; k++) w->l[l].w1[k] = frand(0.3f), w->l[l].w2[k] = frand(0.2f);
        for (int k = 0; k < H; k++) {
            w->l[l].bq[k] = frand(0.1f), w->l[l].bk[k] = frand(0.1f), w->l[l].bv[k] = frand(0.1f);
            w->l[l].bo[k] = frand(0.1f), w->l[l].b2[k] = frand(0.1f);
            w->l[l].g1[k] = 1.0f + frand(0.2f), w->l[l].b1n[k] = frand(0.1f);
            w->l[l].g2[k] = 1.0f + frand(0.2f), w->l[l].b2n[k] = frand(0.1f);
        }
        for (int k = 0; k < I; k++) w->l[l].b1[k] = frand(0.1f);
    }
}

typedef struct tensor_out {
    char name[128];
    const char *dtype;
    int ndim;
    int64_t shape[2];
    const void *data;
    size_t bytes;
} tensor_out;

/* Options of a synthetic model directory. */
typedef struct spec {
    const char *prefix;     /* "" or "bert." */
    const char *act;        /* hidden_act */
    const char *pooling;    /* the pooling config's mode keys set to true, comma-separated */
    bool normalize;
    bool unaligned;         /* pad the header so tensor data starts at an odd offset */
    const char *break_name; /* tensor to break (suffix after the prefix) */
    int break_kind;         /* 1 wrong shape, 2 wrong dtype (F16), 3 missing */
    int tok_vocab;          /* tokens in tokenizer.json's vocabulary (<= V unless testing) */
    bool cased_tokenizer;   /* tokenizer.json's BertNormalizer does not lowercase */
    bool do_lower_case;     /* sentence_bert_config.json */
} spec;

static void put_text(const char *name, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void add(tensor_out *t, int *n, const spec *s, const char *name, const float *data,
                int64_t d0, int64_t d1) {
    tensor_out *o = &t[(*n)++];
    snprintf(o->name, sizeof o->name, "%s%s", s->prefix, name);
    o->dtype = "F32";
    o->ndim = d1 ? 2 : 1;
    o->shape[0] = d0;
    o->shape[1] = d1;
    o->data = data;
    o->bytes = (size_t)(d0 * (d1 ? d1 : 1)) * sizeof(float);
    if (s->break_name && strcmp(name, s->break_name) == 0) {
        if (s->break_kind == 1) o->shape[0] = d0 - 1, o->bytes = (size_t)((d0 - 1) * (d1 ? d1 : 1)) * 4;
        if (s->break_kind == 2) o->dtype = "F16", o->bytes /= 2;
        if (s->break_kind == 3) (*n)--;
    }
}

static void write_safetensors(const weights *w, const spec *s) {
    static tensor_out t[8 + 16 * L];
    int n = 0;
    add(t, &n, s, "embeddings.word_embeddings.weight", w->word, V, H);
    add(t, &n, s, "embeddings.position_embeddings.weight", w->pos, P, H);
    add(t, &n, s, "embeddings.token_type_embeddings.weight", w->type, TV, H);
    add(t, &n, s, "embeddings.LayerNorm.weight", w->emb_g, H, 0);
    add(t, &n, s, "embeddings.LayerNorm.bias", w->emb_b, H, 0);
    for (int l = 0; l < L; l++) {
        char nm[128];
#define ADD(suffix, field, d0, d1)                                              \
    snprintf(nm, sizeof nm, "encoder.layer.%d.%s", l, suffix);                 \
    add(t, &n, s, nm, w->l[l].field, d0, d1)
        ADD("attention.self.query.weight", wq, H, H);
        ADD("attention.self.key.weight", wk, H, H);
        ADD("attention.self.value.weight", wv, H, H);
        ADD("attention.self.query.bias", bq, H, 0);
        ADD("attention.self.key.bias", bk, H, 0);
        ADD("attention.self.value.bias", bv, H, 0);
        ADD("attention.output.dense.weight", wo, H, H);
        ADD("attention.output.dense.bias", bo, H, 0);
        ADD("attention.output.LayerNorm.weight", g1, H, 0);
        ADD("attention.output.LayerNorm.bias", b1n, H, 0);
        ADD("intermediate.dense.weight", w1, I, H);
        ADD("intermediate.dense.bias", b1, I, 0);
        ADD("output.dense.weight", w2, H, I);
        ADD("output.dense.bias", b2, H, 0);
        ADD("output.LayerNorm.weight", g2, H, 0);
        ADD("output.LayerNorm.bias", b2n, H, 0);
#undef ADD
    }
    json_t *hdr = json_object();
    json_t *meta = json_object();
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(hdr, "__metadata__", meta);
    size_t off = 0;
    for (int k = 0; k < n; k++) {
        json_t *e = json_object();
        json_object_set_new(e, "dtype", json_string(t[k].dtype));
        json_t *sh = json_array();
        for (int d = 0; d < t[k].ndim; d++) json_array_append_new(sh, json_integer(t[k].shape[d]));
        json_object_set_new(e, "shape", sh);
        json_t *of = json_array();
        json_array_append_new(of, json_integer((json_int_t)off));
        json_array_append_new(of, json_integer((json_int_t)(off + t[k].bytes)));
        json_object_set_new(e, "data_offsets", of);
        json_object_set_new(hdr, t[k].name, e);
        off += t[k].bytes;
    }
    char *text = json_dumps(hdr, JSON_COMPACT);
    json_decref(hdr);
    size_t hl = strlen(text);
    /* pad with spaces: data at a multiple of 8, or at an odd offset */
    size_t want = (hl + 8 + 7) / 8 * 8 - 8 + (s->unaligned ? 1 : 0);
    char path[256];
    snprintf(path, sizeof path, "%s/model.safetensors", g_dir);
    FILE *f = fopen(path, "wb");
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)want >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(text, 1, hl, f);
    for (size_t i = hl; i < want; i++) fputc(' ', f);
    for (int k = 0; k < n; k++) fwrite(t[k].data, 1, t[k].bytes, f);
    fclose(f);
    modattn__json_free(text); /* from json_dumps */
}

static const char *k_vocab[V] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "the",
                                 "##s", "a", "b", "c", "d", "e", "f", "g", "h", "cat", "dog",
                                 "!", "?"};

static void write_dir(const weights *w, const spec *s) {
    char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"model_type\":\"bert\",\"hidden_size\":%d,\"num_hidden_layers\":%d,"
             "\"num_attention_heads\":%d,\"intermediate_size\":%d,\"hidden_act\":\"%s\","
             "\"layer_norm_eps\":1e-12,\"max_position_embeddings\":%d,\"type_vocab_size\":%d,"
             "\"vocab_size\":%d,\"pad_token_id\":0}",
             H, L, NH, I, s->act, P, TV, V);
    put_text("config.json", buf);
    snprintf(buf, sizeof buf,
             "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models."
             "Transformer\"},{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":"
             "\"sentence_transformers.models.Pooling\"}%s]",
             s->normalize ? ",{\"idx\":2,\"name\":\"2\",\"path\":\"2_Normalize\",\"type\":"
                            "\"sentence_transformers.models.Normalize\"}"
                          : "");
    put_text("modules.json", buf);
    snprintf(buf, sizeof buf, "{\"max_seq_length\":%d,\"do_lower_case\":%s}", MAXSEQ,
             s->do_lower_case ? "true" : "false");
    put_text("sentence_bert_config.json", buf);
    int o = snprintf(buf, sizeof buf, "{\"word_embedding_dimension\":%d", H);
    char modes[256];
    snprintf(modes, sizeof modes, "%s", s->pooling);
    for (char *tok = strtok(modes, ","); tok; tok = strtok(NULL, ","))
        o += snprintf(buf + o, sizeof buf - (size_t)o, ",\"pooling_mode_%s\":true", tok);
    snprintf(buf + o, sizeof buf - (size_t)o, "}");
    put_text("1_Pooling/config.json", buf);
    /* tokenizer.json: BertNormalizer + BertPreTokenizer + WordPiece + [CLS] $A [SEP] */
    o = snprintf(buf, sizeof buf,
                 "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":["
                 "{\"id\":0,\"content\":\"[PAD]\",\"single_word\":false,\"lstrip\":false,"
                 "\"rstrip\":false,\"normalized\":false,\"special\":true}],"
                 "\"normalizer\":{\"type\":\"BertNormalizer\",\"clean_text\":true,"
                 "\"handle_chinese_chars\":true,\"strip_accents\":null,\"lowercase\":%s},"
                 "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
                 "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":["
                 "{\"SpecialToken\":{\"id\":\"[CLS]\",\"type_id\":0}},"
                 "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},"
                 "{\"SpecialToken\":{\"id\":\"[SEP]\",\"type_id\":0}}],\"pair\":["
                 "{\"SpecialToken\":{\"id\":\"[CLS]\",\"type_id\":0}},"
                 "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},"
                 "{\"SpecialToken\":{\"id\":\"[SEP]\",\"type_id\":0}},"
                 "{\"Sequence\":{\"id\":\"B\",\"type_id\":1}},"
                 "{\"SpecialToken\":{\"id\":\"[SEP]\",\"type_id\":1}}],"
                 "\"special_tokens\":{\"[CLS]\":{\"id\":\"[CLS]\",\"ids\":[2],\"tokens\":[\"[CLS]\"]},"
                 "\"[SEP]\":{\"id\":\"[SEP]\",\"ids\":[3],\"tokens\":[\"[SEP]\"]}}},"
                 "\"decoder\":null,\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\","
                 "\"continuing_subword_prefix\":\"##\",\"max_input_chars_per_word\":100,"
                 "\"vocab\":{",
                 s->cased_tokenizer ? "false" : "true");
    for (int k = 0; k < s->tok_vocab; k++) {
        if (k < V)
            o += snprintf(buf + o, sizeof buf - (size_t)o, "%s\"%s\":%d", k ? "," : "", k_vocab[k], k);
        else
            o += snprintf(buf + o, sizeof buf - (size_t)o, ",\"extra%d\":%d", k, k);
    }
    snprintf(buf + o, sizeof buf - (size_t)o, "}}}");
    put_text("tokenizer.json", buf);
    write_safetensors(w, s);
}

/* ---------------------------------------------------------------- the fp64 oracle */

static void ln64(double *x, const float *g, const float *b) {
    double m = 0, v = 0;
    for (int k = 0; k < H; k++) m += x[k];
    m /= H;
    for (int k = 0; k < H; k++) v += (x[k] - m) * (x[k] - m);
    v /= H;
    for (int k = 0; k < H; k++) x[k] = (x[k] - m) / sqrt(v + 1e-12) * g[k] + b[k];
}

static double act64(double x, const char *act) {
    if (strcmp(act, "gelu") == 0) return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    if (strcmp(act, "relu") == 0) return x > 0 ? x : 0;
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static void linear64(const double *x, const float *w, const float *b, int out, int in, double *y) {
    for (int o = 0; o < out; o++) {
        double s = b[o];
        for (int k = 0; k < in; k++) s += x[k] * w[o * in + k];
        y[o] = s;
    }
}

/* true if the comma-separated list has exactly `mode` */
static bool has_mode(const char *list, const char *mode) {
    size_t n = strlen(mode);
    for (const char *p = list; (p = strstr(p, mode)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return true;
    return false;
}

/* Reference embedding of ids[0..n-1]; returns the dimension written. */
static int oracle(const weights *w, const spec *s, const int32_t *ids, int n, double *out) {
    static double x[MAXSEQ][H], q[MAXSEQ][H], k[MAXSEQ][H], v[MAXSEQ][H], c[MAXSEQ][H];
    static double t[MAXSEQ][I];
    for (int i = 0; i < n; i++) {
        for (int d = 0; d < H; d++)
            x[i][d] = (double)w->word[ids[i] * H + d] + w->pos[i * H + d] + w->type[d];
        ln64(x[i], w->emb_g, w->emb_b);
    }
    for (int l = 0; l < L; l++) {
        for (int i = 0; i < n; i++) {
            linear64(x[i], w->l[l].wq, w->l[l].bq, H, H, q[i]);
            linear64(x[i], w->l[l].wk, w->l[l].bk, H, H, k[i]);
            linear64(x[i], w->l[l].wv, w->l[l].bv, H, H, v[i]);
        }
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < n; i++) {
                double sc[MAXSEQ], mx = -1e300, sum = 0;
                for (int j = 0; j < n; j++) {
                    double d = 0;
                    for (int e = 0; e < DH; e++) d += q[i][h * DH + e] * k[j][h * DH + e];
                    sc[j] = d / sqrt((double)DH);
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int j = 0; j < n; j++) sum += sc[j] = exp(sc[j] - mx);
                for (int e = 0; e < DH; e++) {
                    double a = 0;
                    for (int j = 0; j < n; j++) a += sc[j] / sum * v[j][h * DH + e];
                    c[i][h * DH + e] = a;
                }
            }
        for (int i = 0; i < n; i++) {
            double y[H];
            linear64(c[i], w->l[l].wo, w->l[l].bo, H, H, y);
            for (int d = 0; d < H; d++) x[i][d] += y[d];
            ln64(x[i], w->l[l].g1, w->l[l].b1n);
            linear64(x[i], w->l[l].w1, w->l[l].b1, I, H, t[i]);
            for (int d = 0; d < I; d++) t[i][d] = act64(t[i][d], s->act);
            linear64(t[i], w->l[l].w2, w->l[l].b2, H, I, y);
            for (int d = 0; d < H; d++) x[i][d] += y[d];
            ln64(x[i], w->l[l].g2, w->l[l].b2n);
        }
    }
    int dim = 0;
    bool cls = has_mode(s->pooling, "cls_token"), mx = has_mode(s->pooling, "max_tokens");
    bool mean = has_mode(s->pooling, "mean_tokens");
    bool msl = has_mode(s->pooling, "mean_sqrt_len_tokens");
    bool wm = has_mode(s->pooling, "weightedmean_tokens"), last = has_mode(s->pooling, "lasttoken");
    if (cls)
        for (int d = 0; d < H; d++) out[dim++] = x[0][d];
    if (mx)
        for (int d = 0; d < H; d++) {
            double m = -1e300;
            for (int i = 0; i < n; i++) m = x[i][d] > m ? x[i][d] : m;
            out[dim++] = m;
        }
    double sum[H], wsum[H];
    for (int d = 0; d < H; d++) {
        sum[d] = wsum[d] = 0;
        for (int i = 0; i < n; i++) sum[d] += x[i][d], wsum[d] += (i + 1) * x[i][d];
    }
    if (mean)
        for (int d = 0; d < H; d++) out[dim++] = sum[d] / n;
    if (msl)
        for (int d = 0; d < H; d++) out[dim++] = sum[d] / sqrt((double)n);
    if (wm)
        for (int d = 0; d < H; d++) out[dim++] = wsum[d] / (n * (n + 1) / 2.0);
    if (last)
        for (int d = 0; d < H; d++) out[dim++] = x[n - 1][d];
    if (s->normalize) {
        double nn = 0;
        for (int d = 0; d < dim; d++) nn += out[d] * out[d];
        nn = sqrt(nn);
        for (int d = 0; d < dim; d++) out[d] /= nn;
    }
    return dim;
}

/* ---------------------------------------------------------------- a third-party implementation */

/* A naive attention registered from outside (as a plugin would be): the encoder must give the
 * same embeddings through it, and it checks that padded keys and values are zero. */
static double g_pad_max;  /* largest |K| or |V| seen in a padded position */
static long g_probe_calls;

static const float *at(const modattn_tensor *t, int64_t b, int64_t h, int64_t i, int64_t d) {
    return (const float *)t->data + b * t->stride[0] + h * t->stride[1] + i * t->stride[2] +
           d * t->stride[3];
}

static bool probe_supports(void *ctx, const modattn_attn_desc *d, char *reason, size_t len) {
    (void)ctx;
    if (d->dtype != MODATTN_DTYPE_F32 || d->has_mask || d->has_lse || d->causal ||
        d->Hq != d->Hkv) {
        snprintf(reason, len, "probe: fp32, no mask, no lse, not causal, Hq == Hkv only");
        return false;
    }
    return true;
}

static int probe_run(void *ctx, const modattn_attn_desc *d, const modattn_attn_call *c, void *ws,
                     size_t wsb, const modattn_exec *ex, char *reason, size_t len) {
    (void)ctx, (void)ws, (void)wsb, (void)ex, (void)reason, (void)len;
    g_probe_calls++;
    for (int64_t b = 0; b < d->B; b++) {
        const int64_t n = c->kv_lens ? c->kv_lens[b] : d->Sk;
        for (int64_t h = 0; h < d->Hq; h++) {
            for (int64_t j = n; j < d->Sk; j++)
                for (int64_t e = 0; e < d->D; e++) {
                    double x = fabs(*at(&c->k, b, h, j, e)) + fabs(*at(&c->v, b, h, j, e));
                    if (!(x <= g_pad_max)) g_pad_max = x; /* NaN too */
                }
            for (int64_t i = 0; i < d->Sq; i++) {
                double sc[64], mx = -1e300, sum = 0;
                for (int64_t j = 0; j < n; j++) {
                    double s = 0;
                    for (int64_t e = 0; e < d->D; e++)
                        s += (double)*at(&c->q, b, h, i, e) * *at(&c->k, b, h, j, e);
                    sc[j] = s * d->scale;
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int64_t j = 0; j < n; j++) sum += sc[j] = exp(sc[j] - mx);
                for (int64_t e = 0; e < d->Dv; e++) {
                    double o = 0;
                    for (int64_t j = 0; j < n; j++) o += sc[j] / sum * *at(&c->v, b, h, j, e);
                    *(float *)at(&c->o, b, h, i, e) = n ? (float)o : 0.0f;
                }
            }
        }
    }
    return 0;
}

static const modattn_attn_impl k_probe = {
    /* .api_version = */ MODATTN_IMPL_API_VERSION,
    /* .name = */ "pad_probe",
    /* .description = */ "test: naive attention that checks padded keys and values",
    /* .device = */ MODATTN_DEVICE_CPU,
    /* .priority = */ -100,
    /* .ctx = */ NULL,
    /* .init = */ NULL,
    /* .shutdown = */ NULL,
    /* .supports = */ probe_supports,
    /* .workspace_bytes = */ NULL,
    /* .run = */ probe_run,
    /* .control = */ NULL,
};

/* ---------------------------------------------------------------- tests */

static spec base_spec(void) {
    spec s;
    memset(&s, 0, sizeof s);
    s.prefix = "";
    s.act = "gelu";
    s.pooling = "mean_tokens";
    s.normalize = true;
    s.tok_vocab = V;
    return s;
}

/* Embed random inputs of every length (one call, mixed lengths) and compare to the oracle, on
 * every available CPU implementation. */
static void check_against_oracle(modattn_ctx *ctx, const weights *w, const spec *s,
                                 const char *label) {
    write_dir(w, s);
    modattn_model *m = NULL;
    int st = modattn_model_load(ctx, g_dir, &m);
    CHECK_MSG(st == 0, "%s: load: %s", label, modattn_last_error());
    if (st) return;
    enum { N = 24 };
    int32_t ids[N][MAXSEQ];
    size_t counts[N];
    const int32_t *rows[N];
    for (int i = 0; i < N; i++) {
        counts[i] = (size_t)(1 + (i * 7) % MAXSEQ);
        for (size_t k = 0; k < counts[i]; k++) ids[i][k] = (int32_t)((i * 13 + k * 5) % V);
        rows[i] = ids[i];
    }
    const size_t dim = modattn_model_dim(m);
    static double ref[N][6 * H];
    int rdim = 0;
    for (int i = 0; i < N; i++) rdim = oracle(w, s, ids[i], (int)counts[i], ref[i]);
    CHECK_MSG((size_t)rdim == dim, "%s: dim %zu, oracle %d", label, dim, rdim);
    float *out = malloc(N * dim * sizeof *out);
    for (size_t x = 0; x < modattn_ctx_impl_count(ctx); x++) {
        modattn_impl_info ii;
        if (modattn_ctx_impl_info(ctx, x, &ii) || ii.device != MODATTN_DEVICE_CPU || !ii.available)
            continue;
        CHECK(modattn_ctx_set_policy(ctx, ii.name) == 0);
        for (int budget = 0; budget < 2; budget++) {
            CHECK(modattn_model_set_batch_tokens(m, budget ? 20 : 8192) == 0);
            st = modattn_model_embed_ids(m, rows, counts, N, out);
            CHECK_MSG(st == 0, "%s/%s: %s", label, ii.name, modattn_last_error());
            double worst = 0;
            for (int i = 0; i < N; i++)
                for (size_t d = 0; d < dim; d++) {
                    double e = fabs(out[i * dim + d] - ref[i][d]) / (1.0 + fabs(ref[i][d]));
                    if (e > worst) worst = e;
                }
            CHECK_MSG(worst < 2e-5, "%s/%s budget %s: max error %g against the fp64 oracle", label,
                      ii.name, budget ? "20" : "8192", worst);
        }
    }
    CHECK(modattn_ctx_set_policy(ctx, "auto") == 0);
    CHECK_MSG(g_pad_max == 0.0, "%s: padded keys/values reach %g (must be zero)", label, g_pad_max);
    /* text in: "Hello, world!" -> [CLS] hello [UNK] world ! [SEP] */
    const char *text = "Hello, world!";
    int32_t got[MAXSEQ];
    size_t n = 0;
    CHECK(modattn_model_tokenize(m, text, strlen(text), got, MAXSEQ, &n) == 0);
    const int32_t want[] = {2, 4, 1, 5, 18, 3};
    CHECK(n == 6 && memcmp(got, want, sizeof want) == 0);
    int32_t nt = 0;
    CHECK(modattn_model_embed(m, &text, NULL, 1, out, &nt) == 0 && nt == 6);
    double r1[6 * H];
    oracle(w, s, want, 6, r1);
    double worst = 0;
    for (size_t d = 0; d < dim; d++) {
        double e = fabs(out[d] - r1[d]) / (1.0 + fabs(r1[d]));
        if (e > worst) worst = e;
    }
    CHECK_MSG(worst < 2e-5, "%s: text: max error %g", label, worst);
    /* truncation: 40 words -> MAXSEQ tokens */
    char longtext[256] = "";
    for (int i = 0; i < 40; i++) strcat(longtext, "cat ");
    const char *lt = longtext;
    CHECK(modattn_model_embed(m, &lt, NULL, 1, out, &nt) == 0 && nt == MAXSEQ);
    free(out);
    modattn_model_free(m);
}

static void test_oracle(modattn_ctx *ctx, const weights *w) {
    spec s = base_spec();
    check_against_oracle(ctx, w, &s, "mean+normalize");
    s.prefix = "bert.";
    s.act = "gelu_new";
    s.pooling = "cls_token,max_tokens,mean_sqrt_len_tokens,weightedmean_tokens,lasttoken";
    s.normalize = false;
    s.unaligned = true;
    check_against_oracle(ctx, w, &s, "bert.+all pooling modes+unaligned");
    s = base_spec();
    s.act = "relu";
    s.pooling = "cls_token";
    check_against_oracle(ctx, w, &s, "cls+relu");
}

static void expect_load_error(modattn_ctx *ctx, const weights *w, const spec *s, int want,
                              const char *n1, const char *n2) {
    write_dir(w, s);
    modattn_model *m = NULL;
    int st = modattn_model_load(ctx, g_dir, &m);
    const char *msg = modattn_last_error();
    CHECK_MSG(st == want && m == NULL && strstr(msg, n1) && (!n2 || strstr(msg, n2)),
              "status %d (want %d), message '%s' (want '%s' and '%s')", st, want, msg, n1,
              n2 ? n2 : "");
    modattn_model_free(m);
}

/* do_lower_case lower-cases the text before a tokenizer that does not. */
static void test_lower_case(modattn_ctx *ctx, const weights *w) {
    spec s = base_spec();
    s.cased_tokenizer = true;
    const char *text = "HELLO World";
    for (int lower = 0; lower < 2; lower++) {
        s.do_lower_case = lower;
        write_dir(w, &s);
        modattn_model *m = NULL;
        CHECK_MSG(modattn_model_load(ctx, g_dir, &m) == 0, "lower=%d: %s", lower,
                  modattn_last_error());
        if (!m) continue;
        CHECK(modattn_model_get_info(m)->lower_case == (bool)lower);
        int32_t ids[MAXSEQ];
        size_t n = 0;
        CHECK(modattn_model_tokenize(m, text, strlen(text), ids, MAXSEQ, &n) == 0 && n == 4);
        CHECK_MSG(lower ? (ids[1] == 4 && ids[2] == 5) : (ids[1] == 1 && ids[2] == 1),
                  "lower=%d: ids %d %d", lower, (int)ids[1], (int)ids[2]);
        modattn_model_free(m);
    }
}

static void test_refusals(modattn_ctx *ctx, const weights *w) {
    spec s = base_spec();
    s.break_name = "encoder.layer.1.attention.self.query.weight";
    s.break_kind = 1;
    expect_load_error(ctx, w, &s, MODATTN_EFORMAT, "model.safetensors",
                      "'encoder.layer.1.attention.self.query.weight': shape [31, 32], expected [32, 32]");
    s.break_name = "embeddings.LayerNorm.bias";
    expect_load_error(ctx, w, &s, MODATTN_EFORMAT, "model.safetensors",
                      "'embeddings.LayerNorm.bias': shape [31], expected [32]");
    s.break_name = "encoder.layer.0.output.dense.weight";
    s.break_kind = 2;
    expect_load_error(ctx, w, &s, MODATTN_EFORMAT, "model.safetensors",
                      "'encoder.layer.0.output.dense.weight': dtype F16, expected F32");
    s.break_kind = 3;
    s.break_name = "encoder.layer.1.output.LayerNorm.bias";
    expect_load_error(ctx, w, &s, MODATTN_EFORMAT, "model.safetensors",
                      "'encoder.layer.1.output.LayerNorm.bias' is missing");
    s.break_name = "embeddings.word_embeddings.weight";
    expect_load_error(ctx, w, &s, MODATTN_EFORMAT, "model.safetensors",
                      "not a BERT checkpoint");
    s = base_spec();
    s.tok_vocab = V + 3;
    expect_load_error(ctx, w, &s, MODATTN_EFORMAT, "tokenizer.json", "vocab_size");
    /* missing weights */
    s = base_spec();
    write_dir(w, &s);
    char path[256];
    snprintf(path, sizeof path, "%s/model.safetensors", g_dir);
    unlink(path);
    modattn_model *m = NULL;
    CHECK_ERR(modattn_model_load(ctx, g_dir, &m), MODATTN_ENOTFOUND, "model.safetensors");
    CHECK_ERR(modattn_model_load(ctx, "/nonexistent/dir", &m), MODATTN_ENOTFOUND, "make model");
    CHECK(modattn_model_load(NULL, g_dir, &m) == MODATTN_EINVAL);

    /* bad inputs to a good model */
    write_dir(w, &s);
    CHECK(modattn_model_load(ctx, g_dir, &m) == 0);
    if (!m) return;
    float out[H];
    int32_t bad_id[] = {2, V, 3};
    const int32_t *rows[] = {bad_id};
    size_t cnt = 3;
    CHECK_ERR(modattn_model_embed_ids(m, rows, &cnt, 1, out), MODATTN_EINVAL, "outside the vocabulary");
    bad_id[1] = -1;
    CHECK_ERR(modattn_model_embed_ids(m, rows, &cnt, 1, out), MODATTN_EINVAL, "outside the vocabulary");
    cnt = 0;
    CHECK_ERR(modattn_model_embed_ids(m, rows, &cnt, 1, out), MODATTN_EINVAL, "0 tokens");
    cnt = MAXSEQ + 1;
    CHECK_ERR(modattn_model_embed_ids(m, rows, &cnt, 1, out), MODATTN_EINVAL, "17 tokens");
    CHECK(modattn_model_set_batch_tokens(m, 0) == MODATTN_EINVAL);
    const char *t = "hello";
    CHECK(modattn_model_embed(m, &t, NULL, 0, out, NULL) == 0);
    CHECK(modattn_model_embed(m, NULL, NULL, 1, out, NULL) == MODATTN_EINVAL);
    const modattn_model_info *info = modattn_model_get_info(m);
    CHECK(info->dim == H && info->layers == L && info->heads == NH && info->max_tokens == MAXSEQ);
    CHECK(strlen(info->weights_hash) == 16 && info->weights_xxh3 != 0);
    CHECK(strncmp(info->name, "modattn_enc_", 12) == 0);
    CHECK(info->device.kind == MODATTN_DEVICE_CPU);
    modattn_model_free(m);
}

/* Fail the Nth allocation of loading, then of embedding, for N = 1, 2, ...: every failure is a
 * clean error, and every byte comes back. */
static void test_alloc_failures(modattn_ctx *ctx, const weights *w) {
    spec s = base_spec();
    write_dir(w, &s);
    modattn_mem_stats s0, s1;
    modattn_mem_get_stats(&s0);
    int ok_at = 0;
    for (int n = 1; n < 2000 && !ok_at; n++) {
        modattn_model *m = NULL;
        modattn__mem_fail_nth((uint64_t)n);
        int st = modattn_model_load(ctx, g_dir, &m);
        modattn__mem_fail_nth(0);
        if (st == 0) ok_at = n;
        else CHECK_MSG(m == NULL && (st == MODATTN_ENOMEM), "load n=%d: %d %s", n, st,
                       modattn_last_error());
        modattn_model_free(m);
        modattn_mem_get_stats(&s1);
        for (int c = 0; c < MODATTN_MEM_CATEGORY_COUNT; c++)
            if (c != MODATTN_MEM_WORKSPACE)
                CHECK_MSG(s1.current[c] == s0.current[c], "load n=%d: %s: %lld bytes leaked", n,
                          modattn_mem_category_name((modattn_mem_category)c),
                          (long long)(s1.current[c] - s0.current[c]));
    }
    CHECK(ok_at > 1);
    modattn_model *m = NULL;
    CHECK(modattn_model_load(ctx, g_dir, &m) == 0);
    if (!m) return;
    const char *texts[] = {"hello world", "the cat", "a b c d e f g h"};
    float out[3 * H];
    modattn_mem_get_stats(&s0);
    ok_at = 0;
    for (int n = 1; n < 2000 && !ok_at; n++) {
        modattn__mem_fail_nth((uint64_t)n);
        int st = modattn_model_embed(m, texts, NULL, 3, out, NULL);
        modattn__mem_fail_nth(0);
        if (st == 0) ok_at = n;
        else CHECK_MSG(st == MODATTN_ENOMEM || st == MODATTN_ERUNTIME,
                       "embed n=%d: %d %s", n, st, modattn_last_error());
        modattn_mem_get_stats(&s1);
        for (int c = 0; c < MODATTN_MEM_CATEGORY_COUNT; c++)
            if (c != MODATTN_MEM_WORKSPACE)
                CHECK_MSG(s1.current[c] == s0.current[c], "embed n=%d: %s: %lld bytes leaked", n,
                          modattn_mem_category_name((modattn_mem_category)c),
                          (long long)(s1.current[c] - s0.current[c]));
    }
    CHECK(ok_at > 1);
    /* a budget below the activations: a clean EBUDGET, then it works again without it */
    modattn_mem_get_stats(&s0);
    modattn_mem_set_budget(s0.current_total + 1024);
    int st = modattn_model_embed(m, texts, NULL, 3, out, NULL);
    modattn_mem_set_budget(0);
    CHECK_MSG(st == MODATTN_EBUDGET, "budget: %d %s", st, modattn_last_error());
    CHECK(modattn_model_embed(m, texts, NULL, 3, out, NULL) == 0);
    modattn_model_free(m);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/modattn_enc_XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    char sub[128];
    snprintf(sub, sizeof sub, "%s/1_Pooling", g_dir);
    mkdir(sub, 0755);
    static weights w;
    init_weights(&w);
    modattn_ctx *ctx = NULL;
    modattn_ctx_options o;
    memset(&o, 0, sizeof o);
    o.threads = 2;
    CHECK(modattn_ctx_create(&o, &ctx) == 0);
    if (ctx) {
        CHECK_MSG(modattn_ctx_register(ctx, &k_probe) == 0, "register: %s", modattn_last_error());
        test_oracle(ctx, &w);
        test_lower_case(ctx, &w);
        test_refusals(ctx, &w);
        test_alloc_failures(ctx, &w);
        CHECK(g_probe_calls > 0);
        modattn_ctx_free(ctx);
    }
    const char *files[] = {"config.json", "modules.json", "sentence_bert_config.json",
                           "1_Pooling/config.json", "tokenizer.json", "model.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/%s", g_dir, files[i]);
        unlink(p);
    }
    rmdir(sub);
    rmdir(g_dir);
    return test_finish("test_encoder");
}
