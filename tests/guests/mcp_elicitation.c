/* mcp_elicitation: asks the MCP client's user for a username and an email with {"message"}
 * (elicitation/create) and answers "User response: <the client's ElicitResult>" as a text block
 * (a fixture of the MCP conformance suite, tests/servers/test_mcp_conformance.py). A refused or
 * unanswered request is a guest error. */
#include "glovebox.h"

#define SCHEMA                                                                                      \
    "{\"type\": \"object\", \"properties\": {"                                                      \
    "\"username\": {\"type\": \"string\", \"description\": \"User's response\"}, "                  \
    "\"email\": {\"type\": \"string\", \"description\": \"User's email address\"}}, "               \
    "\"required\": [\"username\", \"email\"]}"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    const char *val;
    size_t val_len;
    gb_buf message = {0}, request = {0}, answer = {0}, reason = {0}, block = {0};
    if (gb_json_get(input, len, "message", &val, &val_len) != 0 || gb_json_string(val, val_len, &message) != 0)
        return gb_error(out, "the input needs a string message");
    gb_buf_puts(&request, "{\"message\": ");
    gb_buf_json_string(&request, message.data ? message.data : "", message.len);
    gb_buf_puts(&request, ", \"requestedSchema\": " SCHEMA "}");
    gb_client_status st = gb_client_elicit(request.data, &answer, &reason);
    if (st != GB_CLIENT_OK)
        return gb_error(out, "elicitation: %s: %.*s", gb_client_status_name(st), (int)reason.len, reason.data);
    gb_buf_puts(&block, "User response: ");
    gb_buf_append(&block, answer.data, answer.len);
    gb_buf_puts(out, "{\"content\": [{\"type\": \"text\", \"text\": ");
    gb_buf_json_string(out, block.data, block.len);
    gb_buf_puts(out, "}]}");
    return GB_OK;
}
