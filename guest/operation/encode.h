/* encode.h: how the operation guest writes a call's values into a request, included once by operation.c.
 *
 * - percent-encoding (RFC 3986: every byte but the unreserved A-Z a-z 0-9 - . _ ~; with allowReserved the
 *   reserved characters but # & = + are kept too);
 * - the OpenAPI parameter styles (3.0/3.1 "Style Values" and "Style Examples"): simple, label and matrix
 *   (path), form, spaceDelimited, pipeDelimited and deepObject (query, form bodies, cookies), simple
 *   (headers, not percent-encoded), each with or without explode; deepObject nests ([k] for an object's
 *   member, [i] for an array's element, where the specification leaves nesting undefined); "json" (a
 *   parameter with content application/json): its JSON text as one value;
 * - a multipart/form-data body (RFC 7578) and base64 decoding for file parts and binary bodies. */

enum { ENC_PCT = 0, ENC_RESERVED = 1, ENC_RAW = 2 };

/* One parameter's serialization: its style name, explode, and how its text is escaped. */
typedef struct pstyle {
    char style[16];
    int explode;
    int enc;
} pstyle;

static int unreserved(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_' || c == '~';
}

/* allowReserved keeps RFC 3986's reserved characters but those that would end a query pair (# & = +). */
static int kept_reserved(unsigned char c) { return c && strchr(":/?[]@!$'()*,;", c) != NULL; }

static void emit(gb_buf *out, const char *s, size_t n, int enc) {
    static const char hex[] = "0123456789ABCDEF";
    if (enc == ENC_RAW) {
        gb_buf_append(out, s, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (unreserved(c) || (enc == ENC_RESERVED && kept_reserved(c))) {
            gb_buf_append(out, (const char *)&c, 1);
        } else {
            char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
            gb_buf_append(out, esc, 3);
        }
    }
}

static int is_null(const char *val, size_t len) { return len == 4 && memcmp(val, "null", 4) == 0; }

/* A JSON value as text: a string decoded, a scalar verbatim, an array or object as its JSON text. */
static void text_of(const char *val, size_t len, gb_buf *out) {
    if (len && *val == '"' && gb_json_string(val, len, out) == 0) return;
    if (!is_null(val, len)) gb_buf_append(out, val, len);
}

static void emit_value(gb_buf *out, const char *val, size_t len, int enc) {
    gb_buf text = {0};
    text_of(val, len, &text);
    emit(out, text.data ? text.data : "", text.len, enc);
    gb_buf_free(&text);
}

/* Walk a JSON object: set `p` to its first byte ('{'); each call sets the next member's key (raw, with its
 * quotes) and value and returns 0, or returns -1 after the last member. */
static int obj_next(const char **p, const char *end, const char **key, size_t *key_len, const char **val,
                    size_t *val_len) {
    const char *q = gb__ws(*p, end);
    if (q >= end || (*q != '{' && *q != ',')) return -1;
    q = gb__ws(q + 1, end);
    if (q >= end || *q != '"') return -1;
    const char *kend = gb__skip(q, end);
    if (!kend) return -1;
    *key = q, *key_len = (size_t)(kend - q);
    q = gb__ws(kend, end);
    if (q >= end || *q != ':') return -1;
    q = gb__ws(q + 1, end);
    const char *vend = gb__skip(q, end);
    if (!vend) return -1;
    *val = q, *val_len = (size_t)(vend - q);
    *p = gb__ws(vend, end);
    return 0;
}

/* The members (key, value, key, value...) or elements of an object or array, written with `sep` between
 * them; `kv` between a key and its value ("=" exploded, else `sep`). */
static void emit_items(gb_buf *out, const char *val, size_t len, const char *sep, const char *kv, int enc) {
    const char *p = val, *end = val + len, *k, *v;
    size_t k_len, v_len;
    int first = 1;
    if (*val == '[') {
        while (gb_json_next(&p, end, &v, &v_len) == 0) {
            if (!first) gb_buf_puts(out, sep);
            first = 0;
            emit_value(out, v, v_len, enc);
        }
        return;
    }
    while (obj_next(&p, end, &k, &k_len, &v, &v_len) == 0) {
        if (is_null(v, v_len)) continue;
        if (!first) gb_buf_puts(out, sep);
        first = 0;
        emit_value(out, k, k_len, enc);
        gb_buf_puts(out, kv);
        emit_value(out, v, v_len, enc);
    }
}

/* A path or header parameter in its style (simple, label, matrix; json: its JSON text): what replaces {name}
 * in the path. */
static void emit_path_style(gb_buf *out, const pstyle *st, const char *name, const char *val, size_t len) {
    int composite = len && (*val == '[' || *val == '{');
    if (strcmp(st->style, "json") == 0) {
        emit(out, val, len, st->enc);
        return;
    }
    int is_obj = len && *val == '{';
    if (strcmp(st->style, "label") == 0) {
        gb_buf_puts(out, ".");
        if (composite) emit_items(out, val, len, ".", st->explode ? "=" : ".", st->enc);
        else emit_value(out, val, len, st->enc);
        return;
    }
    if (strcmp(st->style, "matrix") == 0) {
        if (composite && st->explode) {
            const char *p = val, *end = val + len, *k, *v;
            size_t k_len, v_len;
            if (is_obj) {
                while (obj_next(&p, end, &k, &k_len, &v, &v_len) == 0) {
                    if (is_null(v, v_len)) continue;
                    gb_buf_puts(out, ";");
                    emit_value(out, k, k_len, st->enc);
                    gb_buf_puts(out, "=");
                    emit_value(out, v, v_len, st->enc);
                }
            } else {
                while (gb_json_next(&p, end, &v, &v_len) == 0) {
                    gb_buf_puts(out, ";");
                    emit(out, name, strlen(name), st->enc);
                    gb_buf_puts(out, "=");
                    emit_value(out, v, v_len, st->enc);
                }
            }
            return;
        }
        gb_buf_puts(out, ";");
        emit(out, name, strlen(name), st->enc);
        if (len && *val == '"' && len == 2) return; /* an empty string: ;name */
        gb_buf_puts(out, "=");
        if (composite) emit_items(out, val, len, ",", ",", st->enc);
        else emit_value(out, val, len, st->enc);
        return;
    }
    if (composite) emit_items(out, val, len, ",", st->explode ? "=" : ",", st->enc); /* simple */
    else emit_value(out, val, len, st->enc);
}

/* name=value after `lead` ("?" for a query, "" for a form body, "; " between cookies) or `amp` after that. */
static void emit_pair(gb_buf *out, int *first, const char *lead, const char *amp, const char *name, size_t name_len,
                      const char *val, size_t len, int enc) {
    gb_buf_puts(out, *first ? lead : amp);
    *first = 0;
    emit(out, name, name_len, enc == ENC_RAW ? ENC_RAW : ENC_PCT);
    gb_buf_puts(out, "=");
    emit_value(out, val, len, enc);
}

/* deepObject: name[key]=value for each member, nested objects and arrays adding [key] and [index]. */
static void emit_deep(gb_buf *out, int *first, const char *lead, const char *amp, gb_buf *prefix, const char *val,
                      size_t len, int enc) {
    const char *p = val, *end = val + len, *k, *v;
    size_t k_len, v_len, mark = prefix->len;
    if (!len || is_null(val, len)) return;
    if (*val != '{' && *val != '[') {
        emit_pair(out, first, lead, amp, prefix->data, prefix->len, val, len, enc);
        return;
    }
    for (size_t index = 0;; index++) {
        if (*val == '{' ? obj_next(&p, end, &k, &k_len, &v, &v_len) != 0 : gb_json_next(&p, end, &v, &v_len) != 0)
            break;
        gb_buf_puts(prefix, "[");
        if (*val == '{') text_of(k, k_len, prefix);
        else gb_buf_printf(prefix, "%zu", index);
        gb_buf_puts(prefix, "]");
        emit_deep(out, first, lead, amp, prefix, v, v_len, enc);
        prefix->len = mark;
    }
}

/* A query parameter, form-body field or cookie in its style (form, spaceDelimited, pipeDelimited,
 * deepObject): its pairs appended to out. A null value sends nothing. */
static void emit_query_style(gb_buf *out, int *first, const char *lead, const char *amp, const pstyle *st,
                             const char *name, size_t name_len, const char *val, size_t len) {
    if (!len || is_null(val, len)) return;
    int composite = *val == '[' || *val == '{';
    if (strcmp(st->style, "json") == 0) { /* content: application/json: the JSON text as one value */
        gb_buf_puts(out, *first ? lead : amp);
        *first = 0;
        emit(out, name, name_len, st->enc == ENC_RAW ? ENC_RAW : ENC_PCT);
        gb_buf_puts(out, "=");
        emit(out, val, len, st->enc);
        return;
    }
    if (strcmp(st->style, "deepObject") == 0 && composite) {
        gb_buf prefix = {0};
        gb_buf_append(&prefix, name, name_len);
        emit_deep(out, first, lead, amp, &prefix, val, len, st->enc);
        gb_buf_free(&prefix);
        return;
    }
    if (!composite) {
        emit_pair(out, first, lead, amp, name, name_len, val, len, st->enc);
        return;
    }
    if (st->explode) { /* form (and the delimited styles, which define no exploded form): repeat the name */
        const char *p = val, *end = val + len, *k, *v;
        size_t k_len, v_len;
        if (*val == '[') {
            while (gb_json_next(&p, end, &v, &v_len) == 0)
                if (!is_null(v, v_len)) emit_pair(out, first, lead, amp, name, name_len, v, v_len, st->enc);
            return;
        }
        while (obj_next(&p, end, &k, &k_len, &v, &v_len) == 0) {
            if (is_null(v, v_len)) continue;
            gb_buf key = {0};
            text_of(k, k_len, &key);
            emit_pair(out, first, lead, amp, key.data ? key.data : "", key.len, v, v_len, st->enc);
            gb_buf_free(&key);
        }
        return;
    }
    const char *sep = strcmp(st->style, "spaceDelimited") == 0  ? "%20"
                      : strcmp(st->style, "pipeDelimited") == 0 ? "%7C"
                                                                : ",";
    if (st->enc == ENC_RAW && sep[0] == '%') sep = sep[1] == '2' ? " " : "|";
    gb_buf_puts(out, *first ? lead : amp);
    *first = 0;
    emit(out, name, name_len, st->enc == ENC_RAW ? ENC_RAW : ENC_PCT);
    gb_buf_puts(out, "=");
    emit_items(out, val, len, sep, sep, st->enc);
}

/* ------------------------------------------------------------------------ */
/* base64 and multipart/form-data                                            */
/* ------------------------------------------------------------------------ */

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

/* Decode base64 (standard or URL-safe alphabet, padding optional, whitespace ignored). Returns 0 or -1. */
static int b64_decode(const char *s, size_t n, gb_buf *out) {
    unsigned acc = 0;
    int bits = 0, pad = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = b64_value(c);
        if (v < 0 || pad) return -1;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            char byte = (char)((acc >> bits) & 0xFF);
            gb_buf_append(out, &byte, 1);
        }
    }
    return bits >= 6 || pad > 2 ? -1 : 0;
}

/* A JSON string holding base64, decoded into out. Returns 0 or -1. */
static int b64_string(const char *val, size_t len, gb_buf *out) {
    gb_buf text = {0};
    int rc = gb_json_string(val, len, &text) == 0 ? b64_decode(text.data ? text.data : "", text.len, out) : -1;
    gb_buf_free(&text);
    return rc;
}

/* A quoted-string parameter of Content-Disposition: '"', CR and LF percent-encoded (as HTML forms do). */
static void disposition_name(gb_buf *out, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"') gb_buf_puts(out, "%22");
        else if (s[i] == '\r') gb_buf_puts(out, "%0D");
        else if (s[i] == '\n') gb_buf_puts(out, "%0A");
        else gb_buf_append(out, s + i, 1);
    }
}

static int string_member(const char *obj, size_t len, const char *key, gb_buf *out) {
    const char *val;
    size_t val_len;
    return gb_json_get(obj, len, key, &val, &val_len) == 0 && *val == '"' ? gb_json_string(val, val_len, out) : -1;
}

/* One part: its headers, then its content. A file part ({"base64"|"text", "filename", "content_type"}) is
 * decoded; another object or array is sent as JSON; a scalar as its text. Returns 0, or -1 (bad base64). */
static int multipart_part(gb_buf *body, const char *boundary, const char *name, size_t name_len, int file,
                          const char *val, size_t len) {
    gb_buf content = {0}, filename = {0}, type = {0};
    const char *data;
    size_t data_len;
    int rc = 0;
    if (file && *val == '{') {
        if (gb_json_get(val, len, "base64", &data, &data_len) == 0) rc = b64_string(data, data_len, &content);
        else if (gb_json_get(val, len, "text", &data, &data_len) == 0) rc = gb_json_string(data, data_len, &content);
        if (string_member(val, len, "filename", &filename) != 0) gb_buf_append(&filename, name, name_len);
        if (string_member(val, len, "content_type", &type) != 0) gb_buf_puts(&type, "application/octet-stream");
    } else if (*val == '{' || *val == '[') {
        gb_buf_append(&content, val, len);
        gb_buf_puts(&type, "application/json");
    } else {
        text_of(val, len, &content);
    }
    gb_buf_printf(body, "--%s\r\nContent-Disposition: form-data; name=\"", boundary);
    disposition_name(body, name, name_len);
    gb_buf_puts(body, "\"");
    if (file) {
        gb_buf_puts(body, "; filename=\"");
        disposition_name(body, filename.data ? filename.data : "", filename.len);
        gb_buf_puts(body, "\"");
    }
    gb_buf_puts(body, "\r\n");
    if (type.len) {
        gb_buf_puts(body, "Content-Type: ");
        for (size_t i = 0; i < type.len; i++) /* no header injection through a content type */
            if (type.data[i] != '\r' && type.data[i] != '\n') gb_buf_append(body, type.data + i, 1);
        gb_buf_puts(body, "\r\n");
    }
    gb_buf_puts(body, "\r\n");
    gb_buf_append(body, content.data ? content.data : "", content.len);
    gb_buf_puts(body, "\r\n");
    gb_buf_free(&content), gb_buf_free(&filename), gb_buf_free(&type);
    return rc;
}

static int listed(const char *names, size_t names_len, const char *name) {
    const char *p = names, *end = names + names_len, *item;
    size_t item_len, n = strlen(name);
    while (names && gb_json_next(&p, end, &item, &item_len) == 0)
        if (item_len == n + 2 && memcmp(item + 1, name, n) == 0) return 1;
    return 0;
}

/* How often `needle` occurs in buf. */
static size_t occurrences(const gb_buf *buf, const char *needle) {
    size_t n = strlen(needle), count = 0;
    for (size_t i = 0; buf->data && i + n <= buf->len; i++)
        if (memcmp(buf->data + i, needle, n) == 0) count++, i += n - 1;
    return count;
}

/* A multipart/form-data body of the object `obj`: one part per member (an array: one per element), in the
 * object's order; `files` names the members that are file parts. The boundary is derived from the content
 * and changed until no part contains it. Writes the Content-Type (with the boundary) into `type`. */
static int multipart_body(const char *files, size_t files_len, const char *obj, size_t obj_len, gb_buf *body,
                          gb_buf *type, gb_buf *out) {
    if (!obj_len || *obj != '{') return gb_error(out, "a multipart/form-data body must be an object");
    uint64_t hash = 1469598103934665603ULL;
    for (size_t i = 0; i < obj_len; i++) hash = (hash ^ (unsigned char)obj[i]) * 1099511628211ULL;
    for (int attempt = 0; attempt < 16; attempt++, hash = hash * 6364136223846793005ULL + 1442695040888963407ULL) {
        char boundary[40];
        snprintf(boundary, sizeof boundary, "glovebox-%016llx", (unsigned long long)hash);
        const char *p = obj, *end = obj + obj_len, *k, *v, *elem;
        size_t k_len, v_len, elem_len, parts = 0;
        body->len = 0;
        while (obj_next(&p, end, &k, &k_len, &v, &v_len) == 0) {
            if (is_null(v, v_len)) continue;
            gb_buf name = {0};
            text_of(k, k_len, &name);
            int file = listed(files, files_len, name.data ? name.data : "");
            int rc = 0;
            if (*v == '[') {
                const char *q = v;
                while (rc == 0 && gb_json_next(&q, v + v_len, &elem, &elem_len) == 0)
                    rc = multipart_part(body, boundary, name.data ? name.data : "", name.len, file, elem, elem_len),
                    parts++;
            } else {
                rc = multipart_part(body, boundary, name.data ? name.data : "", name.len, file, v, v_len), parts++;
            }
            if (rc != 0) {
                int err = gb_error(out, "multipart field \"%s\": its base64 is not valid", name.data);
                gb_buf_free(&name);
                return err;
            }
            gb_buf_free(&name);
        }
        gb_buf_printf(body, "--%s--\r\n", boundary);
        char delimiter[48];
        snprintf(delimiter, sizeof delimiter, "--%s", boundary);
        if (occurrences(body, delimiter) == parts + 1) {
            gb_buf_printf(type, "multipart/form-data; boundary=%s", boundary);
            return GB_OK;
        }
    }
    return gb_error(out, "cannot find a multipart boundary the parts do not contain");
}

/* ------------------------------------------------------------------------ */
/* A response that is not JSON                                               */
/* ------------------------------------------------------------------------ */

static void b64_encode(gb_buf *out, const unsigned char *s, size_t n) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
        char quad[4] = {alphabet[v >> 18 & 63], alphabet[v >> 12 & 63], i + 1 < n ? alphabet[v >> 6 & 63] : '=',
                        i + 2 < n ? alphabet[v & 63] : '='};
        gb_buf_append(out, quad, 4);
    }
}

static int valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t extra = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : 9;
        if (extra == 9 || (extra == 1 && c < 0xC2) || i + extra >= n + (extra ? 0 : 1)) return 0;
        for (size_t k = 1; k <= extra; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        i += extra + 1;
    }
    return 1;
}

static int header_is(const gb_str *name, const char *wanted) {
    size_t n = strlen(wanted);
    if (name->len != n) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name->ptr[i];
        if ((c >= 'A' && c <= 'Z' ? c + 32 : c) != wanted[i]) return 0;
    }
    return 1;
}

/* A 2xx answer whose Content-Type says it is not JSON, as JSON: text (text/..., XML, YAML, JavaScript) in
 * valid UTF-8 as a string; anything else as {"content_type", "base64"}. Returns 1 when it wrote the output,
 * 0 for a JSON answer (or one without a Content-Type), which the caller passes on as it is. */
static int plain_answer(const gb_http_response *resp, gb_buf *out) {
    gb_buf type = {0};
    for (size_t i = 0; i < resp->header_count; i++)
        if (header_is(&resp->headers[i].name, "content-type"))
            gb_buf_append(&type, resp->headers[i].value.ptr, resp->headers[i].value.len);
    const char *t = type.data ? type.data : "";
    int json = !type.len || strstr(t, "json") != NULL;
    int text = !strncmp(t, "text/", 5) || strstr(t, "xml") || strstr(t, "yaml") || strstr(t, "javascript");
    const unsigned char *body = (const unsigned char *)resp->body;
    if (json) {
        gb_buf_free(&type);
        return 0;
    }
    if (text && valid_utf8(body, resp->body_len)) {
        gb_buf_json_string(out, resp->body, resp->body_len);
    } else {
        gb_buf_puts(out, "{\"content_type\":");
        gb_buf_json_string(out, t, strcspn(t, "\r\n"));
        gb_buf_puts(out, ",\"base64\":\"");
        b64_encode(out, body, resp->body_len);
        gb_buf_puts(out, "\"}");
    }
    gb_buf_free(&type);
    return 1;
}
