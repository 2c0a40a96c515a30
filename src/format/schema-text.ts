/**
 * The text of the published JSON Schemas (`kerncap schema NAME`, the MCP tools' output schemas;
 * src/format/documents.ts jsonSchemaOf): the titles of the schemas that are not a verb's
 * document, and every field's description.
 */
import SCHEMA_DESCRIPTIONS from "./schema-descriptions.json";

/**
 * Set each field's `description` in the generated JSON Schema of schema `name` (PATH → text:
 * src/format/schema-descriptions.json, made from the valibot schemas' doc comments by
 * scripts/make-schema-descriptions.ts). PATH: keys joined with ".", "[]" an array's items, "{}" a
 * record's values; every alternative of an anyOf/oneOf/allOf that holds the key gets it.
 */
export function describeFields(js: Record<string, unknown>, name: string): void {
  const descriptions = (SCHEMA_DESCRIPTIONS as Record<string, Record<string, string>>)[name] ?? {};
  type Node = Record<string, any>;
  const alternatives = (n: Node): Node[] => [n, ...["anyOf", "oneOf", "allOf"].flatMap((k) => (Array.isArray(n[k]) ? n[k].flatMap(alternatives) : []))];
  for (const [path, text] of Object.entries(descriptions)) {
    let nodes: Node[] = [js];
    for (const token of path.split(/\.|(?=\[\])|(?=\{\})/).filter(Boolean)) {
      const step = (n: Node): Node[] =>
        token === "[]"
          ? n.items
            ? [n.items]
            : []
          : token === "{}"
            ? n.additionalProperties && typeof n.additionalProperties === "object"
              ? [n.additionalProperties]
              : []
            : n.properties?.[token]
              ? [n.properties[token]]
              : [];
      nodes = nodes.flatMap((n) => alternatives(n).flatMap(step));
    }
    for (const n of nodes) n.description ??= text;
  }
}

/** Titles of the schemas that are not `kerncap VERB --json`'s document. */
export const TITLES: Record<string, string> = {
  manifest: "kerncap capture manifest (kerncap.json)",
  "capture-set": "index of a folder of several captures (kerncap-captures.json)",
  "judge-settings": "a capture's judging settings (kerncap-judge.json, written by kerncap judge)",
  "candidate-list": "the candidates of kerncap eval --candidate-list FILE, each with its label",
  "eval-shard": "a line of kerncap eval's --jsonl file: this shard ran and held no candidate (--shard K/N; --merge counts it)",
  "validate-watch": "kerncap validate --watch --json (one document per line)",
  "validate-build": "kerncap validate --build-only --json (the rebuild alone, no replay)",
  "check-record": "one line of kerncap check's results file (RESULTS/results.jsonl)",
  "eval-record": "one candidate on one input: a line of kerncap eval's --jsonl file and of its --json output",
  error: "kerncap VERB --json when the verb fails (exit 2)",
  file: "kerncap mcp tool read_file",
  files: "kerncap mcp tool list_files",
  edit: "kerncap mcp tool edit_file",
  version: "kerncap --version --json",
  eval: "kerncap eval --json: its last line (the lines before it are eval-record documents, one per candidate and input)",
};
