/**
 * src/frontends/triton/doctor.ts: doctor's Python check runs python3 -c, which puts its working
 * folder first on the module path: it runs in `/`, so a module another user left in the folder
 * kerncap doctor runs in (/tmp, a team folder) is never imported (a trial: json.py ran as the user).
 */
import { expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { checkPython } from "../../../../src/frontends/triton/doctor.ts";
import { tempDir } from "../../fixtures.ts";

test.skipIf(!Bun.which("python3"))("a json.py in the working folder is not imported by doctor's Python check", () => {
  const here = tempDir();
  const marker = join(here, "IMPORTED");
  writeFileSync(join(here, "json.py"), `open(${JSON.stringify(marker)}, "w").write("x")\nraise SystemExit(3)\n`);
  const saved = process.cwd();
  process.chdir(here);
  try {
    const checks = checkPython(process.env);
    expect(existsSync(marker)).toBe(false);
    expect(checks[0]).toMatchObject({ id: "python", status: "ok" });
  } finally {
    process.chdir(saved);
  }
});
