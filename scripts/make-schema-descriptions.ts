#!/usr/bin/env bun
/**
 * Write src/format/schema-descriptions.json: the description of each field of every published
 * JSON Schema (`kerncap schema NAME`, the MCP tools' output schemas), taken from the doc comment
 * (`/** … *\/`) above the field in the valibot schema that defines it (src/format/documents.ts,
 * manifest.ts and what they use). jsonSchemaOf (src/format/documents.ts, through src/format/schema-text.ts) sets them as each JSON
 * Schema node's `description`, so that the comments stay the one place a field is explained.
 * `--check`: write nothing; exit 1 when the file is not what the sources make now (the test
 * test/cpu/format/schema-descriptions.test.ts does the same). Run it after changing a schema:
 *   node_modules/.bin/bun scripts/make-schema-descriptions.ts
 *
 * Output: { NAME: { PATH: text } }, PATH the field's path in the document: object keys joined with
 * ".", an array's items as "[]", a record's values as "{}" (`candidates[].timing.speedup`).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";

const ROOT = join(import.meta.dir, "..");
const OUT = join(ROOT, "src/format/schema-descriptions.json");

/** The schemas `kerncap schema` prints: the DOCUMENTS object's entries, and the named ones. */
const ROOTS: { file: string; name: string; schema: string }[] = [
  { file: "src/format/manifest.ts", name: "manifest", schema: "Manifest" },
  { file: "src/format/capture-set.ts", name: "capture-set", schema: "CaptureSet" },
  { file: "src/format/judge-file.ts", name: "judge-settings", schema: "JudgeFile" },
  { file: "src/format/eval-record.ts", name: "eval-shard", schema: "EvalShardMarker" },
];

function program(): ts.Program {
  const config = ts.readConfigFile(join(ROOT, "tsconfig.json"), ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT);
  return ts.createProgram({ rootNames: [join(ROOT, "src/format/documents.ts"), ...ROOTS.map((r) => join(ROOT, r.file))], options: parsed.options });
}

/** The text of the doc comment right above `node` (its lines joined, the stars taken off), or undefined. */
function docComment(node: ts.Node, sf: ts.SourceFile): string | undefined {
  const ranges = ts.getLeadingCommentRanges(sf.text, node.getFullStart()) ?? [];
  const last = ranges.filter((r) => sf.text.startsWith("/**", r.pos)).pop();
  if (!last) return undefined;
  const body = sf.text.slice(last.pos + 3, last.end - 2);
  return body
    .split("\n")
    .map((l) => l.replace(/^\s*\* ?/, "").trim())
    .filter(Boolean)
    .join(" ")
    .replace(/\s*\((?:src|c|scripts)\/[^()]*\)/g, "") // "(src/eval/candidates.ts candidateId)": the developers' pointer, not the reader's
    .trim();
}

class Walker {
  readonly out: Record<string, string> = {};
  private readonly seen = new Set<ts.Node>();
  constructor(private readonly checker: ts.TypeChecker) {}

  /** The initializer of the const an identifier (or `X.entries`) names, through imports. */
  private resolve(e: ts.Expression): ts.Expression | undefined {
    let sym = this.checker.getSymbolAtLocation(e);
    if (sym && sym.flags & ts.SymbolFlags.Alias) sym = this.checker.getAliasedSymbol(sym);
    const d = sym?.valueDeclaration ?? sym?.declarations?.[0];
    return d && ts.isVariableDeclaration(d) && d.initializer ? d.initializer : undefined;
  }

  private fields(obj: ts.ObjectLiteralExpression, path: string): void {
    const sf = obj.getSourceFile();
    for (const p of obj.properties) {
      if (ts.isSpreadAssignment(p)) {
        let e = p.expression;
        if (ts.isPropertyAccessExpression(e) && e.name.text === "entries") e = e.expression; // ...CheckRecord.entries
        const init = ts.isIdentifier(e) ? this.resolve(e) : undefined;
        if (init && ts.isObjectLiteralExpression(init)) this.fields(init, path);
        else if (init) this.schema(init, path, true);
        continue;
      }
      if (!ts.isPropertyAssignment(p) && !ts.isShorthandPropertyAssignment(p)) continue;
      const key = ts.isIdentifier(p.name) || ts.isStringLiteral(p.name) ? p.name.text : undefined;
      if (!key) continue;
      const at = path ? `${path}.${key}` : key;
      const text = docComment(p, sf);
      if (text) this.out[at] = text;
      const value = ts.isPropertyAssignment(p) ? p.initializer : p.name;
      this.schema(value, at);
    }
  }

  /** Walk a valibot schema expression at `path`; `entriesOnly`: a spread of it (its object's fields at path). */
  schema(e: ts.Expression, path: string, entriesOnly = false): void {
    if (ts.isParenthesizedExpression(e) || ts.isAsExpression(e) || ts.isSatisfiesExpression(e)) return this.schema(e.expression, path, entriesOnly);
    if (ts.isIdentifier(e)) {
      const init = this.resolve(e);
      if (!init || this.seen.has(init)) return;
      this.seen.add(init); // a schema that holds itself is walked once along a path
      if (ts.isObjectLiteralExpression(init)) this.fields(init, path);
      else this.schema(init, path, entriesOnly);
      this.seen.delete(init);
      return;
    }
    if (ts.isObjectLiteralExpression(e)) return this.fields(e, path);
    if (!ts.isCallExpression(e)) return;
    const callee = e.expression;
    const fn = ts.isPropertyAccessExpression(callee) ? callee.name.text : ts.isIdentifier(callee) ? callee.text : "";
    const [a0, a1] = e.arguments;
    switch (fn) {
      case "object":
      case "looseObject":
      case "strictObject":
      case "objectWithRest":
        if (a0 && ts.isObjectLiteralExpression(a0)) this.fields(a0, path);
        else if (a0) this.schema(a0, path, true);
        return;
      case "optional":
      case "nullable":
      case "nullish":
      case "undefinedable":
      case "pipe":
      case "lazy":
        if (a0 && ts.isArrowFunction(a0) && !ts.isBlock(a0.body)) return this.schema(a0.body, path);
        if (a0) this.schema(a0, path);
        return;
      case "array":
        if (a0 && !entriesOnly) this.schema(a0, `${path}[]`);
        return;
      case "record":
        if (a1 && !entriesOnly) this.schema(a1, `${path}{}`);
        return;
      case "union":
      case "variant":
      case "intersect": {
        const list = fn === "variant" ? a1 : a0;
        if (list && ts.isArrayLiteralExpression(list)) for (const x of list.elements) this.schema(x, path, entriesOnly);
        return;
      }
      default:
        return;
    }
  }
}

/** Every schema's field descriptions, from the sources as they are now. */
export function schemaDescriptions(): Record<string, Record<string, string>> {
  const prog = program();
  const checker = prog.getTypeChecker();
  const result: Record<string, Record<string, string>> = {};
  const docs = prog.getSourceFile(join(ROOT, "src/format/documents.ts"))!;
  ts.forEachChild(docs, (n) => {
    if (!ts.isVariableStatement(n)) return;
    for (const d of n.declarationList.declarations) {
      if (!ts.isIdentifier(d.name) || d.name.text !== "DOCUMENTS" || !d.initializer) continue;
      let init: ts.Expression = d.initializer;
      while (ts.isSatisfiesExpression(init) || ts.isAsExpression(init)) init = init.expression;
      if (!ts.isObjectLiteralExpression(init)) continue;
      for (const p of init.properties) {
        if (!ts.isPropertyAssignment(p)) continue;
        const name = ts.isIdentifier(p.name) || ts.isStringLiteral(p.name) ? p.name.text : undefined;
        if (!name) continue;
        const w = new Walker(checker);
        w.schema(p.initializer, "");
        result[name] = w.out;
      }
    }
  });
  for (const r of ROOTS) {
    const sf = prog.getSourceFile(join(ROOT, r.file));
    if (!sf) throw new Error(`${r.file}: not found (the schema ${r.name})`);
    ts.forEachChild(sf, (n) => {
      if (!ts.isVariableStatement(n)) return;
      for (const d of n.declarationList.declarations) {
        if (ts.isIdentifier(d.name) && d.name.text === r.schema && d.initializer) {
          const w = new Walker(checker);
          w.schema(d.initializer, "");
          result[r.name] = w.out;
        }
      }
    });
    if (!result[r.name]) throw new Error(`${r.file}: no const ${r.schema} (the schema ${r.name})`);
  }
  return Object.fromEntries(Object.entries(result).sort(([a], [b]) => a.localeCompare(b)));
}

if (import.meta.main) {
  const text = `${JSON.stringify(schemaDescriptions(), null, 1)}\n`;
  if (process.argv.includes("--check")) {
    let now = "";
    try {
      now = readFileSync(OUT, "utf8");
    } catch {}
    if (now !== text) {
      console.error(
        "src/format/schema-descriptions.json is not what the schemas' comments make: run node_modules/.bin/bun scripts/make-schema-descriptions.ts",
      );
      process.exit(1);
    }
  } else writeFileSync(OUT, text);
}
