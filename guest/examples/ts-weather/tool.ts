// ts-weather: the weather example in TypeScript, over the host's http-fetch.
//
// GET {api}/v1/forecast?latitude=..&longitude=..&current_weather=true and answer
// {temperature_c, windspeed_kmh}. The host decides whether the request may leave:
// without a grant, http.get rejects with an HttpError carrying the host's reason.
import { http, log, ToolError } from "glovebox";

interface Input {
  latitude: number;
  longitude: number;
  api?: string;
}

interface Forecast {
  current_weather?: { temperature?: number; windspeed?: number };
}

export default async function weather(input: Input): Promise<{ temperature_c: number; windspeed_kmh: number }> {
  const api = input.api ?? "https://api.open-meteo.com";
  const query = `latitude=${input.latitude.toFixed(4)}&longitude=${input.longitude.toFixed(4)}&current_weather=true`;
  const response = await http.get(`${api}/v1/forecast?${query}`);
  if (response.status !== 200) throw new ToolError(`weather API answered HTTP ${response.status}`);
  const current = (response.json() as Forecast).current_weather;
  if (typeof current?.temperature !== "number" || typeof current.windspeed !== "number") {
    throw new ToolError("weather API answered without current_weather.temperature/windspeed");
  }
  log("info", `forecast for ${input.latitude.toFixed(4)},${input.longitude.toFixed(4)}`);
  return { temperature_c: current.temperature, windspeed_kmh: current.windspeed };
}
