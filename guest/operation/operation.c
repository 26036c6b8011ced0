/* operation: the generic HTTP-operation guest behind `glovebox import openapi|graphql`.
 *
 * The host calls it with {"operation": <descriptor>, "input": <validated input>}.
 * The descriptor (written by the importer, stored in the tool's manifest) says:
 *
 *   method       "GET", "POST", ...
 *   url          the server's base URL, e.g. "https://api.example.com/v1"
 *   path         the path template, e.g. "/pets/{petId}"
 *   path_params  input fields substituted into the template, percent-encoded
 *                (every byte outside RFC 3986's unreserved A-Z a-z 0-9 - . _ ~, so "a/b" stays in
 *                one segment; a "." or ".." value is sent as it is and the host refuses the dot segment)
 *   query        input fields sent as query parameters (arrays repeat the name)
 *   query_join   {"name": "csv" | "space" | "pipe"}: a query array sent as one value, joined
 *                by ",", "%20" or "%7C" (explode: false)
 *   headers      input fields sent as request headers
 *   body         true: the input field "body" is sent as the request body, as body_encoding says:
 *                "json" (the default), "text" (a string sent as it is, text/plain) or "form"
 *                (application/x-www-form-urlencoded: the fields body_fields of the object,
 *                each percent-encoded, an array repeating its name)
 *   graphql      {"query": "<document>", "field": "<name>"} for a GraphQL field:
 *                POST {"query": ..., "variables": <input>} and answer data.<field>
 *                ({"data": data.<field>, "errors": [...]} when errors come with a value)
 *
 * The request goes through the host's http-fetch, so the call's grant, address
 * checks, limits, secrets and audit apply to it. A 2xx answer's JSON body is
 * the output (an empty body is null); any other status is a guest error naming it. */
#include "glovebox.h"

#define MAX_HEADERS 32

static int find(const char *json, size_t len, const char *key, const char **val, size_t *val_len) {
    return json && gb_json_get(json, len, key, val, val_len) == 0;
}

/* Iterate an array: *p starts at '['; returns 1 with the next element in val. */
static void encode(gb_buf *out, const char *s, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
            c == '_' || c == '~') {
            gb_buf_append(out, (const char *)&c, 1);
        } else {
            char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
            gb_buf_append(out, esc, 3);
        }
    }
}

/* A scalar JSON value as text: a string decoded, anything else verbatim. */
static int scalar(const char *val, size_t len, gb_buf *out) {
    if (len && (*val == '{' || *val == '[')) return -1;
    if (len && *val == '"') return gb_json_string(val, len, out);
    return gb_buf_append(out, val, len);
}

static int encoded_scalar(const char *val, size_t len, gb_buf *out) {
    gb_buf text = {0};
    int rc = scalar(val, len, &text);
    if (rc == 0) encode(out, text.data ? text.data : "", text.len);
    gb_buf_free(&text);
    return rc;
}

static int build_path(const char *tpl, size_t tpl_len, const char *in, size_t in_len, gb_buf *url, gb_buf *out) {
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
        if (!find(in, in_len, name, &val, &val_len)) return gb_error(out, "path parameter \"%s\" is missing", name);
        if (encoded_scalar(val, val_len, url) != 0)
            return gb_error(out, "path parameter \"%s\" must be a string, number or boolean", name);
        p = close + 1;
    }
    return GB_OK;
}

/* name=value, after `lead` ('?' for a query, nothing for a form body) first and '&' after that. */
static void pair(gb_buf *out, int *first, const char *lead, const char *name, size_t name_len, const char *val,
                 size_t len) {
    gb_buf_puts(out, *first ? lead : "&");
    *first = 0;
    encode(out, name, name_len);
    gb_buf_append(out, "=", 1);
    encoded_scalar(val, len, out);
}

static void query_pair(gb_buf *url, int *first, const char *name, size_t name_len, const char *val, size_t len) {
    pair(url, first, "?", name, name_len, val, len);
}

/* The separator of a query array sent as one value ("csv", "space", "pipe" in joins), or NULL (exploded). */
static const char *joiner(const char *joins, size_t joins_len, const char *name) {
    const char *val;
    size_t val_len;
    if (!joins || !find(joins, joins_len, name, &val, &val_len)) return NULL;
    if (val_len == 5 && memcmp(val, "\"csv\"", 5) == 0) return ",";
    if (val_len == 7 && memcmp(val, "\"space\"", 7) == 0) return "%20";
    if (val_len == 6 && memcmp(val, "\"pipe\"", 6) == 0) return "%7C";
    return NULL;
}

static int build_query(const char *names, size_t names_len, const char *joins, size_t joins_len, const char *in,
                       size_t in_len, gb_buf *url, gb_buf *out) {
    const char *p = names, *end = names + names_len, *item, *val, *elem;
    size_t item_len, val_len, elem_len;
    int first = 1;
    while (gb_json_next(&p, end, &item, &item_len) == 0) {
        gb_buf name = {0};
        if (gb_json_string(item, item_len, &name) != 0 || !name.data) return gb_error(out, "bad query name");
        if (find(in, in_len, name.data, &val, &val_len)) {
            const char *sep = joiner(joins, joins_len, name.data);
            if (*val == '[' && sep) {
                const char *q = val;
                int first_elem = 1;
                gb_buf_puts(url, first ? "?" : "&");
                first = 0;
                encode(url, name.data, name.len);
                gb_buf_append(url, "=", 1);
                while (gb_json_next(&q, val + val_len, &elem, &elem_len) == 0) {
                    if (!first_elem) gb_buf_puts(url, sep);
                    first_elem = 0;
                    encoded_scalar(elem, elem_len, url);
                }
            } else if (*val == '[') {
                const char *q = val;
                while (gb_json_next(&q, val + val_len, &elem, &elem_len) == 0)
                    query_pair(url, &first, name.data, name.len, elem, elem_len);
            } else if (*val != '{' && !(val_len == 4 && memcmp(val, "null", 4) == 0)) {
                query_pair(url, &first, name.data, name.len, val, val_len);
            }
        }
        gb_buf_free(&name);
    }
    return GB_OK;
}

static int build_headers(const char *names, size_t names_len, const char *in, size_t in_len, gb_buf *store,
                         size_t *count, gb_buf *out) {
    const char *p = names, *end = names + names_len, *item, *val;
    size_t item_len, val_len;
    while (gb_json_next(&p, end, &item, &item_len) == 0) {
        gb_buf name = {0};
        if (gb_json_string(item, item_len, &name) != 0 || !name.data) return gb_error(out, "bad header name");
        if (find(in, in_len, name.data, &val, &val_len)) {
            if (*count >= MAX_HEADERS) return gb_error(out, "more than %d header parameters", MAX_HEADERS);
            gb_buf *pair = &store[2 * (*count)];
            gb_buf_append(&pair[0], name.data, name.len);
            if (scalar(val, val_len, &pair[1]) != 0 || !pair[1].data) gb_buf_append(&pair[1], "", 0);
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

/* An application/x-www-form-urlencoded body: name=value for each of `fields` present in `obj`. */
static int form_body(const char *fields, size_t fields_len, const char *obj, size_t obj_len, gb_buf *body,
                     gb_buf *out) {
    const char *p = fields, *end = fields + fields_len, *item, *val, *elem;
    size_t item_len, val_len, elem_len;
    int first = 1;
    if (!obj_len || *obj != '{') return gb_error(out, "a form body must be an object");
    while (gb_json_next(&p, end, &item, &item_len) == 0) {
        gb_buf name = {0};
        if (gb_json_string(item, item_len, &name) != 0 || !name.data) return gb_error(out, "bad form field name");
        if (find(obj, obj_len, name.data, &val, &val_len) && !(val_len == 4 && memcmp(val, "null", 4) == 0)) {
            if (*val == '[') {
                const char *q = val;
                while (gb_json_next(&q, val + val_len, &elem, &elem_len) == 0) {
                    pair(body, &first, "", name.data, name.len, elem, elem_len);
                }
            } else if (*val != '{') {
                pair(body, &first, "", name.data, name.len, val, val_len);
            }
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

static int build(const char *op, size_t op_len, const char *in, size_t in_len, request *r, gb_buf *out) {
    const char *val, *gql, *content_type = "application/json";
    size_t val_len, gql_len;
    if (!find(op, op_len, "method", &val, &val_len) || gb_json_string(val, val_len, &r->method) != 0)
        return gb_error(out, "operation descriptor without \"method\"");
    if (!find(op, op_len, "url", &val, &val_len) || gb_json_string(val, val_len, &r->url) != 0)
        return gb_error(out, "operation descriptor without \"url\"");
    if (!find(op, op_len, "path", &val, &val_len)) return gb_error(out, "operation descriptor without \"path\"");
    gb_buf tpl = {0};
    int rc = gb_json_string(val, val_len, &tpl) != 0 ? gb_error(out, "bad path template")
                                                       : build_path(tpl.data, tpl.len, in, in_len, &r->url, out);
    gb_buf_free(&tpl);
    if (rc != GB_OK) return rc;
    const char *joins = NULL;
    size_t joins_len = 0;
    if (!find(op, op_len, "query_join", &joins, &joins_len)) joins = NULL;
    if (find(op, op_len, "query", &val, &val_len) &&
        build_query(val, val_len, joins, joins_len, in, in_len, &r->url, out) != GB_OK)
        return GB_ERR;
    if (find(op, op_len, "headers", &val, &val_len) &&
        build_headers(val, val_len, in, in_len, r->headers, &r->header_count, out) != GB_OK)
        return GB_ERR;
    if (find(op, op_len, "graphql", &gql, &gql_len) && *gql == '{') {
        r->has_body = 1;
        if (graphql_body(gql, gql_len, in, in_len, &r->body, out) != GB_OK) return GB_ERR;
    } else if (find(op, op_len, "body", &val, &val_len) && val_len == 4 && memcmp(val, "true", 4) == 0 &&
               find(in, in_len, "body", &val, &val_len)) {
        r->has_body = 1;
        const char *enc, *fields;
        size_t enc_len, fields_len;
        int has_enc = find(op, op_len, "body_encoding", &enc, &enc_len);
        if (has_enc && enc_len == 6 && memcmp(enc, "\"form\"", 6) == 0) {
            if (!find(op, op_len, "body_fields", &fields, &fields_len)) fields = "[]", fields_len = 2;
            if (form_body(fields, fields_len, val, val_len, &r->body, out) != GB_OK) return GB_ERR;
            content_type = "application/x-www-form-urlencoded";
        } else if (has_enc && enc_len == 6 && memcmp(enc, "\"text\"", 6) == 0) {
            if (*val != '"' || gb_json_string(val, val_len, &r->body) != 0)
                return gb_error(out, "a text/plain body must be a string");
            content_type = "text/plain; charset=utf-8";
        } else {
            gb_buf_append(&r->body, val, val_len);
        }
    }
    if (r->has_body) {
        gb_buf *pair = &r->headers[2 * r->header_count++];
        gb_buf_puts(&pair[0], "Content-Type");
        gb_buf_puts(&pair[1], content_type);
    }
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
