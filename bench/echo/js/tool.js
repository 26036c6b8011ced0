// echo: answers {"text": ...} with the text it was given.
export default function echo(input) {
  return { text: input.text };
}
