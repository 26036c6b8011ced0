/* operation: the generic HTTP-operation guest behind `glovebox import openapi|graphql`.
 *
 * The host calls it with {"operation": <descriptor>, "input": <validated input>}.
 * The descriptor (written by the importer, stored in the tool's manifest) says:
 *
 *   method       "GET", "POST", ...
 *   url          the server's base URL, e.g. "https://api.example.com/v1"
 *   path         the path template, e.g. "/pets/{petId}"
 *   path_params  input fields substituted into the template, in their style (simple, label, matrix),
 *                percent-encoded (every byte outside RFC 3986's unreserved A-Z a-z 0-9 - . _ ~, so "a/b"
 *                stays in one segment; a "." or ".." value is sent as it is and the host refuses the dot segment)
 *   query        input fields sent as query parameters, in their style (form by default: an array repeats
 *                the name; spaceDelimited, pipeDelimited, deepObject)
 *   headers      input fields sent as request headers (simple style, not percent-encoded)
 *   cookies      input fields sent in one Cookie header (form style)
 *   wire_names   {"input field": "name sent"} for a parameter whose name one in another place holds
 *   styles       {"name": {"style", "explode", "allow_reserved"}} for a parameter not in its place's default
 *                (query_join, {"name": "csv" | "space" | "pipe"}, is what imports before styles wrote)
 *   body         true: the input field "body" is sent as the request body, as body_encoding says:
 *                "json" (the default), "text" (a string sent as it is), "binary" (a base64 string, sent
 *                decoded), "form" (application/x-www-form-urlencoded: the fields body_fields of the object,
 *                each in its body_styles style, form by default) or "multipart" (multipart/form-data: a part
 *                per member, body_files naming the file parts {"base64" | "text", "filename", "content_type"});
 *                body_media is the Content-Type of a text or binary body
 *   graphql      {"query": "<document>", "field": "<name>"} for a GraphQL field:
 *                POST {"query": ..., "variables": <input>} and answer data.<field>
 *                ({"data": data.<field>, "errors": [...]} when errors come with a value)
 *
 * The request goes through the host's http-fetch, so the call's grant, address
 * checks, limits, secrets and audit apply to it. A 2xx answer's JSON body is
 * the output (an empty body is null; a text body a string, other bytes {"content_type", "base64"});
 * any other status is a guest error naming it. */
#include "glovebox.h"

#define MAX_HEADERS 32

static int find(const char *json, size_t len, const char *key, const char **val, size_t *val_len) {
    return json && gb_json_get(json, len, key, val, val_len) == 0;
}

#include "encode.h"

/* A parameter's style: the descriptor's `group` entry for it ({"style", "explode", "allow_reserved"}), else
 * the default of its place (`style`; explode when it is form), else a legacy query_join entry. */
static void style_of(const char *op, size_t op_len, const char *group, const char *name, const char *style,
                     int enc, pstyle *st) {
    const char *styles, *entry, *val;
    size_t styles_len, entry_len, val_len;
    snprintf(st->style, sizeof st->style, "%s", style);
    st->explode = strcmp(style, "form") == 0;
    st->enc = enc;
    if (find(op, op_len, group, &styles, &styles_len) && find(styles, styles_len, name, &entry, &entry_len)) {
        gb_buf text = {0};
        if (find(entry, entry_len, "style", &val, &val_len) && gb_json_string(val, val_len, &text) == 0 && text.data)
            snprintf(st->style, sizeof st->style, "%s", text.data);
        gb_buf_free(&text);
        if (find(entry, entry_len, "explode", &val, &val_len)) st->explode = *val == 't';
        if (enc == ENC_PCT && find(entry, entry_len, "allow_reserved", &val, &val_len) && *val == 't')
            st->enc = ENC_RESERVED;
    } else if (find(op, op_len, "query_join", &styles, &styles_len) && strcmp(group, "styles") == 0 &&
               find(styles, styles_len, name, &val, &val_len)) { /* manifests imported before "styles" */
        snprintf(st->style, sizeof st->style, "%s",
                 val[1] == 's' ? "spaceDelimited" : val[1] == 'p' ? "pipeDelimited" : "form");
        st->explode = 0;
    }
}

static int build_path(const char *op, size_t op_len, const char *tpl, size_t tpl_len, const char *in, size_t in_len,
                      gb_buf *url, gb_buf *out) {
    const char *p = tpl, *end = tpl + tpl_len;
    while (p < end) {
        if (*p != '{') {
            gb_buf_append(url, p++, 1);
            continue;
        }
        const char *close = memchr(p, '}', (size_t)(end - p));
        if (!close) return gb_error(out, "path template has an unclosed '{'");
        char name[128];
        size_t n = (size_t)(close - p - 1);
        if (n == 0 || n >= sizeof name) return gb_error(out, "path template has a bad parameter name");
        memcpy(name, p + 1, n);
        name[n] = '\0';
        const char *val;
        size_t val_len;
        if (!find(in, in_len, name, &val, &val_len) || is_null(val, val_len))
            return gb_error(out, "path parameter \"%s\" is missing", name);
        pstyle st;
        style_of(op, op_len, "styles", name, "simple", ENC_PCT, &st);
        emit_path_style(url, &st, name, val, val_len);
        p = close + 1;
    }
    return GB_OK;
}

/* The name input field `name` is sent under: its wire_names entry, else itself. */
static void wire_name(const char *op, size_t op_len, const char *name, size_t name_len, gb_buf *wire) {
    const char *names, *val;
    size_t names_len, val_len;
    if (!(find(op, op_len, "wire_names", &names, &names_len) && find(names, names_len, name, &val, &val_len) &&
          gb_json_string(val, val_len, wire) == 0))
        gb_buf_append(wire, name, name_len);
}

/* The input fields `names` as query pairs (lead "?"), or as cookies (lead "", "; " between them). */
static int build_pairs(const char *op, size_t op_len, const char *names, size_t names_len, const char *in,
                       size_t in_len, const char *lead, const char *amp, int enc, gb_buf *target, gb_buf *out) {
    const char *p = names, *end = names + names_len, *item, *val;
    size_t item_len, val_len;
    int first = 1;
    while (gb_json_next(&p, end, &item, &item_len) == 0) {
        gb_buf name = {0};
        if (gb_json_string(item, item_len, &name) != 0 || !name.data) return gb_error(out, "bad parameter name");
        if (find(in, in_len, name.data, &val, &val_len)) {
            pstyle st;
            gb_buf wire = {0};
            style_of(op, op_len, "styles", name.data, "form", enc, &st);
            wire_name(op, op_len, name.data, name.len, &wire);
            emit_query_style(target, &first, lead, amp, &st, wire.data ? wire.data : "", wire.len, val, val_len);
            gb_buf_free(&wire);
        }
        gb_buf_free(&name);
    }
    return GB_OK;
}

static int build_headers(const char *op, size_t op_len, const char *names, size_t names_len, const char *in,
                         size_t in_len, gb_buf *store, size_t *count, gb_buf *out) {
    const char *p = names, *end = names + names_len, *item, *val;
    size_t item_len, val_len;
    while (gb_json_next(&p, end, &item, &item_len) == 0) {
        gb_buf name = {0};
        if (gb_json_string(item, item_len, &name) != 0 || !name.data) return gb_error(out, "bad header name");
        if (find(in, in_len, name.data, &val, &val_len) && !is_null(val, val_len)) {
            if (*count >= MAX_HEADERS) return gb_error(out, "more than %d header parameters", MAX_HEADERS);
            gb_buf *pair = &store[2 * (*count)];
            pstyle st;
            style_of(op, op_len, "styles", name.data, "simple", ENC_RAW, &st);
            wire_name(op, op_len, name.data, name.len, &pair[0]);
            emit_path_style(&pair[1], &st, name.data, val, val_len);
            if (!pair[1].data) gb_buf_append(&pair[1], "", 0);
            (*count)++;
        }
        gb_buf_free(&name);
    }
    return GB_OK;
}

/* data.<field> of a GraphQL answer. An "errors" array with no value for the field makes a guest
 * error; beside a value (a partial error) the answer is {"data": <value>, "errors": [...]}. */
static int graphql_answer(const char *body, size_t len, const char *op, size_t op_len, gb_buf *out) {
    const char *val, *errors = NULL, *data, *fieldv;
    size_t val_len, errors_len = 0, data_len, field_len;
    if (find(body, len, "errors", &val, &val_len) && !(val_len == 4 && memcmp(val, "null", 4) == 0))
        errors = val, errors_len = val_len;
    if (!find(body, len, "data", &data, &data_len)) {
        if (errors) return gb_error(out, "GraphQL errors: %.*s", (int)(errors_len > 2000 ? 2000 : errors_len), errors);
        return gb_error(out, "GraphQL answer without \"data\"");
    }
    gb_buf name = {0};
    if (!find(op, op_len, "field", &val, &val_len) || gb_json_string(val, val_len, &name) != 0 || !name.data)
        return gb_error(out, "graphql descriptor without \"field\"");
    int found = find(data, data_len, name.data, &fieldv, &field_len);
    gb_buf_free(&name);
    int empty = !found || (field_len == 4 && memcmp(fieldv, "null", 4) == 0);
    if (errors && empty)
        return gb_error(out, "GraphQL errors: %.*s", (int)(errors_len > 2000 ? 2000 : errors_len), errors);
    if (!found) return gb_buf_puts(out, "null"), GB_OK;
    if (errors) gb_buf_puts(out, "{\"data\":");
    gb_buf_append(out, fieldv, field_len);
    if (errors) {
        gb_buf_puts(out, ",\"errors\":");
        gb_buf_append(out, errors, errors_len);
        gb_buf_puts(out, "}");
    }
    return GB_OK;
}

static int graphql_body(const char *op, size_t op_len, const char *in, size_t in_len, gb_buf *body, gb_buf *out) {
    const char *val;
    size_t val_len;
    if (!find(op, op_len, "query", &val, &val_len) || *val != '"')
        return gb_error(out, "graphql descriptor without \"query\"");
    gb_buf_puts(body, "{\"query\":");
    gb_buf_append(body, val, val_len);
    gb_buf_puts(body, ",\"variables\":");
    gb_buf_append(body, in, in_len);
    gb_buf_puts(body, "}");
    return GB_OK;
}

/* An application/x-www-form-urlencoded body: the fields body_fields of `obj` (none listed: all its members),
 * each in its body_styles entry's style (form, exploded, by default), as a query's parameters are. */
static int form_body(const char *op, size_t op_len, const char *fields, size_t fields_len, const char *obj,
                     size_t obj_len, gb_buf *body, gb_buf *out) {
    const char *p = fields, *end = fields + fields_len, *item, *val;
    size_t item_len, val_len;
    int first = 1;
    if (!obj_len || *obj != '{') return gb_error(out, "a form body must be an object");
    if (fields_len <= 2) { /* no fields declared: every member, in the object's order */
        const char *k;
        size_t k_len;
        p = obj, end = obj + obj_len;
        while (obj_next(&p, end, &k, &k_len, &val, &val_len) == 0) {
            gb_buf name = {0};
            pstyle st = {"form", 1, ENC_PCT};
            text_of(k, k_len, &name);
            emit_query_style(body, &first, "", "&", &st, name.data ? name.data : "", name.len, val, val_len);
            gb_buf_free(&name);
        }
        return GB_OK;
    }
    while (gb_json_next(&p, end, &item, &item_len) == 0) {
        gb_buf name = {0};
        if (gb_json_string(item, item_len, &name) != 0 || !name.data) return gb_error(out, "bad form field name");
        if (find(obj, obj_len, name.data, &val, &val_len)) {
            pstyle st;
            style_of(op, op_len, "body_styles", name.data, "form", ENC_PCT, &st);
            emit_query_style(body, &first, "", "&", &st, name.data, name.len, val, val_len);
        }
        gb_buf_free(&name);
    }
    return GB_OK;
}

typedef struct request {
    gb_buf method, url, body;
    gb_buf headers[2 * MAX_HEADERS + 2];
    size_t header_count;
    int has_body;
} request;

static int is_encoding(const char *enc, size_t enc_len, const char *name) {
    size_t n = strlen(name);
    return enc && enc_len == n + 2 && memcmp(enc + 1, name, n) == 0;
}

/* The request body from the input field "body", as body_encoding says; its Content-Type into `type`. */
static int build_body(const char *op, size_t op_len, const char *val, size_t val_len, request *r, gb_buf *type,
                      gb_buf *out) {
    const char *enc = NULL, *list, *media;
    size_t enc_len = 0, list_len, media_len;
    if (!find(op, op_len, "body_encoding", &enc, &enc_len)) enc = NULL;
    if (find(op, op_len, "body_media", &media, &media_len)) gb_json_string(media, media_len, type);
    if (is_encoding(enc, enc_len, "form")) {
        if (!find(op, op_len, "body_fields", &list, &list_len)) list = "[]", list_len = 2;
        if (form_body(op, op_len, list, list_len, val, val_len, &r->body, out) != GB_OK) return GB_ERR;
        type->len = 0;
        gb_buf_puts(type, "application/x-www-form-urlencoded");
    } else if (is_encoding(enc, enc_len, "multipart")) {
        if (!find(op, op_len, "body_files", &list, &list_len)) list = "[]", list_len = 2;
        type->len = 0;
        if (multipart_body(list, list_len, val, val_len, &r->body, type, out) != GB_OK) return GB_ERR;
    } else if (is_encoding(enc, enc_len, "text")) {
        if (*val != '"' || gb_json_string(val, val_len, &r->body) != 0)
            return gb_error(out, "a text body must be a string");
        if (!type->len) gb_buf_puts(type, "text/plain; charset=utf-8");
    } else if (is_encoding(enc, enc_len, "binary")) {
        if (*val != '"' || b64_string(val, val_len, &r->body) != 0)
            return gb_error(out, "a binary body must be a base64 string");
        if (!type->len) gb_buf_puts(type, "application/octet-stream");
    } else {
        gb_buf_append(&r->body, val, val_len);
        if (!type->len) gb_buf_puts(type, "application/json");
    }
    return GB_OK;
}

static int build(const char *op, size_t op_len, const char *in, size_t in_len, request *r, gb_buf *out) {
    const char *val, *gql;
    size_t val_len, gql_len;
    gb_buf type = {0};
    if (!find(op, op_len, "method", &val, &val_len) || gb_json_string(val, val_len, &r->method) != 0)
        return gb_error(out, "operation descriptor without \"method\"");
    if (!find(op, op_len, "url", &val, &val_len) || gb_json_string(val, val_len, &r->url) != 0)
        return gb_error(out, "operation descriptor without \"url\"");
    if (!find(op, op_len, "path", &val, &val_len)) return gb_error(out, "operation descriptor without \"path\"");
    gb_buf tpl = {0};
    int rc = gb_json_string(val, val_len, &tpl) != 0 ? gb_error(out, "bad path template")
                                                       : build_path(op, op_len, tpl.data, tpl.len, in, in_len, &r->url, out);
    gb_buf_free(&tpl);
    if (rc != GB_OK) return rc;
    if (find(op, op_len, "query", &val, &val_len) &&
        build_pairs(op, op_len, val, val_len, in, in_len, "?", "&", ENC_PCT, &r->url, out) != GB_OK)
        return GB_ERR;
    if (find(op, op_len, "headers", &val, &val_len) &&
        build_headers(op, op_len, val, val_len, in, in_len, r->headers, &r->header_count, out) != GB_OK)
        return GB_ERR;
    if (find(op, op_len, "cookies", &val, &val_len) && val_len > 2) {
        gb_buf cookies = {0};
        if (build_pairs(op, op_len, val, val_len, in, in_len, "", "; ", ENC_PCT, &cookies, out) != GB_OK) return GB_ERR;
        if (cookies.len) {
            if (r->header_count >= MAX_HEADERS) return gb_error(out, "more than %d header parameters", MAX_HEADERS);
            gb_buf *pair = &r->headers[2 * r->header_count++];
            gb_buf_puts(&pair[0], "Cookie");
            gb_buf_append(&pair[1], cookies.data, cookies.len);
        }
        gb_buf_free(&cookies);
    }
    if (find(op, op_len, "graphql", &gql, &gql_len) && *gql == '{') {
        r->has_body = 1;
        gb_buf_puts(&type, "application/json");
        if (graphql_body(gql, gql_len, in, in_len, &r->body, out) != GB_OK) return GB_ERR;
    } else if (find(op, op_len, "body", &val, &val_len) && val_len == 4 && memcmp(val, "true", 4) == 0 &&
               find(in, in_len, "body", &val, &val_len)) {
        r->has_body = 1;
        if (build_body(op, op_len, val, val_len, r, &type, out) != GB_OK) return gb_buf_free(&type), GB_ERR;
    }
    if (r->has_body) {
        gb_buf *pair = &r->headers[2 * r->header_count++];
        gb_buf_puts(&pair[0], "Content-Type");
        gb_buf_append(&pair[1], type.data ? type.data : "", type.len);
    }
    gb_buf_free(&type);
    return GB_OK;
}

static int answer(const request *r, const gb_http_response *resp, const char *op, size_t op_len, gb_buf *out) {
    const char *gql;
    size_t gql_len;
    if (resp->status < 200 || resp->status > 299) {
        size_t shown = resp->body_len > 500 ? 500 : resp->body_len;
        return gb_error(out, "%s %s answered HTTP %d: %.*s", r->method.data, r->url.data, resp->status, (int)shown,
                        resp->body ? resp->body : "");
    }
    const char *p = gb__ws(resp->body, resp->body + resp->body_len);
    if (!resp->body || p == resp->body + resp->body_len) return gb_buf_puts(out, "null"), GB_OK;
    if (find(op, op_len, "graphql", &gql, &gql_len) && *gql == '{')
        return graphql_answer(resp->body, resp->body_len, gql, gql_len, out);
    if (plain_answer(resp, out)) return GB_OK; /* text as a string, other bytes as base64 */
    gb_buf_append(out, resp->body, resp->body_len);
    return GB_OK;
}

int gb_tool(const char *input, size_t len, gb_buf *out) {
    const char *op, *in;
    size_t op_len, in_len;
    if (gb_json_get(input, len, "operation", &op, &op_len) != 0 || gb_json_get(input, len, "input", &in, &in_len) != 0)
        return gb_error(out, "expected {\"operation\": ..., \"input\": ...}");
    request r = {0};
    int rc = build(op, op_len, in, in_len, &r, out);
    gb_header headers[MAX_HEADERS + 1];
    for (size_t i = 0; i < r.header_count; i++)
        headers[i] = (gb_header){r.headers[2 * i].data, r.headers[2 * i + 1].data ? r.headers[2 * i + 1].data : ""};
    if (rc == GB_OK) {
        gb_http_request req = {.method = r.method.data, .url = r.url.data, .headers = headers,
                               .header_count = r.header_count, .body = r.has_body ? (r.body.data ? r.body.data : "") : NULL,
                               .body_len = r.body.len};
        gb_http_response resp = {0};
        gb_buf reason = {0};
        gb_http_status st = gb_http_fetch(&req, &resp, &reason);
        if (st != GB_HTTP_OK) {
            rc = gb_error(out, "%s %s: %s: %.*s", r.method.data, r.url.data, gb_http_status_name(st), (int)reason.len,
                          reason.data ? reason.data : "");
        } else {
            rc = answer(&r, &resp, op, op_len, out);
            gb_http_response_free(&resp);
        }
        gb_buf_free(&reason);
    }
    gb_buf_free(&r.method), gb_buf_free(&r.url), gb_buf_free(&r.body);
    for (size_t i = 0; i < 2 * MAX_HEADERS + 2; i++) gb_buf_free(&r.headers[i]);
    return rc;
}
