/* mcp_elicit_enums: asks the MCP client's user for a form with the five
 * kinds of enum field of SEP-1330 (untitled and titled single-select, legacy enumNames,
 * untitled and titled multi-select) (elicitation/create) and answers
 * "Elicitation completed: <the client's ElicitResult>" as a text block (a fixture of the MCP
 * conformance suite, tests/servers/test_mcp_conformance.py). A refused or unanswered request
 * is a guest error. */
#include "glovebox.h"

#define FORM "{\"message\": \"Choose options\", \"requestedSchema\": {\"type\": \"object\", \"properties\": {\"untitledSingle\": {\"type\": \"string\", \"enum\": [\"option1\", \"option2\", \"option3\"]}, \"titledSingle\": {\"type\": \"string\", \"oneOf\": [{\"const\": \"value1\", \"title\": \"First Option\"}, {\"const\": \"value2\", \"title\": \"Second Option\"}, {\"const\": \"value3\", \"title\": \"Third Option\"}]}, \"legacyEnum\": {\"type\": \"string\", \"enum\": [\"opt1\", \"opt2\", \"opt3\"], \"enumNames\": [\"Option One\", \"Option Two\", \"Option Three\"]}, \"untitledMulti\": {\"type\": \"array\", \"items\": {\"type\": \"string\", \"enum\": [\"option1\", \"option2\", \"option3\"]}}, \"titledMulti\": {\"type\": \"array\", \"items\": {\"anyOf\": [{\"const\": \"value1\", \"title\": \"First Choice\"}, {\"const\": \"value2\", \"title\": \"Second Choice\"}, {\"const\": \"value3\", \"title\": \"Third Choice\"}]}}}}}"

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
