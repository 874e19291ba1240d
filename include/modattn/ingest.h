/* modattn/ingest.h — documents in: file kinds, text extraction, chunking by tokens, and the
 * indexer that walks paths into a store (modattn/store.h).
 *
 * Document text. A chunk's byte range [start, end) is an offset into the document's text:
 *   .txt, .md and other text files: the file's own bytes (ranges point into the file);
 *   .html/.htm: the visible text libxml2's HTML parser finds (scripts, styles, comments and
 *               elements with the `hidden` attribute dropped, entities decoded, whitespace
 *               collapsed as a browser would, block elements on their own lines);
 *   .pdf:       poppler's text of each page, pages separated by a blank line.
 * A chunk also records the source line of its start (text and HTML files) or its PDF page.
 *
 * Invalid UTF-8: text files are read as they are; each ill-formed sequence (its maximal subpart,
 * as Python's errors="replace") becomes U+FFFD in what is embedded and stored, so ranges still
 * point at the original bytes while stored chunk texts are valid UTF-8.
 *
 * Size cap: files larger than max_file_bytes (default 64 MiB) are skipped with a message, never
 * read; nothing bigger is ever held in memory at once. The text extracted from an HTML or PDF file
 * is capped the same, and the extraction (libxml2, poppler) runs in a child process with its own
 * memory and time limits (modattn_index_options), so that a decompression bomb or quadratic
 * markup costs a skipped file with its reason, never the run. A chunk holds at most
 * MODATTN_CHUNK_MAX_BYTES of text. */
#ifndef MODATTN_INGEST_H
#define MODATTN_INGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "modattn/status.h"
#include "modattn/ann.h"
#include "modattn/dispatch.h"
#include "modattn/model.h"
#include "modattn/store.h"
#include "modattn/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MODATTN_INGEST_DEFAULT_MAX_FILE_BYTES ((uint64_t)64 << 20)
#define MODATTN_INGEST_DEFAULT_OVERLAP 32
#define MODATTN_INGEST_SNIFF_BYTES 65536
/* Extraction limits (HTML and PDF, see modattn_index_options): seconds per file, and the memory
 * the extracting library may use when no memory budget is set. */
#define MODATTN_INGEST_DEFAULT_FILE_TIMEOUT_S 30.0
#define MODATTN_INGEST_DEFAULT_EXTRACT_MEM ((uint64_t)1 << 30)
/* The most bytes of text one chunk holds: a run of word pieces (or one [UNK] word, or blank space
 * between pieces) longer than this is cut (modattn_chunk_text), so a stored chunk, and a search
 * hit, is never larger, whatever the file. Far above any real window of text (256 word pieces of
 * prose are about 1.5 KB). */
#define MODATTN_CHUNK_MAX_BYTES 65536

/* ---- kinds */
typedef enum modattn_doc_kind {
    MODATTN_DOC_BINARY = 0, /* not indexed */
    MODATTN_DOC_TEXT,
    MODATTN_DOC_MARKDOWN,
    MODATTN_DOC_HTML,
    MODATTN_DOC_PDF,
    /* issue 40's formats (appended: the values above are kept). Their text comes from an
     * extractor run in the extraction child, like PDF's; positions are paragraphs (DOCX, ODT,
     * RTF), slides (PPTX, ODP), sheets (XLSX, ODS), spine documents (EPUB), messages (mbox). */
    MODATTN_DOC_DOCX,       /* Office Open XML word processing: a zip with word/document.xml */
    MODATTN_DOC_PPTX,       /* ... presentation: ppt/presentation.xml */
    MODATTN_DOC_XLSX,       /* ... spreadsheet: xl/workbook.xml */
    MODATTN_DOC_ODT,        /* OpenDocument text: a zip whose mimetype member says so */
    MODATTN_DOC_ODP,        /* ... presentation */
    MODATTN_DOC_ODS,        /* ... spreadsheet */
    MODATTN_DOC_EPUB,       /* a zip whose mimetype is application/epub+zip */
    MODATTN_DOC_RTF,        /* "{\rtf" */
    MODATTN_DOC_EMAIL,      /* one RFC 5322 message (.eml) */
    MODATTN_DOC_MBOX,       /* a mailbox of messages ("From " lines) */
    MODATTN_DOC_COMPRESSED, /* text inside gzip, bzip2, xz or zstd */
    MODATTN_DOC_DOC,        /* legacy Word 97-2003: an OLE2 compound file with a WordDocument stream */
} modattn_doc_kind;
const char *modattn_doc_kind_name(modattn_doc_kind k); /* "binary", "text", ... */

/* The kind of a file from its name and its first bytes (head, up to MODATTN_INGEST_SNIFF_BYTES):
 * ".pdf" or a "%PDF-" start: PDF; ".html"/".htm"/".xhtml": HTML; ".md"/".markdown": Markdown;
 * anything else (".txt" included) that sniffs as text: TEXT. Text means: no NUL byte, and
 * control characters plus bytes of ill-formed UTF-8 are at most 10% of the head (Latin-1 prose
 * passes; executables, images and archives do not). Text that starts with a UTF-16 byte order
 * mark is judged, and its HTML start looked for, after decoding (modattn__utf16_to_utf8). Named
 * HTML and Markdown files must pass the same test. */
modattn_doc_kind modattn_sniff_kind(const char *name, const unsigned char *head, size_t len);
/* The formats of issue 40 are sniffed by magic bytes and name together: a zip ("PK\3\4") named
 * .docx/.pptx/.xlsx or whose first members show word/, ppt/ or xl/ parts; a zip whose first member
 * "mimetype" holds an OpenDocument or EPUB type (or named .odt/.odp/.ods/.epub); "{\rtf"; a .eml
 * file or text that starts with mail headers; a .mbox file or text that starts with a "From "
 * line followed by headers; gzip/bzip2/xz/zstd magic (not a .tar.*: that is an archive); an OLE2 compound file (D0 CF 11 E0 A1 B1
 * 1A E1) whose directory holds a WordDocument stream (or, when its directory lies past the head,
 * one named .doc/.dot): other OLE2 files (.xls, .ppt, .msg) stay unsupported. */


/* ---- text */
/* A document's text and where its bytes came from. */
typedef struct modattn_text_mark {
    size_t offset;   /* from this byte of text on ... */
    int64_t number;  /* ... the source line (HTML) or page (PDF) is this */
} modattn_text_mark;

typedef struct modattn_doc_text {
    char *text;                /* owned; len bytes (+ a NUL) */
    size_t len;
    modattn_text_mark *marks;  /* owned, sorted by offset; NULL for text files (lines counted) */
    size_t nmarks;
    bool pages;                /* marks are PDF pages (else source lines) */
} modattn_doc_text;
void modattn_doc_text_clear(modattn_doc_text *d);

/* Visible text of an HTML document (see the top of this file). MODATTN_EFORMAT if libxml2 finds
 * no document at all. */
int modattn_extract_html(const char *html, size_t len, modattn_doc_text *out);
/* Text of a PDF held in memory. MODATTN_EFORMAT for a damaged or encrypted file. */
int modattn_extract_pdf(const char *pdf, size_t len, modattn_doc_text *out);
/* The source line (text files and HTML) or page (PDF) of byte `offset` of the text. */
int64_t modattn_doc_text_locate(const modattn_doc_text *d, size_t offset);


/* ---- chunking */
typedef struct modattn_chunk {
    size_t start, end;   /* bytes of the text: from the first word piece's first byte to the
                          * last one's last byte; end - start <= MODATTN_CHUNK_MAX_BYTES (a word
                          * piece longer than that, one [UNK] word, ends the chunk where the cap
                          * falls, on a character boundary) */
    size_t ntokens;      /* word pieces, specials not counted */
} modattn_chunk;

/* Cuts text into windows of at most `window` word pieces (tokenizer `tok`, no specials), each
 * starting `window - overlap` pieces after the previous one, moved forward to the next piece that
 * begins a word so that a chunk never starts inside a word (a chunk tokenised on its own gives
 * the same pieces as inside the document). A text with no word piece has no chunk; the last chunk
 * is the one that reaches the end. A window whose bytes would pass MODATTN_CHUNK_MAX_BYTES ends
 * at the last piece that fits (the overlap shrinks in proportion); a single piece longer than
 * the cap (a word of more than the tokenizer's max_input_chars_per_word characters, one [UNK])
 * makes a chunk of its first MODATTN_CHUNK_MAX_BYTES bytes (cut on a character boundary: still
 * one [UNK] when tokenised on its own), and the next window starts after it. Memory: O(window)
 * scratch plus the chunk array. Time: linear in the text. Where the tokenizer finds no place to
 * cut the text into blocks for 32 KiB or more (a SentencePiece piece without spaces, long CJK
 * text), the windows are taken from one tokenisation of that stretch, not a fresh one from each
 * window's start: a chunk there tokenised on its own may have a piece or a few more (Unigram's
 * leading "▁"), and memory is O(the stretch), as the tokenizer's own is for it
 * (pipeline/chunk.c).
 * Ownership: *out is freed with modattn_free (NULL when *n is 0). overlap < window. */
int modattn_chunk_text(const modattn_tokenizer *tok, const char *text, size_t len, size_t window,
                       size_t overlap, modattn_chunk **out, size_t *n);

/* ---- the indexer
 * ZIP and TAR archives are walked as folders: each member is a document, its path
 * "ARCHIVE!/MEMBER" (events name members so); an e-mail's attachments are documents of their own,
 * "MAIL!/NAME". A file skipped for its format is remembered by the store: while it is unchanged,
 * later runs give its SKIPPED event with the message ending " (as before: unchanged since)". */
typedef enum modattn_index_event {
    MODATTN_INDEX_SKIPPED = 0, /* not indexed, by policy: binary, empty, too large, special file */
    MODATTN_INDEX_ERROR,       /* not indexed: unreadable, dangling link, loop, damaged file */
    MODATTN_INDEX_PRUNED,      /* removed from the store: the file no longer exists */
    MODATTN_INDEX_INDEXED,     /* (re)indexed */
} modattn_index_event;

typedef struct modattn_index_stats {
    uint64_t files_seen;      /* = indexed + unchanged + skipped */
    uint64_t files_indexed;   /* new or changed, embedded and committed */
    uint64_t files_unchanged; /* same size+mtime, or same content hash */
    uint64_t files_skipped;   /* binary, empty, too large, special, or an error */
    uint64_t files_pruned;
    uint64_t errors;          /* events of kind MODATTN_INDEX_ERROR */
    uint64_t chunks_embedded;
    uint64_t tokens_embedded; /* word pieces fed to the model, specials included */
    uint64_t bytes_read;
    bool vector_file_written;     /* the store's vector file was rewritten or appended to (modattn/store.h) */
    bool vector_file_appended;    /* ... and by an append */
    uint64_t vector_file_rows_added, vector_file_rows_masked; /* by that append */
    char vector_file_reason[320]; /* why it was rewritten whole rather than appended to */
    char vector_file_error[320];  /* why it could not be ("" if it could, or needed nothing) */
    modattn_ann_update ann;       /* the store's ANN index brought up to date (modattn/ann.h;
                                   * action NONE: there is none) */
    char ann_error[512];          /* why it could not be ("" if it could) */
    bool cancelled;               /* opt->cancel stopped the run: what was committed until then
                                   * (files_indexed documents) stays; nothing was pruned and the
                                   * vector file was not brought up to date */
} modattn_index_stats;

typedef struct modattn_index_progress {
    uint64_t files_done, files_total;
    uint64_t bytes_done, bytes_total; /* sizes of the files seen by the walk */
    uint64_t chunks, tokens;          /* embedded so far */
    double elapsed_s;                 /* since the files were listed */
} modattn_index_progress;

typedef struct modattn_index_options {
    size_t chunk_tokens;     /* tokens per chunk, [CLS]/[SEP] included; 0: the model's max_tokens */
    long overlap;            /* word pieces shared by consecutive chunks; < 0: the default (32,
                              * at most a quarter of the window) */
    uint64_t max_file_bytes; /* 0: MODATTN_INGEST_DEFAULT_MAX_FILE_BYTES */
    bool prune;              /* remove stored documents whose file no longer exists */
    size_t batch_chunks;     /* chunks per model call; 0: 64 */
    /* Called for every event on a file (optional); msg says why. */
    void (*on_event)(void *ud, modattn_index_event ev, const char *path, const char *msg);
    /* Called after each file and at most every few hundred milliseconds (optional). */
    void (*on_progress)(void *ud, const modattn_index_progress *p);
    void *ud;
    const modattn_exec *ann_exec; /* threads for adding rows to the ANN index (NULL: 1) */
    /* HTML and PDF text is extracted in a child process (fork), so that the libraries' memory
     * and time are bounded: it may use extract_mem_bytes beyond what it inherits (0: what the
     * memory budget leaves, modattn_mem_set_budget, else MODATTN_INGEST_DEFAULT_EXTRACT_MEM),
     * and is stopped after file_timeout_s seconds (0: MODATTN_INGEST_DEFAULT_FILE_TIMEOUT_S;
     * < 0: no limit). A file past either is an error event naming the limit, and the run goes
     * on. Its text may not exceed max_file_bytes either. */
    uint64_t extract_mem_bytes;
    double file_timeout_s;
    /* Asked between documents, between batches and while a file's text is extracted (optional):
     * non-zero stops the run at once. What was committed stays; the return is 0 with
     * stats->cancelled set. Called on the indexing thread. */
    int (*cancel)(void *ud);
    /* How chunks are embedded (modattn_model_embed_opt; NULL: the defaults): the prompt (by default
     * the model's document prompt, encode_document's choice) and the dimensions (by default the
     * store's, else the model's). Both are recorded in the store (modattn_store_embed_options) and
     * a store made with others refuses the run. A prompt's word pieces count toward the model's
     * max_seq_length, so chunks are made that much shorter (an explicit chunk_tokens that leaves
     * no room for them is refused). */
    const modattn_embed_options *embed;
    /* Sparse vectors too (modattn/sparse.h; NULL: none): each chunk's, pruned by sparse_opt (NULL:
     * the encoder's defaults), kept in the store's inverted index in the chunk's transaction. The
     * store records the encoder's identity and pruning: a store with another's is refused
     * (MODATTN_EVERSION), as is one with sparse vectors indexed without them, or one with chunks
     * but no sparse vectors indexed with them (its chunks would never be found by sparse search). */
    struct modattn_sparse_encoder *sparse;
    const struct modattn_sparse_options *sparse_opt;
} modattn_index_options;

/* Walks paths (files and folders, recursively; symbolic links followed, loops detected and
 * reported), and indexes every new or changed document into the store with the model, one
 * transaction per document. Per-file problems are events, counted, and never stop the run;
 * the return value is non-zero only for what stops it (the store, the model, memory, invalid
 * options), with the stats of what was done until then. The store is bound to the model first
 * (MODATTN_EVERSION if it belongs to another one). At the end the store's vector file is
 * brought up to date (modattn_store_update_vector_file: an append, or a rewrite when it is
 * missing, damaged or due for compaction); a failure to write it is in
 * stats->vector_file_error and does not fail the run. Then the ANN index, when the store has one
 * (modattn_store_update_ann: rows added, or built again after a compaction); a failure is in
 * stats->ann_error (searches then scan exactly) and does not fail the run either.
 * (`modattn index --mpi` spreads the embedding over processes with the indexer's stages:
 * pipeline/indexer_stages.h, internal.) */
int modattn_index_paths(modattn_store *store, modattn_model *model, const char *const *paths,
                        size_t npaths, const modattn_index_options *opt,
                        modattn_index_stats *stats);


#ifdef __cplusplus
}
#endif
#endif
