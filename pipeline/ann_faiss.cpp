// pipeline/ann_faiss.cpp — the C bridge to FAISS declared in pipeline/ann_faiss.h. Glue only:
// every FAISS call is wrapped so that nothing C++ (exceptions, std::string) crosses into C.
#include "pipeline/ann_faiss.h"

#include <omp.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>

#include <faiss/Index.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVF.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/io.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>

#include "modattn/status.h"

struct modattn__faiss {
    faiss::Index *index;
};

namespace {

// FAISS's messages carry the C++ function and file; keep the first line, which says what failed.
void put_msg(char *msg, size_t len, const char *what, const char *why) {
    if (!msg || !len) return;
    std::snprintf(msg, len, "%s: %s", what, why);
    for (char *p = msg; *p; p++)
        if (*p == '\n') {
            *p = '\0';
            break;
        }
}

// Runs fn with the calling thread's OpenMP thread count set to `threads` (when > 0), restoring it.
template <class F>
int guarded(const char *what, int threads, char *msg, size_t len, F fn) {
    const int before = omp_get_max_threads();
    if (threads > 0) omp_set_num_threads(threads);
    int st = 0;
    try {
        fn();
    } catch (const faiss::FaissException &e) {
        put_msg(msg, len, what, e.msg.c_str());
        st = MODATTN_EINVAL;
    } catch (const std::bad_alloc &) {
        put_msg(msg, len, what, "out of memory");
        st = MODATTN_ENOMEM;
    } catch (const std::exception &e) {
        put_msg(msg, len, what, e.what());
        st = MODATTN_EINVAL;
    } catch (...) {
        put_msg(msg, len, what, "unknown C++ exception");
        st = MODATTN_EINVAL;
    }
    if (threads > 0) omp_set_num_threads(before);
    return st;
}

struct CallbackWriter : faiss::IOWriter {
    int (*put)(void *, const void *, size_t);
    void *ud;
    bool failed = false;
    size_t operator()(const void *ptr, size_t size, size_t nitems) override {
        if (failed) return 0;
        if (size && nitems && put(ud, ptr, size * nitems)) {
            failed = true;
            return 0;
        }
        return nitems;
    }
};

struct MemoryReader : faiss::IOReader {
    const unsigned char *p;
    size_t size, at = 0;
    size_t operator()(void *ptr, size_t sz, size_t nitems) override {
        if (!sz || !nitems) return 0;
        size_t want = nitems;
        if (want > (size - at) / sz) want = (size - at) / sz;
        std::memcpy(ptr, p + at, want * sz);
        at += want * sz;
        return want;
    }
};

#if defined(__x86_64__)
// One dot product with AVX2+FMA, inlined into the graph walk (the hot call of HNSW: the kernel
// behind a pointer, with its per-call set-up, cost a third of the search time). Used only when the
// CPU has both (the caller checks); dimensions that are a multiple of 8 only.
__attribute__((target("avx2,fma"))) static inline float dot_avx2(const float *a, const float *b, size_t d) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    size_t j = 0;
    for (; j + 32 <= d; j += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 8), _mm256_loadu_ps(b + j + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 16), _mm256_loadu_ps(b + j + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 24), _mm256_loadu_ps(b + j + 24), s3);
    }
    for (; j < d; j += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), s0);
    __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}
static bool have_avx2() {
    static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return yes;
}
#endif

// Inner products by modattn's kernel for an HNSW index's flat storage (FAISS negates them itself
// for the graph, as for its own IndexFlatIP).
struct KernelComputer : faiss::FlatCodesDistanceComputer {
    const float *q = nullptr;
    size_t d;
    modattn__faiss_dot dot;
    bool avx2 = false;
    KernelComputer(const uint8_t *codes, size_t d, modattn__faiss_dot dot)
            : faiss::FlatCodesDistanceComputer(codes, d * sizeof(float)), d(d), dot(dot) {
#if defined(__x86_64__)
        avx2 = d % 8 == 0 && have_avx2();
#endif
    }
    float one(const float *a, const float *b) const {
#if defined(__x86_64__)
        if (avx2) return dot_avx2(a, b, d);
#endif
        float s;
        dot(a, 1, d, d, b, &s);
        return s;
    }
    void set_query(const float *x) override { q = x; }
    float distance_to_code(const uint8_t *code) override { return one(reinterpret_cast<const float *>(code), q); }
    float symmetric_dis(idx_t i, idx_t j) override {
        const float *b = reinterpret_cast<const float *>(codes);
        return one(b + i * d, b + j * d);
    }
};

struct KernelFlatIP : faiss::IndexFlatIP {
    modattn__faiss_dot dot;
    KernelFlatIP(faiss::Index::idx_t d, modattn__faiss_dot dot) : faiss::IndexFlatIP(d), dot(dot) {}
    faiss::FlatCodesDistanceComputer *get_FlatCodesDistanceComputer() const override {
        return new KernelComputer(codes.data(), (size_t)d, dot);
    }
};

// An HNSW index's IndexFlatIP storage replaced by a KernelFlatIP holding the same rows (it is
// written as an IndexFlatIP: the file stays FAISS's own format).
void use_kernel(faiss::Index *index, modattn__faiss_dot dot) {
    auto *h = dynamic_cast<faiss::IndexHNSWFlat *>(index);
    if (!h || !dot) return;
    /* IndexHNSWFlat makes an IndexFlat of metric IP; read_index an IndexFlatIP */
    auto *old = dynamic_cast<faiss::IndexFlat *>(h->storage);
    if (!old || old->metric_type != faiss::METRIC_INNER_PRODUCT || dynamic_cast<KernelFlatIP *>(old)) return;
    auto *fast = new KernelFlatIP(old->d, dot);
    fast->codes.swap(old->codes);
    fast->ntotal = old->ntotal;
    if (h->own_fields) delete old;
    h->storage = fast;
    h->own_fields = true;
}

}  // namespace

extern "C" {

int modattn__faiss_create(const char *factory, size_t dim, int ef_construction, modattn__faiss_dot dot,
                          modattn__faiss **out, char *msg, size_t len) {
    *out = nullptr;
    modattn__faiss *f = new (std::nothrow) modattn__faiss{nullptr};
    if (!f) {
        put_msg(msg, len, "faiss index_factory", "out of memory");
        return MODATTN_ENOMEM;
    }
    int st = guarded("faiss index_factory", 0, msg, len, [&] {
        f->index = faiss::index_factory((int)dim, factory, faiss::METRIC_INNER_PRODUCT);
        if (auto *h = dynamic_cast<faiss::IndexHNSW *>(f->index); h && ef_construction > 0)
            h->hnsw.efConstruction = ef_construction;
        use_kernel(f->index, dot);
    });
    if (st) {
        delete f->index;
        delete f;
        return st;
    }
    *out = f;
    return 0;
}

bool modattn__faiss_is_trained(const modattn__faiss *f) { return f->index->is_trained; }

int modattn__faiss_train(modattn__faiss *f, size_t n, const float *x, int threads, char *msg, size_t len) {
    return guarded("faiss train", threads, msg, len, [&] { f->index->train((faiss::Index::idx_t)n, x); });
}

int modattn__faiss_add(modattn__faiss *f, size_t n, const float *x, int threads, char *msg, size_t len) {
    return guarded("faiss add", threads, msg, len, [&] { f->index->add((faiss::Index::idx_t)n, x); });
}

int modattn__faiss_search(modattn__faiss *f, size_t nq, const float *q, size_t k, int ef_search, int nprobe,
                          int threads, float *dist, int64_t *labels, char *msg, size_t len) {
    return guarded("faiss search", threads, msg, len, [&] {
        faiss::SearchParametersHNSW hp;
        faiss::SearchParametersIVF ip;
        const faiss::SearchParameters *params = nullptr;
        // FAISS 1.7.3's HNSW search does not read efSearch from its parameters: the index's own
        // field is set (an index is searched by one thread at a time: modattn/ann.h)
        if (auto *h = dynamic_cast<faiss::IndexHNSW *>(f->index)) {
            if (ef_search > 0) h->hnsw.efSearch = ef_search;
            hp.efSearch = h->hnsw.efSearch;
            params = &hp;
        } else if (auto *iv = dynamic_cast<faiss::IndexIVF *>(f->index)) {
            if (nprobe > 0) iv->nprobe = (size_t)nprobe;
            ip.nprobe = iv->nprobe;
            params = &ip;
        }
        static_assert(sizeof(faiss::Index::idx_t) == sizeof(int64_t), "FAISS labels are 64-bit");
        f->index->search((faiss::Index::idx_t)nq, q, (faiss::Index::idx_t)k, dist, reinterpret_cast<faiss::Index::idx_t *>(labels),
                         params);
    });
}

size_t modattn__faiss_ntotal(const modattn__faiss *f) { return (size_t)f->index->ntotal; }

int modattn__faiss_write(const modattn__faiss *f, int (*put)(void *, const void *, size_t), void *ud, char *msg,
                         size_t len) {
    CallbackWriter w;
    w.put = put;
    w.ud = ud;
    int st = guarded("faiss write_index", 0, msg, len, [&] { faiss::write_index(f->index, &w); });
    if (!st && w.failed) {
        put_msg(msg, len, "faiss write_index", "writing failed");
        st = MODATTN_EIO;
    }
    return st;
}

int modattn__faiss_read(const void *buf, size_t size, modattn__faiss_dot dot, modattn__faiss **out, char *msg,
                        size_t len) {
    *out = nullptr;
    modattn__faiss *f = new (std::nothrow) modattn__faiss{nullptr};
    if (!f) {
        put_msg(msg, len, "faiss read_index", "out of memory");
        return MODATTN_ENOMEM;
    }
    MemoryReader r;
    r.p = static_cast<const unsigned char *>(buf);
    r.size = size;
    int st = guarded("faiss read_index", 0, msg, len, [&] {
        f->index = faiss::read_index(&r, 0);
        use_kernel(f->index, dot);
    });
    if (!st && r.at != size) {
        put_msg(msg, len, "faiss read_index", "bytes left over after the index");
        st = MODATTN_EFORMAT;
    }
    if (st) {
        delete f->index;
        delete f;
        return st == MODATTN_EINVAL ? MODATTN_EFORMAT : st;
    }
    *out = f;
    return 0;
}

void modattn__faiss_free(modattn__faiss *f) {
    if (!f) return;
    delete f->index;
    delete f;
}

int modattn__faiss_hnsw_view(const modattn__faiss *f, modattn__hnsw_view *out) {
    std::memset(out, 0, sizeof *out);
    auto *h = dynamic_cast<const faiss::IndexHNSWFlat *>(f->index);
    auto *st = h ? dynamic_cast<const faiss::IndexFlat *>(h->storage) : nullptr;
    if (!h || !st || st->metric_type != faiss::METRIC_INNER_PRODUCT) return 0;
    const faiss::HNSW &g = h->hnsw;
    static_assert(sizeof(faiss::HNSW::storage_idx_t) == sizeof(int32_t), "FAISS's node ids are 32-bit");
    if (g.levels.size() != (size_t)h->ntotal || g.offsets.size() != (size_t)h->ntotal + 1 ||
        st->codes.size() != (size_t)h->ntotal * (size_t)h->d * sizeof(float))
        return 0;
    out->n = (size_t)h->ntotal;
    out->levels = g.levels.data();
    out->offsets = g.offsets.data();
    out->neighbors = reinterpret_cast<const int32_t *>(g.neighbors.data());
    out->cum = g.cum_nneighbor_per_level.data();
    out->ncum = g.cum_nneighbor_per_level.size();
    out->entry = g.entry_point;
    out->max_level = g.max_level;
    out->x = reinterpret_cast<const float *>(st->codes.data());
    out->d = (size_t)h->d;
    return 1;
}

const char *modattn__faiss_version(void) {
#define MODATTN__STR2(x) #x
#define MODATTN__STR(x) MODATTN__STR2(x)
    return MODATTN__STR(FAISS_VERSION_MAJOR) "." MODATTN__STR(FAISS_VERSION_MINOR) "." MODATTN__STR(
        FAISS_VERSION_PATCH);
}

}  // extern "C"
