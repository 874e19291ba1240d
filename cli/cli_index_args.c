/* cli/cli_index_args.c — the options and PATHs of `modattn index`, read once for the plain command
 * (cli/cmd_index.c) and for `index --mpi` (cli/cmd_mpi.c), so that both take the same options with
 * the same errors; and, with no PATH, the folders and files the store was indexed from. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "modattn/ingest.h"
#include "modattn/store.h"
#include "core/internal_core.h"

void cli_index_usage(FILE *f) {
    fprintf(f,
            "usage: modattn index [--db FILE] [--model DIR] [--json] [--quiet] [--verbose] [--prune]\n"
            "                     [--chunk-tokens N] [--overlap N] [--max-file-size SIZE]\n"
            "                     [--batch N] [--wait SECONDS] [--ann KIND [--ann-params P]]\n"
            "                     [--file-timeout SECONDS] [--watch [--debounce SECONDS]]\n"
            "                     [--prompt-name NAME | --prompt TEXT] [--dimensions N]\n"
            "                     [--sparse DIR] [PATH...]\n\n"
            "Index files and folders (recursively) into a document store for `modattn search`.\n"
            "With no PATH, the folders and files the store was indexed from are indexed again\n"
            "(new, changed and, with --prune, removed files).\n"
            "Reads text and Markdown, HTML (visible text), PDF, Word/PowerPoint/Excel (.docx\n"
            ".pptx .xlsx), Word 97-2003 (.doc), OpenDocument (.odt .odp .ods), EPUB, RTF,\n"
            "e-mail (.eml, mbox),\n"
            "text inside .gz/.bz2/.xz/.zst, and other files that look like text; skips a file\n"
            "of another format naming it (\"a PNG image\"), empty and special files (FIFOs,\n"
            "sockets, devices) and files over the size cap, and does not walk into hidden\n"
            "folders. ZIP and TAR archives (.zip .tar .tar.gz .tgz .tar.bz2 .tar.xz .tar.zst)\n"
            "are walked as folders: each member is a document, ARCHIVE!/MEMBER (at most 2\n"
            "archives deep, 10000 members and 4 x --max-file-size bytes per archive); a member\n"
            "whose name escapes the archive, an encrypted or a damaged one is skipped with an\n"
            "error and nothing is ever written outside the store. A skipped file's reason is\n"
            "said once per run, and not again while the file is unchanged (--verbose: all).\n"
            "Each document is cut into overlapping chunks of word\n"
            "pieces, embedded, and written in one transaction: an interrupted run loses at\n"
            "most the document it was writing, and the next run skips what is already there.\n"
            "Unchanged files (same size and mtime, or same content hash) are not embedded\n"
            "again; changed ones are re-embedded. Invalid UTF-8 is replaced by U+FFFD for\n"
            "embedding and storing; a chunk's byte range points into the file (for HTML, PDF\n"
            "and the other extracted formats, into the extracted text). Files over the size\n"
            "cap are skipped with a message without being read.\n\n"
            "options:\n"
            "  --db FILE            the store (default ./" MODATTN_STORE_DEFAULT_PATH "; created if missing)\n"
            "  --model DIR|NAME     the model: a folder or a name (`modattn models`) (default:\n"
            "                       $MODATTN_MODEL, else the model the store was indexed with,\n"
            "                       else all-MiniLM-L6-v2 where `modattn models` looks); a store\n"
            "                       keeps its model\n"
            "  --prune              also remove stored documents whose file no longer exists\n"
            "  --prompt-name NAME   embed chunks with the model's prompt NAME (its\n"
            "                       config_sentence_transformers.json \"prompts\"); default: its\n"
            "                       document prompt (\"document\", \"passage\" or \"corpus\", as\n"
            "                       sentence-transformers' encode_document), said when used.\n"
            "                       The store records it and the query prompt: search uses them\n"
            "  --prompt TEXT        embed chunks with TEXT before each ('' : no prompt)\n"
            "  --dimensions N       keep the first N dimensions of each vector (Matryoshka),\n"
            "                       normalised again; 1 to the model's dimension; default: the\n"
            "                       store's, else the model's truncate_dim, else all. The store\n"
            "                       records it\n"
            "  --sparse DIR         also keep each chunk's SPLADE vector (a *ForMaskedLM\n"
            "                       folder, e.g. .models/splade-tiny) in the store's inverted\n"
            "                       index, for `search --mode sparse` and hybrid search with\n"
            "                       sparse. From a store's first document on (a store with\n"
            "                       chunks but no sparse vectors is refused); the store\n"
            "                       records the model, and later runs use it without --sparse\n"
            "  --chunk-tokens N     tokens per chunk, [CLS]/[SEP] included (default: the\n"
            "                       model's max_seq_length, 256 for all-MiniLM-L6-v2)\n"
            "  --overlap N          word pieces shared by consecutive chunks (default 32)\n"
            "  --max-file-size SIZE skip larger files (default 64M; K, M, G suffixes); the text\n"
            "                       extracted from an HTML or PDF file is capped the same\n"
            "  --file-timeout SECONDS  stop extracting the text of an HTML or PDF file after\n"
            "                       this long and skip the file with an error (default 30;\n"
            "                       0: no limit). Extraction runs in a child process whose\n"
            "                       memory is capped by what --mem-budget leaves (1 GiB\n"
            "                       without a budget): a file past it is skipped the same\n"
            "  --batch N            chunks per model call, across documents (default 64)\n"
            "  --ann KIND           build an approximate-search index beside the store (DB.ann)\n"
            "                       for `search` to use: through FAISS, hnsw (graph, best recall\n"
            "                       per query time), ivf-sq8 (8-bit vectors), ivf-pq (product-\n"
            "                       quantised codes); or a compact copy of every vector, scanned\n"
            "                       whole, its best candidates scored again exactly: f16 (half\n"
            "                       the bytes), int8 (a quarter), binary (sign bits, 1/32);\n"
            "                       `none` removes it. Without --ann\n"
            "                       an index already there is kept up to date (rows added; built\n"
            "                       again after a compaction). With --ann, PATH may be left out\n"
            "                       to build it for what the store holds\n"
            "  --ann-params P       FAISS's parameters, e.g. M=32,efConstruction=40,efSearch=64\n"
            "                       (hnsw) or nlist=1024,nprobe=16,m=48,nbits=8 (ivf), and\n"
            "                       rescore=N (candidates scored again exactly); 0 or absent:\n"
            "                       defaults for the store's size (README: Large corpora)\n"
            "  --mpi                under mpirun -np N: embed on N processes, one store (README: MPI)\n"
            "  --watch              after indexing, keep the store current: the folders are\n"
            "                       watched (inotify) and, once events stop for --debounce\n"
            "                       seconds (default 0.5), indexed again with --prune (new,\n"
            "                       changed and removed files; each document in its own\n"
            "                       transaction, as always). A watched folder removed is\n"
            "                       pruned and picked up again when it comes back. Runs until\n"
            "                       SIGINT or SIGTERM, which stop it cleanly (exit 0; a pass\n"
            "                       under way stops between documents, what it wrote stays)\n"
            "  --wait SECONDS       how long to wait for another writer of the store (another\n"
            "                       `modattn index`) to let go of its lock, saying so after half\n"
            "                       a second (default 60; 0: fail at once). A writer holds it\n"
            "                       only while writing one document, never while embedding\n"
            "  --json               print the summary as JSON:\n"
            "                       {\"files_seen\", \"files_indexed\", \"files_unchanged\",\n"
            "                        \"files_skipped\", \"files_pruned\", \"chunks_embedded\",\n"
            "                        \"tokens_embedded\", \"seconds\", \"db\", \"errors\": [{\"path\",\n"
            "                        \"message\"}], \"skipped\": [{\"path\", \"reason\"}],\n"
            "                        \"vector_file\": \"written\" | \"appended\" | \"current\" | \"not written: ...\",\n"
            "                        \"vector_file_rows_added\", \"vector_file_rows_masked\" (appended),\n"
            "                        \"vector_file_reason\" (why written whole), \"ann\": {\"action\":\n"
            "                        \"built\" | \"added\" | \"current\" | \"removed\", \"kind\", \"params\",\n"
            "                        \"rows\", \"rows_added\", \"bytes\", \"seconds\", \"reason\"} (when\n"
            "                        there is one), \"ann_error\" (when updating it failed)}\n"
            "  --quiet              no progress line and no notes on skipped files\n"
            "  -v, --verbose        every skipped file, also those whose reason was said already\n"
            "                       this run and those skipped before and unchanged since\n"
            "  -h, --help           this help\n\n"
            "exit status: 0 done; 3 done, but some files could not be read or their text not\n"
            "extracted (damaged, over --file-timeout or the memory budget: listed); 1 the run\n"
            "stopped (store, model, memory); 2 usage error.\n"
            "global options --attn, --threads, --device, --trace, --stats, --mem-budget apply.\n");
}

static bool parse_count(const char *v, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*v == '\0' || *end || errno || x < lo || x > hi) return false;
    *out = x;
    return true;
}

#define SAY(...) (say ? (void)fprintf(stderr, __VA_ARGS__) : (void)0)

/* One option at argv[*i] (*i past its value): 0 taken, 1 --help, 2 a usage error (said when say). */
static int take_option(int argc, char **argv, int *i, bool say, cli_index_args *a) {
    const char *s = argv[*i], *v;
    bool missing = false;
    if (cli_is_help(s)) return 1;
    int pr = cli_prompt_option("index", argc, argv, i, true, say, &a->eo);
    if (pr >= 0) return pr;
    if (strcmp(s, "--json") == 0) a->json = true;
    else if (strcmp(s, "--quiet") == 0 || strcmp(s, "-q") == 0) a->quiet = true;
    else if (strcmp(s, "--prune") == 0) a->prune = true;
    else if (strcmp(s, "--verbose") == 0 || strcmp(s, "-v") == 0) a->verbose = true;
    else if (strcmp(s, "--watch") == 0) a->watch = true;
    else if ((v = cli_opt_value(argc, argv, i, "--debounce", &missing))) {
        if (cli_parse_double_say("index --debounce", v, 0.01, 3600, false, say, &a->debounce_s) != 0) return 2;
    }
    else if ((v = cli_opt_value(argc, argv, i, "--db", &missing))) a->db = v;
    else if ((v = cli_opt_value(argc, argv, i, "--model", &missing))) a->model_dir = v;
    else if ((v = cli_opt_value(argc, argv, i, "--sparse", &missing))) a->sparse_dir = v;
    else if ((v = cli_opt_value(argc, argv, i, "--chunk-tokens", &missing))) {
        if (!parse_count(v, 3, 1 << 20, &a->chunk_tokens))
            return SAY("modattn: index: --chunk-tokens: '%s' is not a token count\n", v), 2;
    } else if ((v = cli_opt_value(argc, argv, i, "--overlap", &missing))) {
        if (!parse_count(v, 0, 1 << 20, &a->overlap))
            return SAY("modattn: index: --overlap: '%s' is not a count of word pieces\n", v), 2;
    } else if ((v = cli_opt_value(argc, argv, i, "--batch", &missing))) {
        if (!parse_count(v, 1, 65536, &a->batch))
            return SAY("modattn: index: --batch: '%s' is not a count in [1, 65536]\n", v), 2;
    } else if ((v = cli_opt_value(argc, argv, i, "--wait", &missing))) {
        if (cli_parse_double_say("index --wait", v, 0, 1e6, false, say, &a->wait_s) != 0) return 2;
    } else if ((v = cli_opt_value(argc, argv, i, "--file-timeout", &missing))) {
        if (cli_parse_double_say("index --file-timeout", v, 0, 1e6, false, say, &a->file_timeout_s) != 0) return 2;
    } else if ((v = cli_opt_value(argc, argv, i, "--ann", &missing))) {
        a->ann_kind = v;
        if (modattn_ann_kind_parse(v, &a->kind) != 0)
            return SAY("modattn: index: --ann: %s\n", modattn_last_error()), 2;
        if (modattn_ann_kind_available(a->kind) != 0)
            return SAY("modattn: index: --ann %s: %s\n", v, modattn_last_error()), 2;
    } else if ((v = cli_opt_value(argc, argv, i, "--ann-params", &missing))) {
        a->ann_params = v;
        if (modattn_ann_params_parse(v, &a->annp) != 0)
            return SAY("modattn: index: --ann-params: %s\n", modattn_last_error()), 2;
    } else if ((v = cli_opt_value(argc, argv, i, "--max-file-size", &missing))) {
        if (modattn__parse_bytes(v, &a->max_size) != 0 || a->max_size <= 0)
            return SAY("modattn: index: --max-file-size: '%s' is not a size\n", v), 2;
    } else if (missing) {
        return SAY("modattn: index: %s needs a value\n", s), 2;
    } else {
        return SAY("modattn: index: unknown option '%s' (see modattn index --help)\n", s), 2;
    }
    return 0;
}

int cli_index_parse(int argc, char **argv, bool say, cli_index_args *a) {
    memset(a, 0, sizeof *a);
    a->db = MODATTN_STORE_DEFAULT_PATH;
    a->wait_s = MODATTN_STORE_DEFAULT_WAIT_S;
    a->file_timeout_s = MODATTN_INGEST_DEFAULT_FILE_TIMEOUT_S;
    a->overlap = -1;
    a->debounce_s = 0.5;
    a->kind = MODATTN_ANN_NONE;
    if (!(a->paths = calloc((size_t)argc + 1, sizeof *a->paths))) {
        SAY("modattn: index: out of memory\n");
        return 1;
    }
    bool dashdash = false;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (dashdash || s[0] != '-' || s[1] == '\0') {
            a->paths[a->npaths++] = s;
            continue;
        }
        if (strcmp(s, "--") == 0) {
            dashdash = true;
            continue;
        }
        int r = take_option(argc, argv, &i, say, a);
        if (r == 1) return -1;
        if (r) return r;
    }
    if (a->ann_params && !a->ann_kind) {
        SAY("modattn: index: --ann-params needs --ann KIND\n");
        return 2;
    }
    return 0;
}

int cli_index_roots(cli_index_args *a, bool say) {
    a->refresh = a->npaths == 0 && !a->ann_kind;
    if (!a->refresh) return 0;
    modattn_store *peek = NULL;
    if (access(a->db, F_OK) == 0 && modattn_store_open(a->db, MODATTN_STORE_READONLY, &peek) == 0)
        (void)modattn_store_get_roots(peek, &a->roots, &a->nroots);
    modattn_store_close(peek);
    if (a->nroots == 0) {
        if (say) {
            fprintf(stderr, "modattn: index: no PATH given (and %s records none to refresh)\n\n", a->db);
            cli_index_usage(stderr);
        }
        return 2;
    }
    const char **np = realloc(a->paths, (a->nroots + 1) * sizeof *np);
    if (!np) {
        SAY("modattn: index: out of memory\n");
        return 1;
    }
    a->paths = np;
    for (size_t i = 0; i < a->nroots; i++) a->paths[a->npaths++] = a->roots[i];
    if (say && !a->quiet && !a->json)
        fprintf(stderr, "modattn: index: refreshing the %zu folder%s and file%s %s was indexed from\n", a->nroots,
                a->nroots == 1 ? "" : "s", a->nroots == 1 ? "" : "s", a->db);
    return 0;
}

void cli_index_args_free(cli_index_args *a) {
    for (size_t i = 0; i < a->nroots; i++) modattn_free(a->roots[i]);
    modattn_free(a->roots);
    free(a->paths);
    a->roots = NULL;
    a->paths = NULL;
    a->nroots = a->npaths = 0;
}

void cli_index_options(const cli_index_args *a, modattn_index_options *o) {
    memset(o, 0, sizeof *o);
    o->chunk_tokens = (size_t)a->chunk_tokens;
    o->overlap = (long)a->overlap;
    o->max_file_bytes = (uint64_t)a->max_size;
    o->batch_chunks = (size_t)a->batch;
    o->file_timeout_s = a->file_timeout_s > 0 ? a->file_timeout_s : -1; /* 0 on the command line: no limit */
    o->prune = a->prune;
    o->embed = &a->eo;
}
