/* pipeline/fmt_internal.h — the document formats beyond text, HTML and PDF (fmt_*.c): office
 * files (Word 97-2003 .doc too), EPUB, RTF, e-mail, compressed text, and the archive reader the indexer's walk will use.
 * Not a public header.
 *
 * Every extractor here reads a file held in memory and writes nothing anywhere: zip members are
 * inflated into memory (libarchive), never onto disk. Each is meant to run in the extraction
 * child (extract.c, modattn__extract_isolated) under RLIMIT_DATA and the time limit, and each
 * also bounds itself: decompressed bytes are capped at `cap` (the indexer passes --max-file-size),
 * XML that declares entities is refused before it is parsed (no billion laughs, no external
 * entities; libxml2 runs with XML_PARSE_NONET and without XML_PARSE_NOENT/DTDLOAD), and a zip
 * member with an escaping name ("../", absolute), an encrypted member or an archive nested past
 * MODATTN_ARCHIVE_MAX_DEPTH is a refusal with the reason (MODATTN_EFORMAT). */
#ifndef MODATTN_FMT_INTERNAL_H
#define MODATTN_FMT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "modattn/ingest.h"
#include "core/internal_core.h"
#include "pipeline/pipeline_internal.h"

/* Archives inside archives: "a.zip!/b.zip!/c.txt" is depth 2; deeper is refused. */
#define MODATTN_ARCHIVE_MAX_DEPTH 2

/* Whether a kind's text comes from an extractor (HTML, PDF and every kind below) rather than
 * being the file's own bytes. */
bool modattn__kind_extracted(modattn_doc_kind kind);

/* The extractor for kind (any kind modattn__kind_extracted says yes to, HTML and PDF included):
 * 0 with the text in out; MODATTN_EFORMAT with the reason (damaged, hostile, not that format);
 * MODATTN_ERANGE when decompressed data passes cap bytes; MODATTN_ENOMEM/EBUDGET. */
int modattn__fmt_extract(modattn_doc_kind kind, const char *buf, size_t len, size_t cap, modattn_doc_text *out);

int modattn__extract_docx(const char *buf, size_t len, size_t cap, modattn_doc_text *out);
int modattn__extract_pptx(const char *buf, size_t len, size_t cap, modattn_doc_text *out);
int modattn__extract_xlsx(const char *buf, size_t len, size_t cap, modattn_doc_text *out);
int modattn__extract_odf(const char *buf, size_t len, size_t cap, modattn_doc_text *out); /* .odt/.odp/.ods */
int modattn__extract_epub(const char *buf, size_t len, size_t cap, modattn_doc_text *out);
int modattn__extract_rtf(const char *buf, size_t len, size_t cap, modattn_doc_text *out);
/* A legacy Word 97-2003 .doc (fmt_doc.c): the OLE2 container through libgsf, then
 * modattn__doc_text on its WordDocument stream and its 0Table/1Table stream (NULL when absent),
 * the Word binary text reader, which the tests also call on streams they have damaged. */
int modattn__extract_doc(const char *buf, size_t len, size_t cap, modattn_doc_text *out);
int modattn__doc_text(const unsigned char *wd, size_t wd_len, const unsigned char *t0, size_t t0_len,
                      const unsigned char *t1, size_t t1_len, size_t cap, modattn_doc_text *out);
int modattn__extract_mail(const char *buf, size_t len, size_t cap, bool mbox, modattn_doc_text *out);
int modattn__extract_compressed(const char *buf, size_t len, size_t cap, modattn_doc_text *out);

/* ---- zip members in memory (fmt_zip.c, through libarchive) */
typedef struct modattn__zmember {
    char *name;  /* as stored */
    char *data;  /* NUL-terminated */
    size_t len;
} modattn__zmember;
typedef struct modattn__zip {
    modattn__zmember *m;
    size_t n, cap_m;
} modattn__zip;
/* Reads the members whose name want(name, ud) accepts (want NULL: all regular files) into
 * memory, their total at most cap bytes. Refuses (MODATTN_EFORMAT, reason set) a damaged or
 * truncated zip, a member name that escapes ("../", "/abs"), an encrypted member; MODATTN_ERANGE
 * past cap. `what` names the format in messages ("DOCX"). */
int modattn__zip_load(const char *buf, size_t len, size_t cap, const char *what,
                      bool (*want)(const char *name, void *ud), void *ud, modattn__zip *z);
const modattn__zmember *modattn__zip_get(const modattn__zip *z, const char *name);
void modattn__zip_free(modattn__zip *z);

/* ---- XML (fmt_xml.c): libxml2 with the hardening above */
struct _xmlDoc;
/* Parses an XML document (NONET, no entity substitution, no DTD loading); refuses one that
 * declares entities (<!ENTITY) with MODATTN_EFORMAT. *doc is freed with xmlFreeDoc. */
int modattn__xml_parse(const char *buf, size_t len, const char *what, struct _xmlDoc **doc);

/* ---- archives walked as folders (fmt_archive.c): ZIP and TAR (plain or compressed) */
typedef struct modattn_archive_member {
    const char *name;  /* the member's path inside the archive, as stored ("inner/file.txt") */
    uint64_t size;     /* uncompressed, as the archive states it */
    bool is_dir;
    bool is_archive;   /* its name says it is an archive itself (.zip, .tar, .tgz, .tar.gz ...) */
} modattn_archive_member;
/* true if the bytes start like a ZIP or a TAR (plain, or a .tar under gzip/bzip2/xz/zstd). */
bool modattn_archive_sniff(const char *name, const unsigned char *head, size_t len);
/* Calls fn for every member in archive order (fn returning non-zero stops the listing and is
 * returned). Refuses the whole archive (MODATTN_EFORMAT, reason set) for a damaged or truncated
 * one, a name that escapes it ("../", absolute) or an encrypted member, before fn sees anything.
 * Reads no member's data beyond what listing needs; writes nothing. */
int modattn_archive_list(const char *buf, size_t len, int (*fn)(void *ud, const modattn_archive_member *m),
                         void *ud);
/* One member's bytes (NUL-terminated, modattn__malloc'd), at most cap: MODATTN_ERANGE beyond
 * (a bomb stops there), MODATTN_EINVAL if there is no such member (or it is a folder). */
int modattn_archive_read(const char *buf, size_t len, const char *member, size_t cap, char **out, size_t *out_len);
/* Every regular member in archive order, in one pass, each with its bytes: fn(ud, name, data,
 * n, why). A member that cannot be read alone (its name escapes the archive, it is encrypted, it
 * expands past cap bytes) comes with data NULL and why saying so, and the walk goes on; fn
 * returning non-zero stops it and is returned. A damaged or truncated archive stops the walk at
 * that point with MODATTN_EFORMAT (the members before it were given). data is valid during the
 * call only (NUL-terminated). Nothing is written anywhere. */
typedef int (*modattn__archive_member_fn)(void *ud, const char *name, const char *data, size_t n, const char *why);
int modattn__archive_each(const char *buf, size_t len, size_t cap, modattn__archive_member_fn fn, void *ud);
/* The attachments of an e-mail (.eml) or of every message of a mailbox, in order, decoded, each
 * given to fn as an archive's member is: its name the attachment's file name ("report.pdf";
 * "attachment-N" without one; path separators replaced; made distinct with " (2)"), under the
 * message's number in a mailbox ("3/report.pdf"). One over cap comes with data NULL and why. */
int modattn__mail_each_attachment(const char *buf, size_t len, size_t cap, bool mbox, modattn__archive_member_fn fn,
                                  void *ud);
/* Called by both walkers above once for every member, before its bytes are decoded (and before fn
 * sees it): the walk's place, for the extraction child to say which member it was reading when it
 * died. true: pass this member over (neither decoded nor given to fn): a child that follows one
 * that died gives only the members after the one it died on. The hook is set in the walking child
 * alone (extract.c); elsewhere this is false. Also the test hook MODATTN_TEST_WALK_FAULT=1: a
 * member whose name holds "modattn-test-crash" makes the walking process crash (SIGSEGV), one
 * holding "modattn-test-hang" makes it hang, as a decoder bug on that member would
 * (tests/pipeline/cli_nested.sh). */
bool modattn__walk_member(const char *name);
extern bool (*modattn__walk_member_hook)(const char *name);
/* The same walks (modattn__archive_each, modattn__mail_each_attachment) in the extraction child
 * (pipeline/extract.c), under lim's memory and time limits: each member comes to fn in this
 * process as it would from the walker itself, its bytes read from the child. A member the child
 * died reading comes with data NULL and the reason (a crash, the memory or time limit), and a new
 * child goes on past it. Returns fn's non-zero, 1 when lim->cancel asked to stop (*cancelled set),
 * the walker's error, or MODATTN_ERANGE with the reason when the child died between members or
 * died reading more than a few. */
typedef enum { MODATTN__WALK_ARCHIVE, MODATTN__WALK_MAIL, MODATTN__WALK_MBOX } modattn__walk_kind;
int modattn__walk_isolated(modattn__walk_kind kind, const char *buf, size_t len, size_t cap,
                           const modattn__extract_limits *lim, modattn__archive_member_fn fn, void *ud,
                           bool *cancelled);
/* The path of a member as stored and shown: "ARCHIVE!/MEMBER" (modattn_free). */
char *modattn_archive_join(const char *archive_path, const char *member);
/* Splits "a.zip!/in/b.zip!/x.txt" at its first "!/": *archive "a.zip", *member "in/b.zip!/x.txt"
 * (both modattn__malloc'd). 0 when there is no "!/" (then both NULL); 1 split; MODATTN_EFORMAT
 * when the path nests deeper than MODATTN_ARCHIVE_MAX_DEPTH or a member part escapes. */
int modattn_archive_split(const char *path, char **archive, char **member);

/* true if a member name would escape its archive ("../", absolute, a drive letter) (fmt_zip.c) */
bool modattn__name_escapes(const char *name);

/* ---- helpers shared by the extractors */
/* Appends s, collapsing runs of white space to one space (owed separators as in html.c). */
typedef struct modattn__textw {
    modattn__tbuf b;
    int pending; /* 0 nothing, 1 space, 2 newline, 3 blank line */
} modattn__textw;
void modattn__textw_put(modattn__textw *w, const char *s, size_t len);
void modattn__textw_raw(modattn__textw *w, const char *s, size_t len); /* no collapsing */
/* Appends code point cp as UTF-8 (NUL, surrogates and values past U+10FFFF as U+FFFD; ASCII through
 * modattn__textw_put, so white space collapses): the RTF and Word readers. */
void modattn__textw_cp(modattn__textw *w, uint32_t cp);
void modattn__textw_sep(modattn__textw *w, int sep);
/* Writes the owed separator, then marks the text from here on as source position `number`. */
void modattn__textw_mark(modattn__textw *w, int64_t number);
/* Appends an HTML/XHTML document's visible text by html.c's rules (EPUB chapters, mail parts). */
int modattn__textw_html(modattn__textw *w, const char *html, size_t len);

#endif
