// An evaluator tool: judges {tool, input, output} and answers {pass, reason}.
// The judged call's input steers it, so one artifact plays every part.
export default function judge({ tool, input, output }) {
  if (input && input.id === "judge-loops") for (;;) {}
  if (input && input.id === "judge-throws") throw new Error("the judge broke");
  if (input && input.id === "judge-mumbles") return { verdict: "fine" };
  if (input && String(input.id).startsWith("judge-quotes")) return { pass: false, reason: `it reads “${output.ok}”` };
  if (JSON.stringify(output).includes("secret")) return { pass: false, reason: `${tool} mentions a secret` };
  return { pass: true, reason: "nothing to object to" };
}
