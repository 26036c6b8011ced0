/* calc: evaluate an arithmetic expression (+ - * / ^, parentheses, unary minus).
 * Bad expressions are answered with a guest error that says where and why. */
#include <math.h>
#include "glovebox.h"

typedef struct {
    const char *s;
    size_t pos, len;
    const char *error;
    size_t error_pos;
} parser;

static double expr(parser *p);

static void skip(parser *p) {
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t')) p->pos++;
}

static int peek(parser *p) {
    skip(p);
    return p->pos < p->len ? p->s[p->pos] : 0;
}

static double fail(parser *p, const char *why) {
    if (!p->error) {
        p->error = why;
        p->error_pos = p->pos;
    }
    return 0;
}

static double primary(parser *p) {
    int c = peek(p);
    if (c == '(') {
        p->pos++;
        double v = expr(p);
        if (peek(p) != ')') return fail(p, "expected ')'");
        p->pos++;
        return v;
    }
    if (c == '-') {
        p->pos++;
        return -primary(p);
    }
    if ((c >= '0' && c <= '9') || c == '.') {
        char tmp[64];
        size_t n = 0;
        while (p->pos < p->len && n < sizeof tmp - 1 &&
               ((p->s[p->pos] >= '0' && p->s[p->pos] <= '9') || p->s[p->pos] == '.' || p->s[p->pos] == 'e'))
            tmp[n++] = p->s[p->pos++];
        tmp[n] = '\0';
        char *end;
        double v = strtod(tmp, &end);
        if (*end) return fail(p, "malformed number");
        return v;
    }
    return fail(p, c ? "expected a number or '('" : "unexpected end of expression");
}

static double power(parser *p) {
    double base = primary(p);
    if (peek(p) == '^') {
        p->pos++;
        return pow(base, power(p));
    }
    return base;
}

static double term(parser *p) {
    double v = power(p);
    for (int c; !p->error && ((c = peek(p)) == '*' || c == '/');) {
        p->pos++;
        size_t at = p->pos;
        double rhs = power(p);
        if (c == '/' && rhs == 0) {
            p->pos = at;
            return fail(p, "division by zero");
        }
        v = c == '*' ? v * rhs : v / rhs;
    }
    return v;
}

static double expr(parser *p) {
    double v = term(p);
    for (int c; !p->error && ((c = peek(p)) == '+' || c == '-');) {
        p->pos++;
        double rhs = term(p);
        v = c == '+' ? v + rhs : v - rhs;
    }
    return v;
}

int gb_tool(const char *input, size_t input_len, gb_buf *out) {
    const char *val;
    size_t val_len;
    gb_buf text = {0};
    if (gb_json_get(input, input_len, "expression", &val, &val_len) != 0 || gb_json_string(val, val_len, &text) != 0)
        return gb_error(out, "input must be an object with a string field \"expression\"");
    parser p = {text.data ? text.data : "", 0, text.len, NULL, 0};
    double v = expr(&p);
    if (!p.error && peek(&p) != 0) fail(&p, "unexpected character");
    if (p.error)
        return gb_error(out, "cannot evaluate %s at column %zu: %s", p.error, p.error_pos + 1,
                        text.data ? text.data : "");
    if (!isfinite(v)) return gb_error(out, "the result is not a finite number");
    gb_buf_printf(out, "{\"value\": %.17g}", v);
    gb_buf_free(&text);
    return GB_OK;
}
