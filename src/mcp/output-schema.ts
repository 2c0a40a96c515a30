/**
 * What kerncap mcp offers as each tool's outputSchema (src/mcp/server.ts tools/list): the tool's
 * document or the error document, described, and cut to what an agent needs in its context.
 */
import { DOCUMENTS, type DocumentName } from "../format/documents.ts";
import { describeFields } from "../format/schema-text.ts";
import { toolSchema } from "./tools.ts";

/**
 * A tool's outputSchema: its document, or the error document (what every tool returns with
 * isError), each field with its description (src/format/schema-text.ts), cut below its top-level
 * fields (OUTPUT_SCHEMA_DEPTH; the error document below its `error` object's fields): an object,
 * array or union nested deeper is one `{type, description}` node that takes any value of that type
 * and names `kerncap schema NAME` for its fields. What a call returns still conforms; tools/list
 * took 69 KB of an agent's context where the whole schemas took 139 KB (inspect's carried the
 * whole manifest; a new user's finding).
 */
export function outputSchema(doc: DocumentName): { type: "object"; [k: string]: unknown } {
  const described = (name: DocumentName) => {
    const js = toolSchema(DOCUMENTS[name]);
    describeFields(js, name);
    return shallowSchema(js, 0, name);
  };
  return { type: "object", anyOf: [described(doc), described("error")] };
}

/** How many levels of `properties` a tool's outputSchema keeps before a nested structure is one node (outputSchema; the error document: 2). */
export const OUTPUT_SCHEMA_DEPTH = 1;

/** outputSchema's cut of a JSON Schema node at `depth` levels of properties. */
function shallowSchema(node: unknown, depth: number, doc: DocumentName): unknown {
  if (!node || typeof node !== "object" || Array.isArray(node)) return node;
  const n = node as Record<string, unknown>;
  const nested = "properties" in n || "items" in n || "anyOf" in n || "oneOf" in n;
  // the error document whole (its code's enum, message, hint, details: what to do next), every other one to its top-level fields
  if (depth >= (doc === "error" ? 2 : OUTPUT_SCHEMA_DEPTH) && nested) {
    const type = typeof n.type === "string" || Array.isArray(n.type) ? { type: n.type } : {};
    const more = `(its fields: kerncap schema ${doc})`;
    return { ...type, description: typeof n.description === "string" ? `${n.description} ${more}` : more };
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(n)) {
    if (k === "properties" && v && typeof v === "object") out[k] = Object.fromEntries(Object.entries(v).map(([p, x]) => [p, shallowSchema(x, depth + 1, doc)]));
    else if ((k === "items" || k === "additionalProperties") && v && typeof v === "object") out[k] = shallowSchema(v, depth + 1, doc);
    else if ((k === "anyOf" || k === "oneOf" || k === "allOf") && Array.isArray(v)) out[k] = v.map((x) => shallowSchema(x, depth, doc));
    else out[k] = v;
  }
  return out;
}
