// ts-text-stats: the text-stats example in TypeScript. A pure function.
import { ToolError } from "glovebox";

interface Input {
  text: string;
}

interface Stats {
  characters: number;
  words: number;
  lines: number;
  bytes: number;
}

function utf8Length(text: string): number {
  let bytes = 0;
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    bytes += code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
  }
  return bytes;
}

export default function textStats(input: Input): Stats {
  if (typeof input.text !== "string") throw new ToolError('input must be an object with a string field "text"');
  const { text } = input;
  const newlines = text.split("\n").length - 1;
  return {
    characters: [...text].length,
    words: text.split(/[ \n\t\r]+/).filter((word) => word.length > 0).length,
    lines: newlines + (text.length > 0 && !text.endsWith("\n") ? 1 : 0),
    bytes: utf8Length(text),
  };
}
