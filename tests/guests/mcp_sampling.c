/* mcp_sampling: asks the MCP client's model to answer {"prompt"} (sampling/createMessage,
 * maxTokens 100) and answers "LLM response: <its text>" as a text block (a fixture of the MCP
 * conformance suite, tests/servers/test_mcp_conformance.py; the client capability, granted by
 * the policy, see docs/guide/mcp.md). A refused or unanswered request is a guest error. */
#include "glovebox.h"

int gb_tool(const char *input, size_t len, gb_buf *out) {
    const char *val, *content, *text;
    size_t val_len, content_len, text_len;
    gb_buf prompt = {0}, request = {0}, answer = {0}, reason = {0}, said = {0}, block = {0};
    if (gb_json_get(input, len, "prompt", &val, &val_len) != 0 || gb_json_string(val, val_len, &prompt) != 0)
        return gb_error(out, "the input needs a string prompt");
    gb_buf_puts(&request, "{\"messages\": [{\"role\": \"user\", \"content\": {\"type\": \"text\", \"text\": ");
    gb_buf_json_string(&request, prompt.data ? prompt.data : "", prompt.len);
    gb_buf_puts(&request, "}}], \"maxTokens\": 100}");
    gb_client_status st = gb_client_sample(request.data, &answer, &reason);
    if (st != GB_CLIENT_OK)
        return gb_error(out, "sampling: %s: %.*s", gb_client_status_name(st), (int)reason.len, reason.data);
    if (gb_json_get(answer.data, answer.len, "content", &content, &content_len) != 0 ||
        gb_json_get(content, content_len, "text", &text, &text_len) != 0 || gb_json_string(text, text_len, &said) != 0)
        return gb_error(out, "the client's answer has no text content");
    gb_buf_puts(&block, "LLM response: ");
    gb_buf_append(&block, said.data ? said.data : "", said.len);
    gb_buf_puts(out, "{\"content\": [{\"type\": \"text\", \"text\": ");
    gb_buf_json_string(out, block.data, block.len);
    gb_buf_puts(out, "}]}");
    return GB_OK;
}
