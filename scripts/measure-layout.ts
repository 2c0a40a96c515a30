#!/usr/bin/env bun
/**
 * Print the measures of src/'s layout (scripts/layout.ts): folders and top files, layers, import
 * arrows between them and those running back up the layers, import circles (and those across
 * folders), value-import cycles, the largest files, the files over 600 lines and the functions
 * over 100. docs/layout.md holds the figures of one run. `--json`: one JSON document instead.
 *   node_modules/.bin/bun scripts/measure-layout.ts
 */
import { measureLayout } from "./layout.ts";

const m = measureLayout();
if (process.argv.includes("--json")) {
  console.log(JSON.stringify(m, null, 2));
} else {
  const list = <T>(xs: T[], f: (x: T) => string) => xs.map((x) => `  ${f(x)}`).join("\n");
  console.log(`folders and top files  ${m.units}`);
  console.log(`layers                 ${m.layers}`);
  console.log(`modules                ${m.modules}`);
  console.log(`import arrows          ${m.arrows}`);
  console.log(`arrows up              ${m.arrowsUp.length}${m.arrowsUp.length ? "\n" + list(m.arrowsUp, (a) => `${a.from} → ${a.to} (${a.via})`) : ""}`);
  console.log(
    `import circles         ${m.circles.length} (${m.circlesAcrossFolders.length} across folders)${m.circles.length ? "\n" + list(m.circles, (c) => c.join(" ↔ ")) : ""}`,
  );
  console.log(`value-import cycles    ${m.valueCycles.length}`);
  console.log(`files over 600 lines   ${m.filesOver.length}${m.filesOver.length ? "\n" + list(m.filesOver, (f) => `${f.lines} ${f.file}`) : ""}`);
  console.log(
    `functions over 100     ${m.longFunctions.length}${m.longFunctions.length ? "\n" + list(m.longFunctions, (f) => `${f.lines} ${f.file}:${f.line} ${f.name}`) : ""}`,
  );
  console.log(`largest files\n${list(m.largestFiles, (f) => `${f.lines} ${f.file}`)}`);
}
