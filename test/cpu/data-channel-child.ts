// A child of data-channel.test.ts: a --json document of SIZE bytes through kerncap's data channel.
import { keepStdoutForData, printJson } from "../../src/cli/args.ts";

keepStdoutForData();
printJson("error", { error: { code: "E_TEST", message: "x".repeat(Number(process.argv[2])), hint: null } });
