// What `glovebox build` runs on a JavaScript or TypeScript tool with no input
// schema in its manifest: the TypeScript checker (pinned in package.json) reads
// the type of the default export's first parameter, from TypeScript annotations
// or, in a .js file, from JSDoc (`@param {{text: string}} input`), and this
// turns it into a JSON Schema.
//
//   node schema.cjs TYPESCRIPT_DIR GLOVEBOX_D_TS TOOL_FILE
//
// Prints {"schema": <schema or null>, "description": "..."} on success, or
// {"error": "file:line:col: message"} for a type JSON cannot carry (a function,
// a Date, a bigint, a recursive type...), so the author can fix it or give the
// schema in glovebox.toml. null means "nothing to go on" (no parameter, or
// `any`): the tool then accepts any input, as before.
"use strict";

const [, , typescriptDir, helperTypes, file] = process.argv;
const ts = require(typescriptDir);

class Unsupported extends Error {}

function main() {
  const options = {
    allowJs: true,
    checkJs: true,
    noEmit: true,
    strict: true,
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    lib: ["lib.es2023.d.ts"],
    types: [],
    paths: { glovebox: [helperTypes] },
  };
  const program = ts.createProgram([file], options);
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  const module = source && checker.getSymbolAtLocation(source);
  const exported = module && checker.getExportsOfModule(module).find((s) => s.escapedName === "default");
  if (!exported) return { schema: null, description: "" };
  const target = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
  const declaration = target.valueDeclaration || (target.declarations || [])[0] || source;
  const signatures = checker.getTypeOfSymbolAtLocation(target, declaration).getCallSignatures();
  if (signatures.length === 0) return { schema: null, description: "" };
  const signature = signatures[0];
  const description = ts.displayPartsToString(signature.getDocumentationComment(checker)).split(/\n\s*\n/)[0];
  const parameter = signature.getParameters()[0];
  if (!parameter) return { schema: null, description };
  const where = parameter.valueDeclaration || declaration;
  const type = checker.getTypeOfSymbolAtLocation(parameter, where);
  try {
    const schema = convert(checker, type, []);
    return { schema: schema === true ? null : schema, description };
  } catch (error) {
    if (!(error instanceof Unsupported)) throw error;
    const { line, character } = source.getLineAndCharacterOfPosition(where.getStart());
    return { error: `${file}:${line + 1}:${character + 1}: ${error.message}` };
  }
}

function convert(checker, type, seen) {
  const F = ts.TypeFlags;
  const f = type.flags;
  const shown = () => checker.typeToString(type);
  if (f & (F.Any | F.Unknown)) return true;
  if (f & F.String) return { type: "string" };
  if (f & F.Number) return { type: "number" };
  if (f & F.Boolean) return { type: "boolean" };
  if (f & F.Null) return { type: "null" };
  if (f & F.StringLiteral || f & F.NumberLiteral) return { const: type.value };
  if (f & F.BooleanLiteral) return { const: type.intrinsicName === "true" };
  if (f & (F.BigInt | F.BigIntLiteral)) throw new Unsupported(`the input type ${shown()} is a bigint, which JSON has not`);
  if (f & (F.Undefined | F.Void | F.Never)) throw new Unsupported(`the input type ${shown()} is not a JSON value`);
  if (type.isUnion()) return union(checker, type, seen);
  if (seen.includes(type)) throw new Unsupported(`the input type ${shown()} is recursive: give input_schema in glovebox.toml`);
  if (seen.length > 32) throw new Unsupported(`the input type nests deeper than 32 levels`);
  const inner = [...seen, type];
  if (checker.isTupleType(type)) {
    const items = checker.getTypeArguments(type).map((t) => convert(checker, t, inner));
    return { type: "array", prefixItems: items, minItems: type.target.minLength, maxItems: items.length };
  }
  if (checker.isArrayType(type)) return { type: "array", items: convert(checker, checker.getTypeArguments(type)[0], inner) };
  if (f & (F.Object | F.Intersection)) return object(checker, type, inner, shown);
  throw new Unsupported(`the input type ${shown()} is not a JSON value`);
}

function union(checker, type, seen) {
  const members = type.types.filter((t) => !(t.flags & (ts.TypeFlags.Undefined | ts.TypeFlags.Void)));
  const booleans = members.filter((t) => t.flags & ts.TypeFlags.BooleanLiteral);
  const rest = booleans.length === 2 ? members.filter((t) => !booleans.includes(t)) : members;
  const schemas = rest.map((t) => convert(checker, t, seen));
  if (booleans.length === 2) schemas.push({ type: "boolean" });
  if (schemas.some((s) => s === true)) return true;
  if (schemas.every((s) => "const" in s)) return { enum: schemas.map((s) => s.const) };
  return schemas.length === 1 ? schemas[0] : { anyOf: schemas };
}

const NOT_JSON = new Set(["Date", "Map", "Set", "WeakMap", "WeakSet", "RegExp", "Promise", "Uint8Array", "ArrayBuffer"]);

function object(checker, type, seen, shown) {
  const name = type.symbol && type.symbol.escapedName;
  if (NOT_JSON.has(name)) throw new Unsupported(`the input type ${shown()} is not a JSON value (JSON has no ${name})`);
  if (type.getCallSignatures().length || type.getConstructSignatures().length) {
    throw new Unsupported(`the input type ${shown()} is a function, which JSON has not`);
  }
  const properties = {};
  const required = [];
  for (const prop of checker.getPropertiesOfType(type)) {
    const declaration = prop.valueDeclaration || (prop.declarations || [])[0];
    const propType = declaration ? checker.getTypeOfSymbolAtLocation(prop, declaration) : checker.getTypeOfSymbol(prop);
    let schema = convert(checker, propType, seen);
    const doc = ts.displayPartsToString(prop.getDocumentationComment(checker));
    if (doc) schema = schema === true ? { description: doc } : { ...schema, description: doc };
    properties[prop.name] = schema;
    if (!(prop.flags & ts.SymbolFlags.Optional)) required.push(prop.name);
  }
  const index = checker.getIndexInfoOfType(type, ts.IndexKind.String);
  const schema = { type: "object", properties };
  if (required.length) schema.required = required;
  schema.additionalProperties = index ? convert(checker, index.type, seen) : false;
  return schema;
}

try {
  process.stdout.write(JSON.stringify(main()));
} catch (error) {
  process.stdout.write(JSON.stringify({ error: `${file}: cannot read the input type: ${error.message}` }));
}
