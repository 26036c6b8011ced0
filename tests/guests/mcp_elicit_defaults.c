/* mcp_elicit_defaults: asks the MCP client's user for a form whose fields
 * all have defaults (a string, an integer, a number, an enum and a boolean: SEP-1034) (elicitation/create) and answers
 * "Elicitation completed: <the client's ElicitResult>" as a text block (a fixture of the MCP
 * conformance suite, tests/servers/test_mcp_conformance.py). A refused or unanswered request
 * is a guest error. */
#include "glovebox.h"

#define FORM "{\"message\": \"Test client default value handling - please accept with defaults\", \"requestedSchema\": {\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"description\": \"User name\", \"default\": \"John Doe\"}, \"age\": {\"type\": \"integer\", \"description\": \"User age\", \"default\": 30}, \"score\": {\"type\": \"number\", \"description\": \"User score\", \"default\": 95.5}, \"status\": {\"type\": \"string\", \"description\": \"User status\", \"enum\": [\"active\", \"inactive\", \"pending\"], \"default\": \"active\"}, \"verified\": {\"type\": \"boolean\", \"description\": \"Verification status\", \"default\": true}}}}"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    (void)input;
    (void)len;
    gb_buf answer = {0}, reason = {0}, block = {0};
    gb_client_status st = gb_client_elicit(FORM, &answer, &reason);
    if (st != GB_CLIENT_OK)
        return gb_error(out, "elicitation: %s: %.*s", gb_client_status_name(st), (int)reason.len, reason.data);
    gb_buf_puts(&block, "Elicitation completed: ");
    gb_buf_append(&block, answer.data, answer.len);
    gb_buf_puts(out, "{\"content\": [{\"type\": \"text\", \"text\": ");
    gb_buf_json_string(out, block.data, block.len);
    gb_buf_puts(out, "}]}");
    return GB_OK;
}
