/* weather: calls a JSON API over the host's http-fetch capability.
 *
 * GET {api}/v1/forecast?latitude=..&longitude=..&current_weather=true and
 * answer {"temperature_c", "windspeed_kmh"}. The host decides whether the
 * request may leave: without a grant the tool reports the host's reason. */
#include "glovebox.h"

static int number(const char *json, size_t len, const char *key, double *out) {
    const char *val;
    size_t val_len;
    return gb_json_get(json, len, key, &val, &val_len) == 0 && gb_json_number(val, val_len, out) == 0;
}

int gb_tool(const char *input, size_t len, gb_buf *out) {
    double lat, lon;
    if (!number(input, len, "latitude", &lat) || !number(input, len, "longitude", &lon))
        return gb_error(out, "input needs numbers \"latitude\" and \"longitude\"");
    gb_buf api = {0}, url = {0}, body = {0}, reason = {0};
    const char *val;
    size_t val_len;
    if (gb_json_get(input, len, "api", &val, &val_len) != 0 || gb_json_string(val, val_len, &api) != 0) {
        api.len = 0;
        gb_buf_puts(&api, "https://api.open-meteo.com");
    }
    gb_buf_printf(&url, "%s/v1/forecast?latitude=%.4f&longitude=%.4f&current_weather=true", api.data, lat, lon);
    int status = 0;
    gb_http_status st = gb_http_get(url.data, &status, &body, &reason);
    int rc = GB_OK;
    const char *cw;
    size_t cw_len;
    double temp, wind;
    if (st != GB_HTTP_OK) {
        rc = gb_error(out, "weather API unreachable (%s): %.*s", gb_http_status_name(st), (int)reason.len,
                      reason.data ? reason.data : "");
    } else if (status != 200) {
        rc = gb_error(out, "weather API answered HTTP %d", status);
    } else if (gb_json_get(body.data, body.len, "current_weather", &cw, &cw_len) != 0 ||
               !number(cw, cw_len, "temperature", &temp) || !number(cw, cw_len, "windspeed", &wind)) {
        rc = gb_error(out, "weather API answered without current_weather.temperature/windspeed");
    } else {
        gb_log(GB_INFO, "forecast for %.4f,%.4f", lat, lon);
        gb_buf_printf(out, "{\"temperature_c\": %.17g, \"windspeed_kmh\": %.17g}", temp, wind);
    }
    gb_buf_free(&api), gb_buf_free(&url), gb_buf_free(&body), gb_buf_free(&reason);
    return rc;
}
