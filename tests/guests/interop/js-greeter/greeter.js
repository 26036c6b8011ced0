// A component with its own world (wit/world.wit), built with jco componentize.
export function greet(name, tone) {
  if (name.trim() === "") {
    throw "name is empty"; // a result's err case
  }
  let text = `Hello, ${name}!`;
  if (tone === "loud") text = text.toUpperCase();
  return { text, length: text.length };
}
