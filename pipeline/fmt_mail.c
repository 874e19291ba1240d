/* pipeline/fmt_mail.c — e-mail through GMime 3.0: one message (.eml) or a mailbox (mbox), each
 * message as its headers From, To, Cc, Subject and Date (decoded: RFC 2047 words, address lists)
 * and its body: text/plain preferred over text/html in a multipart/alternative, HTML read by
 * html.c's rules, transfer encodings (base64, quoted-printable) and charsets decoded to UTF-8 by
 * GMime, attached messages (message/rfc822) read as part of the message. Other attachments are
 * listed by name and type ("[attachment: report.pdf (application/pdf)]"), and
 * modattn__mail_each_attachment gives their decoded bytes to the indexer, which indexes each as a
 * document of its own ("mail.eml!/report.pdf"). Marks: the message's number in the mailbox (1 for
 * a single message). */
#include <gmime/gmime.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "modattn/core.h"
#include "core/internal_core.h"
#include "core/internal_status.h"
#include "pipeline/fmt_internal.h"

static pthread_once_t g_gmime_once = PTHREAD_ONCE_INIT;
static void gmime_setup(void) { g_mime_init(); }

#define MAIL_MAX_DEPTH 32 /* multiparts inside multiparts: deeper is not read */

/* text with its line structure: lines on their own lines, blank lines kept as one */
static void put_lines(modattn__textw *w, const char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        const char *nl = memchr(s + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - s) : len;
        size_t l = e - i;
        bool blank = true;
        for (size_t k = i; k < e && blank; k++) blank = s[k] == ' ' || s[k] == '\t' || s[k] == '\r';
        if (blank) modattn__textw_sep(w, 3);
        else {
            modattn__textw_put(w, s + i, l);
            modattn__textw_sep(w, 2);
        }
        i = nl ? e + 1 : len;
    }
}

static void header_line(modattn__textw *w, const char *label, const char *value) {
    if (!value || !*value) return;
    modattn__textw_sep(w, 2);
    modattn__textw_put(w, label, strlen(label));
    modattn__textw_put(w, " ", 1);
    modattn__textw_put(w, value, strlen(value));
    modattn__textw_sep(w, 2);
}

static void address_line(modattn__textw *w, const char *label, InternetAddressList *l) {
    if (!l || internet_address_list_length(l) == 0) return;
    char *s = internet_address_list_to_string(l, NULL, FALSE);
    header_line(w, label, s);
    g_free(s);
}

static int emit_object(modattn__textw *w, GMimeObject *o, int depth);

/* A leaf part that is not the message's text: one that is not text, or is marked an attachment.
 * Listed in the message's text, and a document of its own (modattn__mail_each_attachment). */
static bool is_attachment(GMimeObject *o) {
    if (!GMIME_IS_PART(o)) return false;
    GMimeContentType *ct = g_mime_object_get_content_type(o);
    GMimeContentDisposition *cd = g_mime_object_get_content_disposition(o);
    bool attachment = cd && g_mime_content_disposition_is_attachment(cd);
    return !GMIME_IS_TEXT_PART(o) || attachment || !ct;
}

static int emit_message(modattn__textw *w, GMimeMessage *msg, int depth) {
    address_line(w, "From:", g_mime_message_get_from(msg));
    address_line(w, "To:", g_mime_message_get_to(msg));
    address_line(w, "Cc:", g_mime_message_get_cc(msg));
    header_line(w, "Subject:", g_mime_message_get_subject(msg));
    header_line(w, "Date:", g_mime_object_get_header((GMimeObject *)msg, "Date"));
    modattn__textw_sep(w, 3);
    GMimeObject *body = g_mime_message_get_mime_part(msg);
    return body ? emit_object(w, body, depth + 1) : 0;
}

static void list_attachment(modattn__textw *w, GMimeObject *o) {
    const char *name = GMIME_IS_PART(o) ? g_mime_part_get_filename((GMimePart *)o) : NULL;
    GMimeContentType *ct = g_mime_object_get_content_type(o);
    char *type = ct ? g_mime_content_type_get_mime_type(ct) : NULL;
    char line[600];
    snprintf(line, sizeof line, "[attachment: %.300s (%.200s)]", name ? name : "unnamed",
             type ? type : "unknown type");
    g_free(type);
    modattn__textw_sep(w, 2);
    modattn__textw_put(w, line, strlen(line));
    modattn__textw_sep(w, 2);
}

static int emit_object(modattn__textw *w, GMimeObject *o, int depth) {
    if (depth > MAIL_MAX_DEPTH) return modattn__error(MODATTN_EFORMAT, "e-mail: parts nested deeper than %d", MAIL_MAX_DEPTH);
    if (GMIME_IS_MESSAGE_PART(o)) {
        GMimeMessage *m = g_mime_message_part_get_message((GMimeMessagePart *)o);
        modattn__textw_sep(w, 3);
        return m ? emit_message(w, m, depth + 1) : 0;
    }
    if (GMIME_IS_MULTIPART(o)) {
        GMimeMultipart *mp = (GMimeMultipart *)o;
        int n = g_mime_multipart_get_count(mp);
        GMimeContentType *ct = g_mime_object_get_content_type(o);
        if (ct && g_mime_content_type_is_type(ct, "multipart", "alternative") && n > 0) {
            /* one of the alternatives: the plain text one if there is one, else the last (richest) */
            GMimeObject *pick = g_mime_multipart_get_part(mp, n - 1);
            for (int i = 0; i < n; i++) {
                GMimeObject *c = g_mime_multipart_get_part(mp, i);
                GMimeContentType *cct = g_mime_object_get_content_type(c);
                if (cct && g_mime_content_type_is_type(cct, "text", "plain")) {
                    pick = c;
                    break;
                }
            }
            return emit_object(w, pick, depth + 1);
        }
        for (int i = 0; i < n; i++) {
            int st = emit_object(w, g_mime_multipart_get_part(mp, i), depth + 1);
            if (st) return st;
        }
        return 0;
    }
    if (!GMIME_IS_PART(o)) return 0;
    GMimeContentType *ct = g_mime_object_get_content_type(o);
    if (is_attachment(o)) {
        list_attachment(w, o);
        return 0;
    }
    char *text = g_mime_text_part_get_text((GMimeTextPart *)o); /* decoded, UTF-8 */
    if (!text) return 0;
    int st = 0;
    modattn__textw_sep(w, 3);
    if (g_mime_content_type_is_type(ct, "text", "html")) st = modattn__textw_html(w, text, strlen(text));
    else put_lines(w, text, strlen(text));
    g_free(text);
    return st;
}

/* ---- attachments as documents of their own */

typedef struct att_walk {
    modattn__archive_member_fn fn;
    void *ud;
    size_t cap;
    bool mbox;
    int64_t msg;   /* the message's number in the mailbox */
    int count;     /* attachments met */
    char **names;  /* the member names given, to keep them distinct */
    size_t nnames;
    int st;
} att_walk;

static bool name_taken(const att_walk *a, const char *name) {
    for (size_t i = 0; i < a->nnames; i++)
        if (strcmp(a->names[i], name) == 0) return true;
    return false;
}

/* The member name of an attachment: its file name with path separators replaced (the name is a
 * label here, never a path on disk), "attachment-N" without one, " (2)" added to a name given
 * already; in a mailbox, under the message's number ("3/report.pdf"). */
static void member_name(att_walk *a, const char *fname, char *out, size_t len) {
    char base[300];
    if (!fname || !*fname || strcmp(fname, ".") == 0 || strcmp(fname, "..") == 0)
        snprintf(base, sizeof base, "attachment-%d", a->count);
    else {
        snprintf(base, sizeof base, "%s", fname);
        for (char *p = base; *p; p++)
            if (*p == '/' || *p == '\\' || (unsigned char)*p < 0x20) *p = '_';
    }
    char full[400];
    if (a->mbox) snprintf(full, sizeof full, "%lld/%s", (long long)a->msg, base);
    else snprintf(full, sizeof full, "%s", base);
    snprintf(out, len, "%s", full);
    for (int k = 2; name_taken(a, out) && k < 100000; k++) {
        const char *dot = strrchr(full, '.');
        if (dot && dot != full && !strchr(dot, '/'))
            snprintf(out, len, "%.*s (%d)%s", (int)(dot - full), full, k, dot);
        else snprintf(out, len, "%s (%d)", full, k);
    }
}

static int walk_attachments(att_walk *a, GMimeObject *o, int depth) {
    if (depth > MAIL_MAX_DEPTH) return 0; /* the message's text says so */
    if (GMIME_IS_MESSAGE_PART(o)) {
        GMimeMessage *m = g_mime_message_part_get_message((GMimeMessagePart *)o);
        GMimeObject *body = m ? g_mime_message_get_mime_part(m) : NULL;
        return body ? walk_attachments(a, body, depth + 2) : 0;
    }
    if (GMIME_IS_MULTIPART(o)) {
        GMimeMultipart *mp = (GMimeMultipart *)o;
        int n = g_mime_multipart_get_count(mp);
        for (int i = 0; i < n; i++) {
            int st = walk_attachments(a, g_mime_multipart_get_part(mp, i), depth + 1);
            if (st) return st;
        }
        return 0;
    }
    if (!is_attachment(o)) return 0;
    a->count++;
    char name[512];
    member_name(a, g_mime_part_get_filename((GMimePart *)o), name, sizeof name);
    if (modattn__walk_member(name)) return 0; /* given before (extract.c): not decoded again */
    char **nv = modattn__realloc(a->names, (a->nnames + 1) * sizeof *nv, MODATTN_MEM_OTHER);
    if (!nv) return a->st = modattn__mem_last_status();
    a->names = nv;
    if (!(a->names[a->nnames] = modattn__strdup(name, MODATTN_MEM_OTHER))) return a->st = modattn__mem_last_status();
    a->nnames++;
    GMimeDataWrapper *dw = g_mime_part_get_content((GMimePart *)o);
    GMimeStream *mem = g_mime_stream_mem_new();
    if (!mem) return a->st = modattn__error(MODATTN_ENOMEM, "GMime: out of memory");
    /* the transfer encoding (base64, quoted-printable) decoded: never larger than the file */
    if (dw) g_mime_data_wrapper_write_to_stream(dw, mem);
    GByteArray *ba = g_mime_stream_mem_get_byte_array((GMimeStreamMem *)mem);
    int st;
    if (ba && ba->len > a->cap) {
        char why[200];
        snprintf(why, sizeof why, "%u bytes, over the size cap of %zu bytes (--max-file-size): not read", ba->len,
                 a->cap);
        st = a->fn(a->ud, name, NULL, 0, why);
    } else {
        st = a->fn(a->ud, name, ba && ba->len ? (const char *)ba->data : "", ba ? ba->len : 0, NULL);
    }
    g_object_unref(mem);
    return st;
}

int modattn__mail_each_attachment(const char *buf, size_t len, size_t cap, bool mbox, modattn__archive_member_fn fn,
                                  void *ud) {
    pthread_once(&g_gmime_once, gmime_setup);
    GMimeStream *stream = g_mime_stream_mem_new_with_buffer(buf, len);
    if (!stream) return modattn__error(MODATTN_ENOMEM, "GMime: out of memory");
    GMimeParser *parser = g_mime_parser_new_with_stream(stream);
    g_object_unref(stream);
    g_mime_parser_set_format(parser, mbox ? GMIME_FORMAT_MBOX : GMIME_FORMAT_MESSAGE);
    att_walk a = {fn, ud, cap, mbox, 0, 0, NULL, 0, 0};
    int st = 0;
    while (!st) {
        GMimeMessage *msg = g_mime_parser_construct_message(parser, NULL);
        if (!msg) break;
        a.msg++;
        GMimeObject *body = g_mime_message_get_mime_part(msg);
        if (body) st = walk_attachments(&a, body, 0);
        g_object_unref(msg);
        if (!mbox) break;
    }
    g_object_unref(parser);
    for (size_t i = 0; i < a.nnames; i++) modattn_free(a.names[i]);
    modattn_free(a.names);
    return a.st ? a.st : st;
}

int modattn__extract_mail(const char *buf, size_t len, size_t cap, bool mbox, modattn_doc_text *out) {
    (void)cap; /* decoded text is never larger than its encoding: the file's own size bounds it */
    memset(out, 0, sizeof *out);
    pthread_once(&g_gmime_once, gmime_setup);
    GMimeStream *stream = g_mime_stream_mem_new_with_buffer(buf, len);
    if (!stream) return modattn__error(MODATTN_ENOMEM, "GMime: out of memory");
    GMimeParser *parser = g_mime_parser_new_with_stream(stream);
    g_object_unref(stream);
    g_mime_parser_set_format(parser, mbox ? GMIME_FORMAT_MBOX : GMIME_FORMAT_MESSAGE);
    modattn__textw w;
    memset(&w, 0, sizeof w);
    int st = 0;
    int64_t count = 0;
    while (!st && !w.b.err) {
        GMimeMessage *msg = g_mime_parser_construct_message(parser, NULL);
        if (!msg) break;
        count++;
        modattn__textw_sep(&w, 3);
        modattn__textw_mark(&w, count);
        st = emit_message(&w, msg, 0);
        g_object_unref(msg);
        if (!mbox) break;
    }
    g_object_unref(parser);
    if (!st && count == 0)
        st = modattn__error(MODATTN_EFORMAT, mbox ? "not a mailbox: GMime found no message in it"
                                                 : "not an e-mail message: GMime could not parse it");
    if (st) {
        modattn__tbuf_free(&w.b);
        return st;
    }
    return modattn__tbuf_finish(&w.b, out, false);
}
